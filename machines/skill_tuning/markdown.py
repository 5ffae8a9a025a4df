"""The parts of a skill's markdown the diagnoses read: fenced code blocks, and which of their
lines are really code.

A skill explains itself with pictures and examples as much as with code, and those must not be
diagnosed as if they ran. So a fenced block's lines are sorted into code and prose:

* **Diagram lines** are never code: a line drawn with box-drawing characters (one starts or
  ends it, as in ``│ → ccw cli │`` and ``├── state.json``, or two stand together, as in
  ``──``; a lone one inside a string is code), and in a block framed with ASCII art (a line
  starting ``+--``) its ``|`` framed lines and ``+--`` rules. A block without a language
  tag that is mostly such lines is a picture as a whole, and none of its lines is code.
* **Blocks that are not code as a whole**: a language tag naming a picture or plain text
  (``text``, ``mermaid``, ``markdown``...), a block under a heading that names examples
  (``## Examples``, ``### Anti-pattern``, ``示例``...), a block anywhere in a section of
  reference material (``## Subagent API Reference`` and its ``### spawn_agent``: what a call
  looks like, not a step that makes it), a block introduced by a line such as ``For
  example:`` or ``❌ Bad:``, or one whose info string says ``example``.

Blockquotes and inline code in prose are never code either: the rules only read fenced blocks,
and a fence inside a blockquote (``> ```js``) does not open one.

More that is not code, each a false finding once on CCW's own skills:

* **Flow pictures without box characters**: an untagged block with a line that is only a
  connector (``|``, ``v``, ``↓``, ``-->``) is a picture as a whole (``Phase 1 ... | v Phase 2``).
* **Examples marked inside the block**: a comment line such as ``# BAD``, ``// ✅ GOOD``,
  ``// Before:`` makes the block an example.
* **Comments**: a line that is only a comment is not code, and the code of a line stops where
  its comment starts (:mod:`.lexer`): ``# try`` or ``// validate`` is no error handling.
* **Specifications**: the blocks of a file under ``specs/`` illustrate rules, formats and
  patterns; the workflow runs SKILL.md and phases/ (``Skill.workflow_files``), so the rules
  about behaviour do not read specifications (the field-name rule does: a schema there is the
  reference spelling). ``examples=True`` marks every block of a text as an example.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lexer import Lexed, lex

__all__ = ["CodeBlock", "parse_code_blocks"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)(.*)$")
_BOX = re.compile("^[\u2500-\u257f]|[\u2500-\u257f]$|[\u2500-\u257f]{2}")
_ASCII_RULE = re.compile(r"^\s*\+[-=+]{2,}")
_ASCII_FRAMED = re.compile(r"^\s*\|(?:.*\|)?\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
_EXAMPLE_TITLE = re.compile(
    r"\bexamples?\b|\bsamples?\b|\banti-?patterns?\b|\bbad\b|\bwrong\b|\bavoid\b|❌"
    r"|示例|例子|样例|反例",
    re.IGNORECASE,
)
_REFERENCE_TITLE = re.compile(r"\bAPI\b|\breference\b", re.IGNORECASE)
"""Headings of reference material: what a tool's or API's calls look like, not a step."""
_EXAMPLE_LEAD = re.compile(
    r"(?:\bexamples?\b|\be\.g\.|\bfor instance\b|\bbad\b|\bwrong\b|❌|示例|例如|反例).*:\**\s*$",
    re.IGNORECASE,
)
_CONNECTOR = re.compile(r"^\s*(?:[|│┃↓↑▼▲^v]|[-=]+>|<[-=]+)\s*$")
_EXAMPLE_COMMENT = re.compile(
    r"^\s*(?://|#|/\*|--)\s*\**\s*(?:❌|✅|bad\b|good\b|wrong\b|anti-?patterns?\b|examples?\b"
    r"|e\.g\.|示例|反例|(?:before|after|old|new)\s*:)",
    re.IGNORECASE,
)
NOT_CODE_LANGUAGES = frozenset(
    {
        "text", "txt", "plain", "plaintext", "ascii", "diagram", "art", "tree",
        "mermaid", "dot", "graphviz", "plantuml", "markdown", "md", "output", "log",
    }
)  # fmt: skip
"""Language tags of fenced blocks that hold pictures or text, never code."""


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its language tag, its lines with their 1-based line numbers, and
    which of them are not code (``prose``: line numbers of diagram or example lines)."""

    lang: str
    start: int
    lines: tuple[str, ...]
    prose: frozenset[int] = field(default=frozenset())
    closed: bool = True
    lexed: tuple[Lexed, ...] = ()

    def numbered(self) -> list[tuple[int, str]]:
        """``(line number, code)`` for every code line inside the fences, comments removed."""
        codes = [item.code for item in self.lexed] if self.lexed else list(self.lines)
        return [
            (self.start + offset, text)
            for offset, text in enumerate(codes)
            if self.start + offset not in self.prose
        ]

    def skeleton(self) -> list[tuple[int, str]]:
        """``(line number, code)`` of the code lines with the contents of strings blanked."""
        skeletons = [item.skeleton for item in self.lexed] if self.lexed else list(self.lines)
        return [
            (self.start + offset, text)
            for offset, text in enumerate(skeletons)
            if self.start + offset not in self.prose
        ]

    @property
    def text(self) -> str:
        """The block's code lines as one string."""
        return "\n".join(text for _number, text in self.numbered())

    @property
    def is_code(self) -> bool:
        """Whether any line of the block is code."""
        return len(self.prose) < len(self.lines)


