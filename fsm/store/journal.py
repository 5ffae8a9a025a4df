"""The journal: one NDJSON record per applied transition, control command and failed step.

Records are appended, never rewritten. Their kinds and fields are defined in
:mod:`fsm.model.records` (built by the writers, parsed once here for the readers): each says when,
what, the event, source and destination states, who and why, and the hashes of the document that
resulted, so that ``fsm replay`` can check that the journal reproduces the persisted document. A
torn last line (a crash mid-append) is skipped on reading and reported, never fatal; so is a line
that is not a record this fsm can read (reported with its reason).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from fsm.base import jsonio
from fsm.base.errors import JournalRecordError
from fsm.base.files import append_bytes, finish_append, open_nofollow

if TYPE_CHECKING:
    from fsm.model.records import ErrorRecord, Record

__all__ = ["Journal", "JournalRead", "LineLog", "RotatingLog", "TypedRecords"]

_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND
_BLOCK = 1 << 20
"""Bytes read at a time when a journal is scanned from its start."""
MAX_LINE = 2 * jsonio.MAX_BYTES
"""A journal line longer than this is unreadable (a record holds at most a document's changes,
and a document at most :data:`fsm.base.jsonio.MAX_BYTES`): it is skipped without being held in
memory, so that a torn 200 MB last line costs a reader no more than this."""
_TOO_LONG = b"\x00"
"""What a reader sees of a line over :data:`MAX_LINE`: one unreadable line."""
_BLANK = " \t\r\x0b\x0c"
"""What ``bytes.strip`` strips: a line of nothing else is blank, not unreadable."""
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
"""A record's line when pydantic-core cannot write it (text with lone surrogates)."""


@dataclass
class JournalRead:
    """The records of a journal, and the line numbers that could not be read."""

    records: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    last_line: int = 0

    @property
    def torn_tail(self) -> bool:
        """True when the only unreadable line is the last one (a crash mid-append)."""
        return self.bad_lines == [self.last_line]


@functools.cache
def _pydantic_core() -> tuple[Callable[..., bytes], type[Exception]]:
    """pydantic-core's JSON writer and its error, imported on the first line written (``fsm
    ls`` reads this module and must not import pydantic)."""
    from pydantic_core import PydanticSerializationError, to_json

    return to_json, PydanticSerializationError


def line_bytes(record: Mapping[str, Any]) -> bytes:
    """``record`` as one line of JSON (with its newline): the text of ``json.dumps`` without
    spaces or ASCII escapes, values JSON does not know written as their ``str``. pydantic-core
    writes it (four times faster than ``json``'s encoder: two lines per persisted step); text
    from outside (argv, file names) that holds lone surrogates, which UTF-8 cannot carry, is
    written by ``json`` with the surrogates kept visible as escapes rather than losing the
    record."""
    to_json, refused = _pydantic_core()
    try:
        return to_json(record, fallback=str, inf_nan_mode="constants") + b"\n"
    except refused:
        line = _LINE.encode(record) + "\n"
        return line.encode("utf-8", errors="backslashreplace")


