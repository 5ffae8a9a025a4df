"""The journal as the page shows it, and time travel: the document and the diagram as of any
record, rebuilt from the journal's patches (:mod:`fsm.model.rebuild`), and the changes between two.

Records are named by their journal line (the number
:meth:`~fsm.store.protocol.JournalLog.scan` gives them): stable while the journal grows, as a
link to a record must be.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fsm.base.errors import InputError
from fsm.base.files import open_nofollow
from fsm.engine.instance import Instance
from fsm.model.patch import diff, paths_of
from fsm.model.rebuild import Check, Rebuilder
from fsm.model.records import Record, parse_record
from fsm.store.journal import LineLog
from fsm.view.diagram import count_visit
from fsm.view.diagram_model import RunOverlay

__all__ = ["Version", "changes_between", "latest_records", "version_at"]

_BLOCK = 1 << 20


def latest_records(instance: Instance, limit: int) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """The latest ``limit`` readable records with their journal lines, oldest first, and
    whether older ones exist. A file journal is read from its end (its lines counted first, a
    count of newlines, far cheaper than reading records); another store's is read through."""
    journal = instance.journal
    if isinstance(journal, LineLog):
        return _file_tail(journal, limit)
    kept: deque[tuple[int, dict[str, Any]]] = deque(maxlen=limit + 1)
    for number, _, data in journal.scan():
        if data is not None:
            kept.append((number, data))
    more = len(kept) > limit
    return list(kept)[-limit:] if limit else [], more


def _file_tail(journal: LineLog, limit: int) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    from fsm.store.journal import _parse

    try:
        fd = open_nofollow(journal.path, os.O_RDONLY)
    except FileNotFoundError:
        return [], False
    try:
        size = os.fstat(fd).st_size
        lines = 0
        position = 0
        while position < size:
            block = os.pread(fd, min(_BLOCK, size - position), position)
            if not block:
                break
            lines += block.count(b"\n")
            position += len(block)
        last = os.pread(fd, 1, size - 1) if size else b"\n"
        number = lines + (0 if last == b"\n" else 1) + 1
        found: list[tuple[int, dict[str, Any]]] = []
        position, carry, block_size, first = size, b"", 65536, True
        while position > 0:
            start = max(0, position - block_size)
            data = os.pread(fd, position - start, start) + carry
            position = start
            pieces = data.split(b"\n")
            carry = pieces.pop(0) if position > 0 else b""
            if first and last == b"\n":
                pieces.pop()  # the empty piece after the final newline is no line
            first = False
            for line in reversed(pieces):
                number -= 1
                record = _parse(line) if line.strip() else None
                if record is not None:
                    if len(found) == limit:
                        return found[::-1], True
                    found.append((number, record))
            block_size = min(block_size * 2, 1 << 22)
        return found[::-1], False
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Version:
    """The document as of one record."""

    line: int
    record: dict[str, Any]
    document: Any
    check: Check
    visits: RunOverlay
    """The visits the records up to this one show (for the diagram), counted as they were
    read: no record is kept."""


def _records(instance: Instance) -> Iterator[tuple[int, Record]]:
    for number, _, data in instance.journal.scan():
        if data is None:
            continue
        try:
            yield number, parse_record(data, number)
        except Exception:  # a line that is no record this fsm reads: skipped, as replay does
            continue


def version_at(instance: Instance, line: int) -> Version:
    """The document as the record on journal ``line`` left it, rebuilt and checked
    (InputError when no record is on that line)."""
    rules = instance.rules
    rebuilder = Rebuilder(lambda data: rules.render(data, instance.id), rules.core_hash)
    visits = RunOverlay("", {}, {}, {})
    for number, record in _records(instance):
        if number > line:
            break
        rebuilder.follow(number, record)
        count_visit(visits, record)
        if number == line:
            return Version(
                line, record.to_json(), rebuilder.snapshot(), rebuilder.check(record), visits
            )
    raise InputError(f"no journal record of '{instance.id}' on line {line}")


def changes_between(instance: Instance, first: int, second: int) -> dict[str, Any]:
    """The patch from the version of the record on line ``first`` to that on ``second``."""
    if first > second:
        first, second = second, first
    older = version_at(instance, first)
    newer = version_at(instance, second)
    known = older.check.verdict != "unknown" and newer.check.verdict != "unknown"
    ops = diff(older.document, newer.document) if known else []
    return {
        "from": first,
        "to": second,
        "known": known,
        "reason": "" if known else (older.check.reason or newer.check.reason),
        "changes": ops,
        "paths": paths_of(ops),
    }
