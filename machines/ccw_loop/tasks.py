"""The loop's task list: read from the dashboard's JSONL file, or one task from the description.

The dashboard keeps tasks at ``{state_dir}/{loop_id}/tasks.jsonl``; CCW's skills document
``{state_dir}/{loop_id}.tasks.jsonl``. The loop's task list is both (the documented file's tasks
first, then the dashboard file's tasks it does not already hold), else the workspace's standing
task list named by the ``task_list`` option, if any. One JSON object per line::

    {"task_id": "task-1737...-9f3a1c07", "description": "...", "tool": "bash", "mode": "write",
     "prompt_template": "...", "order": 0, "command": "make", "on_error": "continue"}

The dashboard rewrites the file without a trailing newline, so a later append glues two records
onto one line; its own parser then drops that line. Here glued records are split and both kept.
A line that is not a JSON object is skipped and reported. An object that cannot be run (no
description, an unknown tool, mode or on_error, an id unsafe as a name) is still a task of the
list: it becomes a *failed* task saying why, so the loop cannot complete without it. Task ids are
checked like instance ids (:func:`fsm.helpers.validate_id`); an unsafe one is replaced by
``invalid-task-<hash>`` and shown, escaped, only in the task's error.

Tasks added to the file after init (the dashboard's add-task button) are found by
:func:`waiting_task_ids` and loaded by :func:`new_tasks` when develop takes the next task.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm.errors import InvalidIdError
from fsm.helpers import validate_id

from .model import DevelopTask
from .options import LoopContext

__all__ = [
    "TaskList",
    "description_task",
    "fallback_task_list",
    "new_tasks",
    "read_task_list",
    "task_list_paths",
    "task_list_stamps",
    "waiting_task_ids",
]

_TOOLS = {"bash", "gemini", "qwen", "codex", "claude"}
_MODES = {"analysis": "analysis", "write": "write", "review": "analysis"}
_ON_ERROR = {"continue", "pause", "fail_fast"}


@dataclass(frozen=True)
class TaskList:
    """Tasks read from a task-list file, the file they came from, and lines that were skipped."""

    tasks: list[DevelopTask]
    source: Path | None = None
    problems: list[str] = field(default_factory=list)


def task_list_paths(instance_dir: Path, loop_id: str) -> list[Path]:
    """Where a loop's task list may be, in the order they are tried."""
    return [instance_dir / f"{loop_id}.tasks.jsonl", instance_dir / loop_id / "tasks.jsonl"]


def fallback_task_list(ctx: LoopContext) -> Path | None:
    """The workspace's standing task list (option ``task_list``), if one is configured."""
    name = ctx.options.task_list
    return ctx.workspace / name if isinstance(name, str) else None


def task_list_stamps(ctx: LoopContext) -> dict[str, str]:
    """The loop's task-list files (both layouts and the ``task_list`` option) that exist, by
    their name in the workspace, and a stamp of each (a fix may not add itself tasks)."""
    paths = task_list_paths(ctx.instance_dir, ctx.instance_id)
    fallback = fallback_task_list(ctx)
    found: dict[str, str] = {}
    for path in [*paths, *([fallback] if fallback is not None else [])]:
        with contextlib.suppress(OSError):
            stamp = hashlib.sha256(path.read_bytes()).hexdigest()
            name = path.relative_to(ctx.workspace) if path.is_relative_to(ctx.workspace) else path
            found[Path(name).as_posix()] = stamp
    return found


def read_task_list(
    instance_dir: Path, loop_id: str, now: str, *, fallback: Path | None = None
) -> TaskList:
    """The loop's own task-list files (both layouts), else ``fallback``; an empty list when there
    is none. A configured ``fallback`` that is missing is reported."""
    own = [path for path in task_list_paths(instance_dir, loop_id) if path.is_file()]
    if own:
        lists = [_parse(path, now) for path in own]
        tasks: list[DevelopTask] = []
        seen: set[str] = set()
        for listed in lists:
            for task in listed.tasks:
                if task.id not in seen:
                    seen.add(task.id)
                    tasks.append(task)
        return TaskList(tasks, own[0], [p for listed in lists for p in listed.problems])
    if fallback is None:
        return TaskList([])
    if fallback.is_file():
        return _parse(fallback, now)
    return TaskList([], None, [f"task_list {fallback} does not exist; no tasks read from it"])


def new_tasks(
    instance_dir: Path, loop_id: str, now: str, known: Iterable[str], *, fallback: Path | None
) -> TaskList:
    """Tasks of the task list that are not among the ``known`` ids (added after init)."""
    listed = read_task_list(instance_dir, loop_id, now, fallback=fallback)
    held = set(known)
    return TaskList([t for t in listed.tasks if t.id not in held], listed.source, listed.problems)


_ids_cache: dict[tuple[Path, ...], tuple[tuple[tuple[int, int, int], ...], list[str]]] = {}