class LineLog:
    """An append-only file of JSON lines (never written through a symbolic link, and only
    inside ``root`` when given)."""

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self.root = root
        self._fd: int | None = None

    def append(self, record: Mapping[str, Any]) -> int:
        """Append one record as a line; return the file's size before it (see
        :meth:`append_bytes`)."""
        data = line_bytes(record)
        fd = self._fd
        if fd is not None:  # the usual case, written here: a log line per step
            info = os.fstat(fd)
            if info.st_nlink:
                written = os.write(fd, data)
                if written != len(data):
                    finish_append(fd, data, written, info.st_size)
                return info.st_size
        return self.append_bytes(data)

    def append_bytes(self, data: bytes) -> int:
        """Append ``data`` (whole lines) in one write; return the file's size before it.

        All of it is written or none: a short write (a full disk, a file-size limit) is taken
        back and raised as the OSError it ends with, never left as a torn line.
        """
        if self._fd is None:
            return append_bytes(self.path, data, root=self.root)
        info = os.fstat(self._fd)
        if info.st_nlink == 0:  # removed meanwhile: never write into the void
            self._reopen()
            info = os.fstat(self._fd)
        # The size before: what the end of an O_APPEND file is when nobody else appends (the
        # journal is written under the document lock), without a seek of its own.
        written = os.write(self._fd, data)
        if written != len(data):
            finish_append(self._fd, data, written, info.st_size)
        return info.st_size

    @contextlib.contextmanager
    def kept_open(self) -> Iterator[None]:
        """Keep the file open for appending meanwhile (one open per run, not per record)."""
        self._fd = open_nofollow(self.path, _APPEND, root=self.root)
        try:
            yield
        finally:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    def _reopen(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = open_nofollow(self.path, _APPEND, root=self.root)

    def size(self) -> int:
        """The file's size in bytes (0 when it does not exist)."""
        try:
            return os.stat(self.path, follow_symlinks=False).st_size
        except FileNotFoundError:
            return 0

    def truncate(self, size: int) -> None:
        """Take back what was appended after the file had ``size`` bytes."""
        fd = open_nofollow(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def has_torn_tail(self) -> bool:
        """True when the file does not end with a newline (a crash while appending)."""
        try:
            fd = open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        finally:
            os.close(fd)

    def drop_torn_tail(self) -> bool:
        """Remove a last line that was cut short (a crash while appending); True if there was
        one. Without this, the next append would glue a record onto the torn line."""
        try:
            fd = open_nofollow(self.path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                return False
            position = size
            while position > 0:
                start = max(0, position - 65536)
                cut = os.pread(fd, position - start, start).rfind(b"\n")
                if cut >= 0:
                    os.ftruncate(fd, start + cut + 1)
                    return True
                position = start
            os.ftruncate(fd, 0)
            return True
        finally:
            os.close(fd)

    def read(self) -> JournalRead:
        """Every record; unreadable lines are listed by number instead (see :meth:`scan` for a
        journal too long to hold in memory)."""
        result = JournalRead()
        for number, _, record in self.scan():
            result.last_line = number
            if record is None:
                result.bad_lines.append(number)
            else:
                result.records.append(record)
        return result

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
        """``(line number, line, record)`` for every non-blank line, first to last; the record
        is ``None`` when the line is unreadable. The file is read in blocks, so memory does not
        grow with its length."""
        number = 0
        for lines in self._blocks():
            # Decoded a block at a time ("\n" never is part of another UTF-8 character);
            # only "\n" ends a record: str.splitlines would also split at U+2028 or NEL.
            for text in lines.decode("utf-8", errors="replace").split("\n"):
                number += 1
                if text.strip(_BLANK):
                    yield number, text, _parse_text(text) if len(text) <= MAX_LINE else None

    def _blocks(self) -> Iterator[bytes]:
        """The file's whole lines, a block at a time, without the newline that ends the block
        (the last block: the file's last line, if it has no newline)."""
        try:
            fd = open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            carry = b""  # a line whose end lies in the next block
            skipping = False  # inside a line over MAX_LINE: read on to its end, keeping nothing
            while block := os.read(fd, _BLOCK):
                if skipping:
                    end = block.find(b"\n")
                    if end < 0:
                        continue
                    skipping = False
                    yield _TOO_LONG
                    block = block[end + 1 :]
                data = carry + block
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry, skipping = (b"", True) if len(data) > MAX_LINE else (data, False)
                    continue
                carry = data[cut + 1 :]
                yield data[:cut]
            if skipping:
                yield _TOO_LONG
            elif carry:
                yield carry
        finally:
            os.close(fd)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (record for _, _, record in self.scan() if record is not None)


class RotatingLog(LineLog):
    """A line log that keeps its size bounded: past ``max_bytes`` the file is renamed to
    ``<name>.1`` (replacing the previous one) and a new file is started, so an instance's log
    never holds more than about twice ``max_bytes``. The journal is never rotated: it is the
    instance's history."""

    def __init__(self, path: Path, root: Path | None = None, max_bytes: int = 4 << 20) -> None:
        super().__init__(path, root)
        self.max_bytes = max_bytes

    def append(self, record: Mapping[str, Any]) -> int:
        """Append one record; rotate when the file has grown past ``max_bytes``."""
        before = super().append(record)
        if before >= self.max_bytes:
            with contextlib.suppress(OSError):  # another process rotated it first
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            if self._fd is not None:
                self._reopen()
        return before


class _Lines(Protocol):
    """What every journal has, whatever keeps it: the JSON objects of its lines."""

    def append(self, record: Mapping[str, Any]) -> int: ...

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | None]]: ...

    def backwards(self) -> Iterator[dict[str, Any]]: ...


class _Typed(_Lines, Protocol):
    def entries(self) -> Iterator[tuple[int, Record | JournalRecordError | None]]: ...

    def records_backwards(self) -> Iterator[Record]: ...


@functools.cache
def _model() -> ModuleType:
    """:mod:`fsm.model.records`, imported when a record is first read or written (a listing
    answered from its index, or a store opened to look at documents, reads none)."""
    from fsm.model import records

    return records


def _typed(data: dict[str, Any] | None, number: int) -> Record | JournalRecordError | None:
    """The entry of line ``number`` that parsed as ``data`` (None: it did not parse)."""
    if data is None:
        return None
    try:
        return _model().parse_record(data, number)  # type: ignore[no-any-return]
    except JournalRecordError as exc:
        return exc


class TypedRecords:
    """The typed reading and writing of a journal (:mod:`fsm.model.records`), mixed into a class
    that has ``append`` (a JSON object), ``scan`` (first to last) and ``backwards`` (last to first).

    The file journal (:class:`Journal`) and other stores' journals
    (:class:`fsm.testing.MemoryJournal`) share it, so that a record is written and read the
    same way wherever it lives.
    """

    def write(self: _Lines, record: Record) -> int:
        """Append ``record``; return the journal's mark before it."""
        return self.append(record.to_json())

    def entries(self: _Lines) -> Iterator[tuple[int, Record | JournalRecordError | None]]:
        """``(line number, record)`` for every line, first to last: the record is None when the
        line is unreadable (torn, not JSON), a JournalRecordError when it is JSON that is not a
        record this fsm reads (it does not fit its kind, or a newer fsm wrote it)."""
        for number, _, data in self.scan():
            yield number, _typed(data, number)

    def records(self: _Typed) -> list[Record]:
        """Every record this fsm can read, first to last (other lines are left out)."""
        record_type = _model().Record
        return [r for _, r in self.entries() if isinstance(r, record_type)]

    def records_backwards(self: _Lines) -> Iterator[Record]:
        """The records this fsm can read, last to first."""
        parse_record = _model().parse_record
        for data in self.backwards():
            try:
                yield parse_record(data, 0)  # numbered from the end: no line number
            except JournalRecordError:
                continue

    def last(self: _Typed) -> Record | None:
        """The last readable record (read from the end: cheap on long journals)."""
        return next(self.records_backwards(), None)

    def last_error(self: _Typed) -> ErrorRecord | None:
        """The latest failed-step record not followed by a step that worked, if any."""
        records = _model()
        error: type[ErrorRecord] = records.ErrorRecord
        for record in self.records_backwards():
            if isinstance(record, records.TransitionRecord):
                return None
            if isinstance(record, error):
                return record
        return None


class Journal(TypedRecords, LineLog):
    """The instance journal: typed records (:mod:`fsm.model.records`) over the JSON lines.

    :meth:`entries`, :meth:`records`, :meth:`last` and :meth:`last_error` read typed records;
    the inherited :meth:`scan` and :meth:`read`, and :meth:`backwards`, give the objects as the
    lines hold them (``fsm history --json`` shows them so).
    """

    def write_all(self, records: Sequence[Record]) -> int:
        """Append ``records`` in one write, all or none; return the journal's size before."""
        if len(records) == 1:
            return self.append_bytes(line_bytes(records[0].to_json()))
        return self.append_bytes(b"".join(line_bytes(r.to_json()) for r in records))

    def entries(self) -> Iterator[tuple[int, Record | JournalRecordError | None]]:
        """``(line number, record)`` for every non-blank line, first to last: the record is None
        when the line is unreadable (torn, not JSON), a JournalRecordError when it is JSON that
        is not a record this fsm reads (it does not fit its kind, or a newer fsm wrote it)."""
        # The loop of :meth:`scan`, with :func:`_parse_text`'s fast path inlined: this is the
        # loop of replay and history, at 100,000 records a second. pydantic-core reads the
        # line's bytes (it refuses bytes that are not UTF-8, which then get the careful
        # reader's verdict on their decoded text): a line that parses is never decoded.
        from_json, limit, depth = _from_json(), _fast_limit(), jsonio.MAX_DEPTH
        number = 0
        for lines in self._blocks():
            for line in lines.split(b"\n"):
                number += 1
                data = None
                if len(line) <= limit and line.count(b"[") + line.count(b"{") <= depth:
                    try:
                        data = from_json(line, allow_inf_nan=False, cache_strings="keys")
                    except ValueError:
                        data = None
                if type(data) is not dict:
                    text = line.decode("utf-8", errors="replace")
                    if not text.strip(_BLANK):  # asked only here: a record is never blank
                        continue
                    data = _parse_text(text)  # the careful reader's verdict
                yield number, _typed(data, number)

    def backwards(self) -> Iterator[dict[str, Any]]:
        """The readable objects from the last line to the first, as the lines hold them, reading
        the file from its end in blocks, so that a command needing only the latest records never
        reads the whole journal. Unreadable lines (a torn last line) are skipped."""
        try:
            fd = open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            position = os.fstat(fd).st_size
            carry = b""  # the start of a line whose beginning lies in an earlier block
            skipping = False  # inside a line over MAX_LINE: read back to its start, keeping nothing
            block = 65536
            while position > 0:
                start = max(0, position - block)
                data = os.pread(fd, position - start, start)
                position = start
                if skipping:
                    cut = data.rfind(b"\n")
                    if cut < 0:
                        continue
                    skipping = False
                    data = data[: cut + 1]
                else:
                    data += carry
                lines = data.split(b"\n")
                carry = lines.pop(0) if position > 0 else b""
                if len(carry) > MAX_LINE:
                    carry, skipping = b"", True
                for line in reversed(lines):
                    record = _parse(line) if line.strip() and len(line) <= MAX_LINE else None
                    if record is not None:
                        yield record
                block = min(block * 2, 1 << 22)
        finally:
            os.close(fd)


def _parse(line: bytes) -> dict[str, Any] | None:
    """The record on ``line``, or None when it is unreadable (torn, hostile, not an object).

    Bytes that are not UTF-8 become U+FFFD rather than costing the whole record.
    """
    return _parse_text(line.decode("utf-8", errors="replace"))


def _parse_text(text: str) -> dict[str, Any] | None:
    """The record in ``text`` (see :func:`_parse`).

    A line that is plainly one JSON object within the limits (every line fsm writes: short
    enough that no number in it can pass Python's digit limit, not nested deeper than
    jsonio's limit) is parsed by pydantic's JSON parser, which reads strict JSON as ``json``
    does in half the time; anything it refuses gets :func:`fsm.base.jsonio.loads`'s full checks
    and their verdict (a lone surrogate escape, say, which ``json`` reads).
    """
    record: Any = None
    if len(text) <= _fast_limit() and text.count("[") + text.count("{") <= jsonio.MAX_DEPTH:
        try:
            record = _from_json()(text, allow_inf_nan=False, cache_strings="keys")
        except ValueError:
            record = None
    if record is None:
        try:
            record = jsonio.loads(text)
        except jsonio.JsonError:
            return None
    return record if isinstance(record, dict) else None


@functools.cache
def _from_json() -> Callable[..., Any]:
    # Imported at the first record read: fsm ls imports this module and needs no pydantic.
    from pydantic_core import from_json

    return from_json


@functools.cache
def _fast_limit() -> int:
    digits = sys.get_int_max_str_digits()
    return digits if digits else jsonio.MAX_BYTES
