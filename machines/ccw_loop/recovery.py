"""Rebuilding a loop whose master file is corrupt, from what survives beside it.

``skill_state`` is rebuilt from the progress files and the task list: tasks from the task list
and develop.md, their outcomes from changes.log, debug from hypotheses.json, validation from
test-results.json, and the action history from the iteration numbers every record carries.
The API fields belong to the dashboard: they are salvaged from the readable part of the corrupt
file when possible; what cannot be salvaged is reported, and filled with the dashboard's default
only where the document cannot exist without a value. ``status`` falls back to ``paused``, so that
nothing runs until a person has checked the recovered loop and resumed it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

from fsm.registry import Recovery

from .bookkeeping import dump_task
from .model import DebugState, DevelopTask, LoopState, LoopStatus
from .options import LoopContext
from .progress import ProgressFiles
from .tasks import fallback_task_list, read_task_list

__all__ = ["recover_loop", "salvage_api_fields"]

_API_TEXT = (
    "title",
    "description",
    "status",
    "created_at",
    "updated_at",
    "completed_at",
    "failure_reason",
)
_API_NUMBERS = ("max_iterations",)
_NULLABLE = ("completed_at", "failure_reason")
_TASK_LINE = re.compile(r"^- \[( |x)\] (\S+) \((\w+)/(\w+)\): (.*)$", re.M)
_HEADER = re.compile(r"^- (Task|Description|Mode|Max errors|Started): (.*)$", re.M)
_RUN = re.compile(r"^## Run \d+ – iteration (\d+) – (PASSED|FAILED)", re.M)
_OUTCOME = re.compile(r"^- Outcome: (completed|failed|user_exit)", re.M)


def salvage_api_fields(raw_text: str | None) -> dict[str, Any]:
    """API fields readable in ``raw_text`` (whole JSON, or the part before skill_state)."""
    if not raw_text:
        return {}
    try:
        data = json.loads(raw_text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return _usable({k: data[k] for k in (*_API_TEXT, *_API_NUMBERS) if k in data})
    head = raw_text.split('"skill_state"', 1)[0]
    found: dict[str, Any] = {}
    for key in _API_TEXT:
        match = re.search(rf'"{key}"\s*:\s*("(?:[^"\\]|\\.)*")', head)
        if match:
            found[key] = json.loads(match.group(1))
    for key in _API_NUMBERS:
        match = re.search(rf'"{key}"\s*:\s*(\d+(?:\.\d+)?)', head)
        if match:
            found[key] = json.loads(match.group(1))
    return _usable(found)


def _usable(fields: dict[str, Any]) -> dict[str, Any]:
    """Only values the model accepts: a salvaged field never makes the recovery fail."""
    usable: dict[str, Any] = {}
    for key, value in fields.items():
        if key in _API_NUMBERS:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 1
        elif key == "status":
            ok = value in get_args(LoopStatus)
        else:
            ok = isinstance(value, str) or (value is None and key in _NULLABLE)
        if ok:
            usable[key] = value
    return usable


def recover_loop(ctx: LoopContext, raw_text: str | None) -> Recovery:
    """The rebuilt document and a note for every field that could not be recovered."""
    loop_id = ctx.instance_id
    files = ProgressFiles.of(ctx.instance_dir, loop_id)
    notes: list[str] = []
    now = ctx.clock.iso()
    api = salvage_api_fields(raw_text)
    header = _read_header(files)
    history = _history(files)
    outcome = _match(_OUTCOME, files, "summary.md")
    skill_state = _skill_state(ctx, files, header=header, history=history, notes=notes, now=now)

    document: dict[str, Any] = {"loop_id": loop_id, "updated_at": now}
    for key, fallback, source in (
        ("title", header.get("Task"), "develop.md"),
        ("description", header.get("Description"), "develop.md"),
        ("created_at", header.get("Started"), "develop.md (the time the loop was initialised)"),
    ):
        if key in api:
            document[key] = api[key]
        elif fallback is not None:
            document[key] = fallback
            notes.append(f"{key}: not in the corrupt file; taken from {source}")
        else:
            document[key] = "" if key != "created_at" else now
            notes.append(f"{key}: could not be recovered; set to {document[key]!r}, please fix it")
    if "max_iterations" in api:
        document["max_iterations"] = api["max_iterations"]
    else:
        document["max_iterations"] = 10
        notes.append("max_iterations: could not be recovered; set to the dashboard default 10")
    if "status" in api:
        document["status"] = api["status"]
    elif outcome is not None:
        document["status"] = outcome
        notes.append(f"status: taken from summary.md ({outcome})")
    else:
        document["status"] = "paused"
        notes.append("status: could not be recovered; set to paused (resume to continue)")
    ended = document["status"] in ("completed", "failed", "user_exit")
    for key, expected in (
        ("completed_at", ended),
        ("failure_reason", document["status"] == "failed"),
    ):
        if key in api:
            document[key] = api[key]
        elif expected:
            notes.append(f"{key}: could not be recovered")
    if outcome == "completed" and document["status"] == "completed":
        skill_state["completed_actions"].append("COMPLETE")
        skill_state.update(current_action="complete", last_action="COMPLETE")
    document["current_iteration"] = max((i for i, _ in history), default=0)
    document["skill_state"] = skill_state
    return Recovery(LoopState.model_validate(document), notes)


def _skill_state(
    ctx: LoopContext,
    files: ProgressFiles,
    *,
    header: dict[str, str],
    history: list[tuple[int, str]],
    notes: list[str],
    now: str,
) -> dict[str, Any]:
    tasks, errors = _tasks(ctx, files, now)
    actions = [phase.upper() for _, phase in history]
    debug = _read_json(files.path("hypotheses.json"))
    results = _read_json(files.path("test-results.json"))
    validate: dict[str, Any] = {
        "pass_rate": 0,
        "coverage": None,
        "test_results": [],
        "passed": False,
        "failed_tests": [],
        "last_run_at": None,
    }
    if isinstance(results, dict):
        validate.update(
            pass_rate=results.get("summary", {}).get("pass_rate", 0),
            coverage=results.get("coverage"),
            test_results=results.get("tests", []),
            passed=bool(results.get("passed")),
            failed_tests=results.get("failures", []),
            last_run_at=results.get("timestamp"),
        )
        if "verdict" in results:  # runs recorded with their exit status and every part's counts
            counts = results.get("counts")
            validate.update(
                exit_code=results.get("exit_code"),
                counts=counts if isinstance(counts, dict) else None,
                verdict=results.get("verdict"),
            )
    notes.append(
        "skill_state.errors: only task failures (from changes.log) could be recovered"
        if errors
        else "skill_state.errors: could not be recovered (left empty)"
    )
    last = actions[-1] if actions else None
    max_errors = header.get("Max errors", "")
    if not max_errors.isdigit() or int(max_errors) < 1:
        max_errors = str(ctx.options.max_errors)
        notes.append(f"skill_state.max_errors: not in develop.md; set to the option {max_errors}")
    return {
        "current_action": last.lower() if last else "init",
        "last_action": last,
        "completed_actions": actions,
        "mode": header.get("Mode")
        if header.get("Mode") in ("auto", "interactive")
        else ctx.options.mode,
        "develop": {
            "total": len(tasks),
            "completed": sum(t.status == "completed" for t in tasks),
            "current_task": next((t.id for t in reversed(tasks) if t.completed_at), None),
            "tasks": [dump_task(t) for t in tasks],
            "last_progress_at": max(
                (t.completed_at for t in tasks if t.completed_at), default=None
            ),
        },
        "debug": DebugState.model_validate(debug).model_dump(mode="json")
        if isinstance(debug, dict)
        else DebugState().model_dump(mode="json"),
        "validate": validate,
        "errors": errors,
        "max_errors": int(max_errors),
    }


def _tasks(ctx: LoopContext, files: ProgressFiles, now: str) -> tuple[list[DevelopTask], list[Any]]:
    listed = read_task_list(
        ctx.instance_dir, ctx.instance_id, now, fallback=fallback_task_list(ctx)
    )
    tasks: dict[str, DevelopTask] = {t.id: t for t in listed.tasks}
    text = _read_text(files.path("develop.md"))
    for _, task_id, tool, mode, description in _TASK_LINE.findall(text):
        tasks.setdefault(
            task_id,
            DevelopTask.model_validate(
                {
                    "id": task_id,
                    "description": description,
                    "tool": None if tool == "agent" else tool,
                    "mode": mode,
                    "status": "pending",
                    "files_changed": [],
                    "created_at": None,
                    "completed_at": None,
                }
            ),
        )
    errors: list[Any] = []
    for record in _read_ndjson(files.path("changes.log")):
        task_id = str(record.get("task_id", ""))
        if not task_id:
            continue
        base = tasks.get(task_id)
        fields: dict[str, Any] = {"id": task_id}
        if base is not None:
            fields = base.model_dump(mode="json", exclude_unset=True)
        fields.update(
            {
                k: record[k]
                for k in (
                    "description",
                    "tool",
                    "mode",
                    "fixes",
                    "attempt",
                    "agent_command",
                    "command",
                    "prompt_template",
                    "on_error",
                )
                if k in record
            }
        )
        ok = record.get("result") == "success"
        fields["status"] = "completed" if ok else "failed"
        fields["files_changed"] = record.get("files_changed", [])
        fields["completed_at"] = record.get("timestamp")
        if not ok and record.get("error"):
            fields["error"] = record["error"]
            errors.append(
                {
                    "action": "DEVELOP",
                    "message": f"task {task_id} failed: {record['error']}",
                    "timestamp": record.get("timestamp", now),
                }
            )
        tasks[task_id] = DevelopTask.model_validate(fields)
    return list(tasks.values()), errors


def _history(files: ProgressFiles) -> list[tuple[int, str]]:
    """(iteration, phase) of every work action found in the progress files, in order."""
    seen: dict[int, str] = {}
    for record in _read_ndjson(files.path("changes.log")):
        if isinstance(record.get("iteration"), int):
            seen[record["iteration"]] = "develop"
    for record in _read_ndjson(files.path("debug.log")):
        if isinstance(record.get("iteration"), int):
            seen[record["iteration"]] = "debug"
    for iteration, _ in _RUN.findall(_read_text(files.path("validate.md"))):
        seen[int(iteration)] = "validate"
    return sorted(seen.items())


def _read_header(files: ProgressFiles) -> dict[str, str]:
    head = _read_text(files.path("develop.md")).split("## Tasks", 1)[0]
    return {key: value.strip() for key, value in _HEADER.findall(head)}


def _match(pattern: re.Pattern[str], files: ProgressFiles, name: str) -> str | None:
    found = pattern.search(_read_text(files.path(name)))
    return found.group(1) if found else None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _read_ndjson(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for line in _read_text(path).splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records
