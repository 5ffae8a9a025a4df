"""Side files under the instance's work_dir: history, snapshots, plans and execution records.

``state.json`` itself is written by the engine; everything here sits beside it::

    state-history.json                       one entry per save (the original skill's saveState)
    snapshots/snapshot-before-execute-{n}.json   the document before queue item S-n ran
    solutions/{issue_id}-plan.json           the solution bound to the issue when it was planned
    solutions/{issue_id}-execution.json      per-task progress of the issue's execution
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .files import read_json, write_json_atomic
from .ids import checked_id
from .model import IssueManagerState, QueueItem
from .solution import Solution

__all__ = [
    "append_history",
    "execution_record_path",
    "plan_path",
    "read_plan",
    "write_plan",
    "write_snapshot",
]


def append_history(work_dir: Path, doc: IssueManagerState, timestamp: str) -> None:
    """Append one ``{timestamp, phase, completed_actions, issues_count}`` entry.

    A history file that does not parse is kept aside (``state-history.json.corrupt``) rather than
    silently replaced, as the original skill's ``.catch(() => [])`` would.
    """
    path = work_dir / "state-history.json"
    try:
        history = read_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError):
        path.replace(path.with_name(path.name + ".corrupt"))
        history = None
    if not isinstance(history, list):
        history = []
    history.append(
        {
            "timestamp": timestamp,
            "phase": doc.phase,
            "completed_actions": len(doc.completed_actions),
            "issues_count": len(doc.issues),
        }
    )
    write_json_atomic(path, history)


def write_snapshot(work_dir: Path, document: Any, item: QueueItem, timestamp: str) -> Path:
    """Write the state document as it was before ``item`` ran; return the snapshot's path."""
    path = work_dir / "snapshots" / f"snapshot-before-execute-{item.number}.json"
    write_json_atomic(
        path,
        {
            "timestamp": timestamp,
            "phase": "before-execute",
            "item_id": item.item_id,
            "issue_id": item.issue_id,
            "solution_id": item.solution_id,
            "state": document,
        },
    )
    return path


def plan_path(work_dir: Path, issue_id: str) -> Path:
    """Where the solution bound to ``issue_id`` is kept (UnsafeIdError for an unsafe id)."""
    return work_dir / "solutions" / f"{checked_id(issue_id)}-plan.json"


def execution_record_path(work_dir: Path, issue_id: str) -> Path:
    """Where the per-task execution progress of ``issue_id`` is kept (UnsafeIdError if unsafe)."""
    return work_dir / "solutions" / f"{checked_id(issue_id)}-execution.json"


def write_plan(work_dir: Path, issue_id: str, solution: Solution, source: str) -> None:
    """Keep the solution used for ``issue_id``: execution runs this copy, not the source file."""
    write_json_atomic(
        plan_path(work_dir, issue_id),
        {"issue_id": issue_id, "source": source, "solution": solution.model_dump(mode="json")},
    )


def read_plan(work_dir: Path, issue_id: str) -> Solution:
    """The solution bound to ``issue_id`` when it was planned."""
    path = plan_path(work_dir, issue_id)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("solution"), dict):
        raise FileNotFoundError(f"no plan for {issue_id} at {path}")
    return Solution.model_validate(data["solution"])
