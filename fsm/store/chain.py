"""The journal as a chain: every record written carries a link to the records before it.

A record's line ends with ``"chain":"<link>"``, its last key, where the link is a hash of the
link of the line before it and of the line's own bytes without that key. Editing, deleting,
swapping or repeating lines therefore breaks the chain at the first line touched (the last
line included: its own link no longer fits its bytes), which ``fsm replay`` reports by line.

The link works on the bytes as they were written: every store keeps a journal line byte for
byte (files, memory, PostgreSQL's ``text`` rows, import and export), so no re-encoding is ever
needed to check it. A line written before records were chained (journal formats 1 and 2) has
no link; the line after it links to the hash of its bytes, so an old journal that a newer fsm
appends to is chained from there on.

The chain finds edits, not forgeries: someone who rewrites a journal and works every link out
again (the hash is not keyed) is not caught by it, as a document edited together with its
hashes is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from hashlib import blake2b
from typing import Any

__all__ = [
    "KEY",
    "LINK_SIZE",
    "START",
    "Check",
    "chained",
    "following",
    "link_of",
    "relinked",
    "split",
    "unlinked",
]

KEY = "chain"
"""The key of a record's link (the last key of its line)."""
LINK_SIZE = 32
"""Hex digits of a link (128 bits: no accidental collision in any journal)."""
START = b""
"""The link before a journal's first line."""
_MARK = b',"' + KEY.encode() + b'":"'
_TAIL = len(_MARK) + LINK_SIZE + 2  # the mark, the link, then '"}'


def _link(previous: bytes, body: bytes) -> bytes:
    return blake2b(previous + b"\n" + body, digest_size=LINK_SIZE // 2).hexdigest().encode()


def chained(line: bytes, previous: bytes) -> tuple[bytes, bytes]:
    """``line`` (one JSON object without its newline, as :func:`fsm.store.journal.line_bytes`
    writes it) with its link after ``previous`` (the link of the line before: :data:`START`
    for the first), and that link."""
    link = _link(previous, line)
    return line[:-1] + _MARK + link + b'"}', link


def split(line: bytes) -> tuple[bytes, bytes] | None:
    """``(the line without its link, the link)``, or None when the line has no link."""
    if len(line) <= _TAIL or line[-_TAIL : -_TAIL + len(_MARK)] != _MARK or line[-2:] != b'"}':
        return None
    return line[:-_TAIL] + b"}", line[-LINK_SIZE - 2 : -2]


def unlinked(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` without the link it was read with (a record written again is linked anew)."""
    if KEY not in record:
        return record
    return {key: value for key, value in record.items() if key != KEY}


def following(line: bytes) -> bytes:
    """The link the line after ``line`` follows (``line``'s own, or the hash of its bytes when
    it has none), without checking ``line``."""
    parts = split(line)
    return _link(START, line) if parts is None else parts[1]


def link_of(line: bytes, previous: bytes) -> tuple[bytes, bool | None]:
    """The link the line after ``line`` follows, and whether ``line`` fits the chain after
    ``previous``: a linked line's own link (True when its bytes give it, False when they do
    not), else the hash of an unlinked line's bytes (None: it has no link to check)."""
    parts = split(line)
    if parts is None:
        return _link(START, line), None
    body, link = parts
    return link, _link(previous, body) == link


class Check:
    """Follows a journal's lines, first to last, and keeps where the chain first breaks.

    A line breaks the chain when its link does not fit its bytes and the line before (it, or
    a line before it, was changed, removed, added or moved), or when it has no link although
    a line before it had (a link taken out). Blank lines are not lines of the journal.
    """

    def __init__(self) -> None:
        self.previous = START
        self.linked = False
        self.broken: tuple[int, str] | None = None
        """The line number where the chain first breaks, and why."""
        self.breaks = 0

    def see(self, number: int, line: bytes) -> None:
        """Follow line ``number`` (its bytes, without the newline)."""
        link, fits = link_of(line, self.previous)
        self.previous = link
        if fits is None:
            if self.linked:
                self._break(number, "it has no chain link though the records before it have")
            return
        self.linked = True
        if not fits:
            self._break(
                number,
                "the chain breaks here: this record, or the one before it, was changed, "
                "removed, added or moved since it was written",
            )

    def _break(self, number: int, why: str) -> None:
        self.breaks += 1
        if self.broken is None:
            self.broken = (number, why)


def relinked(lines: Iterable[bytes]) -> Iterator[bytes]:
    """``lines`` (records without their newlines) linked anew, first to last, their own links
    dropped: how benchmarks and tests make a long journal out of copies of real records."""
    previous = START
    for line in lines:
        parts = split(line)
        linked, previous = chained(line if parts is None else parts[0], previous)
        yield linked
