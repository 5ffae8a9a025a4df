"""Whether copying an instance over another copy of it loses work (``fsm store import`` and
``export``): the versions of two copies, compared by their journals.

A copy is its document's bytes and its journal's lines. Copying ``source`` over ``target`` loses
nothing when the target's journal is the source's first records (the same lines, byte for
byte: a journal is only ever appended to) and the target's document is the one its own journal
ends with (its last ``doc_hash``) or the source's: the target is then an earlier version of the
source. Anything else (the target has records the source lacks, the two journals part, or the
target's document was changed after its last record, by a dashboard or a script) is a
conflict: refused, unless the person says ``--overwrite``, and then the target is kept first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from fsm.base import jsonio
from fsm.base.update import bytes_hash

__all__ = ["Copy", "compare"]


@dataclass(frozen=True)
class Copy:
    """One copy of an instance: its document's bytes and its journal's lines."""

    raw: bytes
    lines: Sequence[str]

    def version(self) -> str:
        """What people see of its version: the journal's length and hash."""
        digest = hashlib.sha256("\n".join(self.lines).encode("utf-8")).hexdigest()[:12]
        return f"{len(self.lines)} records, journal sha256 {digest}"

    def journaled(self) -> bool:
        """True when the document is the one the journal's last stamped record names (or the
        journal names none)."""
        for line in reversed(self.lines):
            try:
                data = jsonio.loads(line)
            except jsonio.JsonError:
                continue
            named = data.get("doc_hash") if isinstance(data, dict) else None
            if isinstance(named, str):
                return named == bytes_hash(self.raw)
        return True


def compare(source: Copy, target: Copy | None) -> str:
    """``new`` (no target), ``same``, ``behind`` (the target is an earlier version of the
    source: copying loses nothing), or why copying would lose the target's work (a conflict)."""
    if target is None:
        return "new"
    if target.raw == source.raw and list(target.lines) == list(source.lines):
        return "same"
    ours, theirs = list(source.lines), list(target.lines)
    if len(theirs) > len(ours) and theirs[: len(ours)] == ours:
        return f"it has {len(theirs) - len(ours)} records more ({target.version()})"
    if ours[: len(theirs)] != theirs:
        common = next(
            (n for n, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
            min(len(ours), len(theirs)),
        )
        return (
            f"the journals part after record {common} ({target.version()}, "
            f"against {source.version()})"
        )
    if target.raw != source.raw and not target.journaled():
        return "its document was changed after its journal's last record (by another program)"
    return "behind"
