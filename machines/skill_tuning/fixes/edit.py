"""Small, exact text edits of skill files, and the ``FileChange`` records that describe them.

Edits keep the file's own line endings and touch nothing but the lines they add or rename, so
that a rollback can be checked byte for byte and a diff shows only the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from ..model import FileChange

__all__ = ["append_section", "insert_after", "modification", "rename_words"]


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def insert_after(text: str, insertions: Mapping[int, list[str]]) -> str:
    """``text`` with new lines inserted after the given 1-based line numbers."""
    newline = _newline(text)
    lines = text.splitlines(keepends=True)
    for number in sorted(insertions, reverse=True):
        index = min(number, len(lines))
        if index and not lines[index - 1].endswith(("\n", "\r")):
            lines[index - 1] += newline
        lines[index:index] = [line + newline for line in insertions[number]]
    return "".join(lines)


def append_section(text: str, section: list[str]) -> str:
    """``text`` with a markdown section (a list of lines) appended after one blank line."""
    newline = _newline(text)
    body = text if not text or text.endswith(("\n", "\r")) else text + newline
    return body + newline + newline.join(section) + newline


def rename_words(text: str, renames: Mapping[str, str], lines: set[int]) -> str:
    """``text`` with whole-word renames applied only on the given 1-based line numbers."""
    patterns = [(re.compile(rf"\b{re.escape(old)}\b"), new) for old, new in renames.items()]
    out = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        renamed = line
        if number in lines:
            for pattern, new in patterns:
                renamed = pattern.sub(new, renamed)
        out.append(renamed)
    return "".join(out)


def modification(file: str, old: str, new: str) -> FileChange:
    """A ``modify`` change with both contents and a unified diff."""
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{file}",
            tofile=f"b/{file}",
        )
    )
    return FileChange(file=file, action="modify", old_content=old, new_content=new, diff=diff)
