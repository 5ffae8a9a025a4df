"""The issues file: JSONL of ``{id, title, status, description?, ...}``, one issue a line.

It belongs to the user (and to the ``ccw issue`` tools), not to the machine. So reading it is
strict (a malformed line is an error naming the file and the line, never a silently skipped
issue), and writing a status back changes only the ``status`` of the lines it names: every other
line, field and line ending is kept as it was. The write is atomic, and if someone else changed
the file between our read and our replace (a person appending an issue), the write starts over
from their version instead of dropping their change.

A missing issues file is an error naming the path that was looked for: the original skill's "0
issues, stop" made a typo in a path, or a run in the wrong folder, look like a finished backlog. An
existing file without issues is a backlog with nothing to do.

Dependencies between issues: CCW's issue exports (the roadmap and spec-generator skills) write
them as ``extended_context.notes.depends_on_issues``, and its queue items as ``depends_on``; an
issue line may carry either (or both: the ids are joined), each a list of issue ids. Anything
else there is an error naming the line, never a dependency silently dropped.

Issues ``ccw issue`` marks completed move to ``issue-history.jsonl`` beside the issues file; a
dependency is looked up there too (:func:`known_statuses`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import write_text_atomic

__all__ = [
    "HISTORY_FILE",
    "IssueRecord",
    "IssuesFileError",
    "known_statuses",
    "missing_file_message",
    "read_issues",
    "write_statuses",
]

_WRITE_ATTEMPTS = 5
HISTORY_FILE = "issue-history.jsonl"
"""Where ``ccw issue`` archives the issues it marks completed, beside the issues file."""


class IssuesFileError(ValueError):
    """The issues file cannot be read or updated; the message names the file and line."""


@dataclass(frozen=True)
class IssueRecord:
    """One issue as the issues file states it."""

    id: str
    title: str
    status: str
    description: str | None
    line: int
    depends_on: tuple[str, ...] = ()


def missing_file_message(path: Path) -> str:
    """The error for an issues file that is not there: the path, and how to give one."""
    return (
        f"no issues file at {path}: create it (one JSON object a line, such as "
        '{"id": "ISS-1", "title": "...", "status": "registered"}), or name yours with the '
        "issues_file option (-o issues_file=PATH, or issues_file in [machine.issue-manager] "
        "of fsm.toml)"
    )


def read_issues(path: Path) -> list[IssueRecord]:
    """Every issue in ``path`` in file order; IssuesFileError when there is no such file."""
    try:
        text = _read_regular(path).decode("utf-8")
    except FileNotFoundError as exc:
        raise IssuesFileError(missing_file_message(path)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise IssuesFileError(f"{path}: cannot read the issues file: {exc}") from exc
    records: list[IssueRecord] = []
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        record = _parse_line(path, number, raw)
        if record.id in first_line:
            raise IssuesFileError(
                f"{path}:{number}: issue {record.id!r} is already defined on line "
                f"{first_line[record.id]}"
            )
        first_line[record.id] = number
        records.append(record)
    return records


def _parse_line(path: Path, number: int, raw: str) -> IssueRecord:
    where = f"{path}:{number}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise IssuesFileError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise IssuesFileError(f"{where}: expected a JSON object, got {type(data).__name__}")
    issue_id, status = data.get("id"), data.get("status")
    if not isinstance(issue_id, str) or not issue_id.strip():
        raise IssuesFileError(f"{where}: 'id' must be a non-empty string")
    if not isinstance(status, str) or not status:
        raise IssuesFileError(f"{where}: issue {issue_id!r} has no 'status' string")
    title, description = data.get("title", ""), data.get("description")
    if not isinstance(title, str):
        raise IssuesFileError(f"{where}: issue {issue_id!r}: 'title' must be a string")
    if description is not None and not isinstance(description, str):
        raise IssuesFileError(f"{where}: issue {issue_id!r}: 'description' must be a string")
    depends_on = _dependencies(data, f"{where}: issue {issue_id!r}")
    return IssueRecord(issue_id, title, status, description, number, depends_on)


def _dependencies(data: dict[str, Any], where: str) -> tuple[str, ...]:
    """The issue ids of ``depends_on`` and ``extended_context.notes.depends_on_issues``, in
    order, each once."""
    found: list[str] = []
    notes = data.get("extended_context")
    notes = notes.get("notes") if isinstance(notes, dict) else None
    for name, value in (
        ("depends_on", data.get("depends_on")),
        (
            "extended_context.notes.depends_on_issues",
            notes.get("depends_on_issues") if isinstance(notes, dict) else None,
        ),
    ):
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise IssuesFileError(f"{where}: '{name}' must be a list of issue ids")
        found += [v for v in value if v not in found]
    return tuple(found)


def known_statuses(path: Path) -> dict[str, str]:
    """Issue id -> status, from the issues file at ``path`` and ``issue-history.jsonl`` beside it
    (the issues file wins). Read leniently: a line that is not an issue is skipped, and a file
    that is missing or unreadable gives nothing; what matters here is whether an issue is
    known to be completed."""
    statuses: dict[str, str] = {}
    for source in (path.with_name(HISTORY_FILE), path):
        try:
            text = _read_regular(source).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            data = _object_or_none(line)
            if data is None:
                continue
            issue_id, status = data.get("id"), data.get("status")
            if isinstance(issue_id, str) and isinstance(status, str):
                statuses[issue_id] = status
    return statuses


def write_statuses(path: Path, statuses: Mapping[str, str]) -> list[str]:
    """Set ``status`` of the issues named in ``statuses``; return the ids found in the file.

    Lines that do not parse, and issues not named, are written back byte for byte.
    """
    if not statuses:
        return []
    for _ in range(_WRITE_ATTEMPTS):
        try:
            before = _read_regular(path)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise IssuesFileError(f"{path}: cannot read the issues file: {exc}") from exc
        try:
            original = before.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IssuesFileError(f"{path}: the issues file is not UTF-8: {exc}") from exc
        text, found = _with_statuses(original, statuses)
        if text is None:
            return found
        if _current_bytes(path) != before:
            continue  # changed under us: redo the edit on the new content
        mode = os.stat(path).st_mode & 0o7777
        write_text_atomic(path, text, mode=mode)
        return found
    raise IssuesFileError(
        f"{path}: the file kept changing while the issue statuses were written back; "
        f"gave up after {_WRITE_ATTEMPTS} attempts"
    )


def _with_statuses(text: str, statuses: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The edited text (None when nothing changes) and the ids found."""
    out: list[str] = []
    found: list[str] = []
    changed = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        data = _object_or_none(body)
        issue_id = data.get("id") if data is not None else None
        if data is None or not isinstance(issue_id, str) or issue_id not in statuses:
            out.append(line)
            continue
        found.append(issue_id)
        if data.get("status") == statuses[issue_id]:
            out.append(line)
            continue
        data["status"] = statuses[issue_id]
        out.append(_dump_like(body, data) + ending)
        changed = True
    return ("".join(out) if changed else None), found


def _object_or_none(body: str) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _dump_like(original: str, data: dict[str, Any]) -> str:
    """Serialize ``data`` in the spacing style of ``original`` (compact, as JSON.stringify)."""
    spaced = '": ' in original
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(data, ensure_ascii=False, separators=separators)


def _current_bytes(path: Path) -> bytes | None:
    try:
        return _read_regular(path)
    except OSError:
        return None


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (OSError when it is anything else: a FIFO
    would block the run until some program wrote into it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a folder)")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)