def waiting_task_ids(
    instance_dir: Path, loop_id: str, known: Iterable[str], *, fallback: Path | None
) -> list[str]:
    """Ids of task-list tasks the document does not hold yet. Guards ask on every step, so the
    ids are kept while the files are unchanged (same inode, size and modification time)."""
    paths = (*task_list_paths(instance_dir, loop_id), *([fallback] if fallback else []))
    stamps = tuple(_stamp(path) for path in paths)
    cached = _ids_cache.get(paths)
    if cached is None or cached[0] != stamps:
        ids = [t.id for t in read_task_list(instance_dir, loop_id, "", fallback=fallback).tasks]
        if len(_ids_cache) > 256:
            _ids_cache.clear()
        _ids_cache[paths] = cached = (stamps, ids)
    held = set(known)
    return [task_id for task_id in cached[1] if task_id not in held]


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        info = path.stat()
    except OSError:
        return (0, 0, 0)
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def description_task(description: str, now: str) -> DevelopTask:
    """The single task of a loop without a task list: an agent implements the description."""
    return DevelopTask(
        id="task-001",
        description=description,
        tool=None,
        mode="write",
        status="pending",
        files_changed=[],
        created_at=now,
        completed_at=None,
    )


def _parse(path: Path, now: str) -> TaskList:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return TaskList([], path, [f"{path.name}: cannot read the task list: {exc}"])
    rows: list[tuple[float, int, dict[str, Any]]] = []
    problems: list[str] = []
    position = 0
    for number, line in enumerate(text.splitlines(), start=1):
        records, error = _split_records(line)
        if error:
            problems.append(f"{path.name}:{number}: {error}; line skipped")
        for record in records:
            order = record.get("order")
            key = float(order) if isinstance(order, int | float) else float("inf")
            rows.append((key, position, record))
            position += 1
    tasks: list[DevelopTask] = []
    seen: set[str] = set()
    for _, index, record in sorted(rows, key=lambda row: (row[0], row[1])):
        task, problem = _task_from(record, now, index)
        if problem:
            problems.append(f"{path.name}: {problem}")
        if task is not None and task.id not in seen:
            seen.add(task.id)
            tasks.append(task)
    return TaskList(tasks, path, problems)


def _split_records(line: str) -> tuple[list[dict[str, Any]], str | None]:
    """Decode every JSON object on ``line`` (several when the dashboard glued them together)."""
    decoder = json.JSONDecoder()
    records: list[dict[str, Any]] = []
    rest = line.strip()
    while rest:
        try:
            value, end = decoder.raw_decode(rest)
        except json.JSONDecodeError as exc:
            return records, f"not valid JSON ({exc.msg})"
        if not isinstance(value, dict):
            return records, "not a JSON object"
        records.append(value)
        rest = rest[end:].lstrip()
    return records, None


def _task_from(record: dict[str, Any], now: str, index: int) -> tuple[DevelopTask | None, str]:
    """The task of one record: runnable, or failed with the reason it cannot run."""
    raw_id = record.get("task_id") or record.get("id") or f"task-{index + 1:03d}"
    task_id = str(raw_id)
    problems: list[str] = []
    try:
        validate_id(task_id)
    except InvalidIdError:
        shown = task_id.encode("unicode_escape").decode("ascii")[:200]
        problems.append(
            f"its id '{shown}' is not safe as a name (use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, without '..')"
        )
        # named after the raw id, so that a re-read of the list yields the same task
        task_id = (
            "invalid-task-" + hashlib.sha256(task_id.encode("utf-8", "replace")).hexdigest()[:8]
        )
    description = record.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("it has no description")
        description = "(no description)"
    tool = record.get("tool") or None
    if tool is not None and tool not in _TOOLS:
        problems.append(
            f"it names unknown tool {str(tool)[:50]!r} (use {', '.join(sorted(_TOOLS))})"
        )
        tool = None
    mode = _MODES.get(str(record.get("mode") or "write"))
    if mode is None:
        problems.append(f"it has unknown mode {str(record.get('mode'))[:50]!r}")
        mode = "write"
    extras: dict[str, Any] = {}
    for key in ("prompt_template", "command", "order"):
        if record.get(key) not in (None, ""):
            extras[key] = record[key]
    allow = record.get("allow_test_changes")
    if allow is not None:
        if isinstance(allow, bool):
            extras["allow_test_changes"] = allow
        else:
            problems.append(f"its allow_test_changes {str(allow)[:50]!r} is not true or false")
    on_error = record.get("on_error")
    if on_error is not None:
        if on_error in _ON_ERROR:
            extras["on_error"] = on_error
        else:
            problems.append(f"it has unknown on_error {str(on_error)[:50]!r}")
    fields: dict[str, Any] = {
        "id": task_id,
        "description": description.strip(),
        "tool": tool,
        "mode": mode,
        "status": "pending",
        "files_changed": [],
        "created_at": str(record.get("created_at") or now),
        "completed_at": None,
        **extras,
    }
    if not problems:
        return DevelopTask.model_validate(fields), ""
    error = "cannot run: " + "; ".join(problems)
    fields.update(status="failed", completed_at=now, error=error)
    return DevelopTask.model_validate(fields), f"task {task_id} {error}"
