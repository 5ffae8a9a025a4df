"""The bookkeeping every action's update carries: history, completed actions, errors, time.

The original skill's update rules say every change stamps ``updated_at``; its orchestrator records
each action in ``action_history`` (start, end, result, output files) and in ``completed_actions``,
and each failure in ``errors`` (the last five are kept, as CCW does) while ``error_count`` keeps
counting. The engine makes the step atomic and validated; these helpers make the update whole.
``current_action`` is always null in a saved document: a step is one transaction, so no action is
ever half-way through when the document is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from fsm.helpers import UnsafePathError

from .backup import OutsideSkillError
from .model import ActionHistoryEntry, ErrorEntry, TuningState
from .options import TuningContext
from .skill import TargetSkillError

__all__ = ["ACTION_IDS", "KEPT_ERRORS", "action_id", "failed", "finished"]

KEPT_ERRORS = 5
ACTION_IDS: Mapping[str, str] = {
    "init": "action-init",
    "diagnose_context": "action-diagnose-context",
    "diagnose_memory": "action-diagnose-memory",
    "diagnose_dataflow": "action-diagnose-dataflow",
    "diagnose_agent": "action-diagnose-agent",
    "verify": "action-verify",
    "apply_fix": "action-apply-fix",
    "iterate": "action-iterate",
    "complete": "action-complete",
    "finish": "action-complete",
    "exhaust": "action-complete",
    "give_up": "action-complete",
    "abort": "action-abort",
    "stop": "action-stop",
}
"""Action names of this machine to the ids CCW's skill-tuning records."""


def action_id(name: str) -> str:
    """The recorded id of an action (or event) name."""
    return ACTION_IDS.get(name, name)


def _history(doc: TuningState, entry: ActionHistoryEntry) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", exclude_none=True) for e in [*doc.action_history, entry]]


def finished(
    doc: TuningState,
    ctx: TuningContext,
    name: str,
    started_at: str,
    update: Mapping[str, Any],
    *,
    result: Literal["success", "skipped"] = "success",
    output_files: Iterable[str] = (),
) -> dict[str, Any]:
    """``update`` plus the record of action ``name`` having run from ``started_at`` to now."""
    now = ctx.clock.iso()
    recorded = action_id(name)
    entry = ActionHistoryEntry(
        action=recorded,
        started_at=started_at,
        completed_at=now,
        result=result,
        output_files=list(output_files),
    )
    completed = list(doc.completed_actions)
    if recorded not in completed:
        completed.append(recorded)
    return {
        **update,
        "action_history": _history(doc, entry),
        "completed_actions": completed,
        "current_action": None,
        "updated_at": now,
    }


def failed(doc: TuningState, ctx: TuningContext, name: str, error: BaseException) -> dict[str, Any]:
    """The update recording that action ``name`` failed with ``error``."""
    now = ctx.clock.iso()
    recorded = action_id(name)
    message = str(error) or type(error).__name__
    entry = ErrorEntry(
        action=recorded,
        message=message,
        timestamp=now,
        recoverable=not isinstance(error, TargetSkillError | OutsideSkillError | UnsafePathError),
    )
    errors = [*doc.errors, entry][-KEPT_ERRORS:]
    history = ActionHistoryEntry(
        action=recorded, started_at=now, completed_at=now, result="failure", output_files=[]
    )
    return {
        "errors": [e.model_dump(mode="json") for e in errors],
        "error_count": doc.error_count + 1,
        "action_history": _history(doc, history),
        "current_action": None,
        "updated_at": now,
    }