def _diagram_offsets(lines: list[str]) -> set[int]:
    framed = any(_ASCII_RULE.match(line) for line in lines)
    return {
        offset
        for offset, line in enumerate(lines)
        if _BOX.search(line.strip())
        or (framed and (_ASCII_RULE.match(line) or _ASCII_FRAMED.match(line)))
    }


def _introduced_as_example(
    lines: list[str], fence: int, headings: list[tuple[int, int, str]]
) -> bool:
    """Whether the block opening at index ``fence`` sits in an example section, in a reference
    section or one of its subsections (``## Subagent API Reference`` / ``### spawn_agent``), or
    right after a line announcing an example. ``headings`` are the file's (:func:`_headings`)."""
    lead = next((line for line in reversed(lines[:fence]) if line.strip()), "")
    if _EXAMPLE_LEAD.search(lead) and not _HEADING.match(lead):
        return True
    level = 7
    for index, depth, title in reversed(headings):
        if index >= fence or depth >= level:
            continue  # a sibling's heading or a deeper one: not a section holding the block
        if level == 7 and _EXAMPLE_TITLE.search(title):
            return True
        if _REFERENCE_TITLE.search(title):
            return True
        level = depth
    return False


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every heading of the text, outside fenced blocks."""
    found = []
    fence: str | None = None
    for index, line in enumerate(lines):
        opening = _FENCE.match(line)
        if fence is None and opening is not None:
            fence = opening.group(1)
            continue
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                fence = None
            continue
        heading = _HEADING.match(line)
        if heading is not None:
            level = len(line.strip()) - len(line.strip().lstrip("#"))
            found.append((index, level, heading.group("title")))
    return found


def parse_code_blocks(text: str, *, examples: bool = False) -> tuple[CodeBlock, ...]:
    """Every fenced code block of a markdown text; an unclosed fence runs to the end.
    ``examples``: every block of the text illustrates (a specification), none is code."""
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    headings = _headings(lines)
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, lang, info = opening.group(1), opening.group(2).lower(), opening.group(3)
        example = (
            examples or _introduced_as_example(lines, index, headings) or "example" in info.lower()
        )
        body: list[str] = []
        index += 1
        start = index + 1
        closed = False
        while index < len(lines):
            stripped = lines[index].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                closed = True
                break
            body.append(lines[index])
            index += 1
        lexed = tuple(lex(body, lang))
        example = example or any(_EXAMPLE_COMMENT.match(line) for line in body)
        comments = {
            start + offset
            for offset, (line, item) in enumerate(zip(body, lexed, strict=True))
            if line.strip() and not item.code.strip()
        }
        prose = _prose(lang, body, start, example) | comments
        blocks.append(CodeBlock(lang, start, tuple(body), prose, closed, lexed))
        index += 1
    return tuple(blocks)


def _prose(lang: str, body: list[str], start: int, example: bool) -> frozenset[int]:
    everything = frozenset(range(start, start + len(body)))
    if example or lang in NOT_CODE_LANGUAGES:
        return everything
    diagram = _diagram_offsets(body)
    written = sum(1 for line in body if line.strip())
    if not lang and diagram and 2 * len(diagram) >= written:
        return everything
    if not lang and any(_CONNECTOR.match(line) for line in body):
        return everything
    return frozenset(start + offset for offset in diagram)
