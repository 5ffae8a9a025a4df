"""The loop's task list: read from the dashboard's JSONL file, or one task from the description.

The dashboard keeps tasks at ``{state_dir}/{loop_id}/tasks.jsonl``; the seeds document
``{state_dir}/{loop_id}.tasks.jsonl``. Both are read (the documented name first), then the
workspace's standing task list named by the ``task_list`` option, if any. One JSON object per
line::

    {"task_id": "task-1737...-9f3a1c07", "description": "...", "tool": "bash", "mode": "write",
     "prompt_template": "...", "order": 0, "command": "make", "on_error": "continue"}

The dashboard rewrites the file without a trailing newline, so a later append glues two records
onto one line; its own parser then drops that line. Here glued records are split and both kept.
A line that is not a task is skipped and reported, never a reason to refuse the whole list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm.context import Context
from machines.ccw_loop.model import DevelopTask

__all__ = [
    "TaskList",
    "description_task",
    "fallback_task_list",
    "read_task_list",
    "task_list_paths",
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


def fallback_task_list(ctx: Context) -> Path | None:
    """The workspace's standing task list (option ``task_list``), if one is configured."""
    name = getattr(ctx.options, "task_list", None)
    return ctx.workspace / name if isinstance(name, str) else None


def read_task_list(
    instance_dir: Path, loop_id: str, now: str, *, fallback: Path | None = None
) -> TaskList:
    """Read the first task-list file that exists (the loop's own, then ``fallback``); an empty
    list when there is none. A configured ``fallback`` that is missing is reported."""
    for path in task_list_paths(instance_dir, loop_id):
        if path.is_file():
            return _parse(path, now)
    if fallback is None:
        return TaskList([])
    if fallback.is_file():
        return _parse(fallback, now)
    return TaskList([], None, [f"task_list {fallback} does not exist; no tasks read from it"])


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
    task_id = record.get("task_id") or record.get("id") or f"task-{index + 1:03d}"
    description = record.get("description")
    if not isinstance(description, str) or not description.strip():
        return None, f"task {task_id} has no description; skipped"
    tool = record.get("tool") or None
    if tool is not None and tool not in _TOOLS:
        return None, f"task {task_id} names unknown tool {tool!r}; skipped"
    mode = _MODES.get(str(record.get("mode") or "write"))
    if mode is None:
        return None, f"task {task_id} has unknown mode {record.get('mode')!r}; skipped"
    extras: dict[str, Any] = {}
    for key in ("prompt_template", "command", "order"):
        if record.get(key) not in (None, ""):
            extras[key] = record[key]
    on_error = record.get("on_error")
    if on_error is not None:
        if on_error not in _ON_ERROR:
            return None, f"task {task_id} has unknown on_error {on_error!r}; skipped"
        extras["on_error"] = on_error
    task = DevelopTask.model_validate(
        {
            "id": str(task_id),
            "description": description.strip(),
            "tool": tool,
            "mode": mode,
            "status": "pending",
            "files_changed": [],
            "created_at": str(record.get("created_at") or now),
            "completed_at": None,
            **extras,
        }
    )
    return task, ""
