"""An agent attempt in flight: what an interrupted run leaves for the next one to account for.

An agent edits the workspace while it runs, but the document records its task only when the
step commits. A run killed (or crashed) in between leaves changes no document mentions: the
next run would make the same attempt again, see nothing left to change, and call it a failed
attempt that "changed no file", while the interrupted one did the work and nobody validated it.

So before an agent task runs, develop writes ``attempt.json`` in the loop's progress folder: the
task as the document will hold it and a snapshot of the workspace taken before it ran
(:class:`~fsm.executor.Snapshot`); the action removes the file once the task's
outcome is in its update. A file still there means an attempt was interrupted:

* a task of the task list is still pending in the document, so develop runs it again and
  compares the workspace with the snapshot of the interrupted attempt, so that its changes count;
* a fix attempt is not in the document at all (its task is made by the same step), so the
  phase rules validate first (:func:`interrupted_fix`); validate records the interrupted
  attempt as a failed fix task that changed what it changed, and counts it for its hypothesis.

A marker whose task the document already holds as done or failed is stale (the process died
after the commit, before the file was removed) and is ignored.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsm.executor import Snapshot
from fsm.helpers import atomic_write_text

from .model import DevelopTask, SkillState

__all__ = ["Attempt", "clear", "interrupted", "interrupted_fix", "start"]

_NAME = "attempt.json"


@dataclass(frozen=True)
class Attempt:
    """An attempt that started: its task, when, and the workspace before it."""

    task: DevelopTask
    started_at: str
    before: Snapshot


def _path(folder: Path) -> Path:
    return folder / _NAME


def start(folder: Path, task: DevelopTask, before: Snapshot, now: str, root: Path) -> None:
    """Record that ``task`` starts now, on a workspace that looked like ``before``."""
    data = {
        "task": task.model_dump(mode="json", exclude_unset=True),
        "started_at": now,
        "before": before.to_json(),
    }
    atomic_write_text(_path(folder), json.dumps(data, ensure_ascii=False), root=root)


def clear(folder: Path) -> None:
    """Forget the attempt in flight (its outcome is in the step's update)."""
    with contextlib.suppress(OSError):
        _path(folder).unlink()


def interrupted(folder: Path, state: SkillState) -> Attempt | None:
    """The attempt an interrupted run left, unless the document already records its task."""
    path = _path(folder)
    if not path.is_file():
        return None
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        task = DevelopTask.model_validate(data["task"])
        started = str(data["started_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    recorded = next((t for t in state.develop.tasks if t.id == task.id), None)
    if recorded is not None and recorded.status != "pending":
        return None
    return Attempt(task, started, Snapshot.from_json(data.get("before")))


def interrupted_fix(folder: Path, state: SkillState) -> Attempt | None:
    """An interrupted fix attempt (which the document does not hold at all)."""
    attempt = interrupted(folder, state)
    if attempt is None or attempt.task.extra("fixes") is None:
        return None
    return attempt
