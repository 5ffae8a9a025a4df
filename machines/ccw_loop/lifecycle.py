"""The loop's ``create`` and ``on_error`` hooks: a new loop as the dashboard makes one, and the
error entry of an action that raised (or whose result did not validate)."""

from __future__ import annotations

from typing import Any

from fsm.registry import Update

from .bookkeeping import error_update, loop_mode, max_errors_of
from .inputs import checked_inputs
from .model import ErrorEntry, LoopState, SkillState
from .options import LoopContext

__all__ = ["new_loop", "record_error"]


def new_loop(inputs: dict[str, Any], ctx: LoopContext) -> LoopState:
    """A loop as the dashboard creates it: status created, no skill_state yet."""
    fields = checked_inputs(inputs)
    now = ctx.clock.iso()
    optional = {k: fields.pop(k) for k in ("tags", "priority", "notes") if k in fields}
    return LoopState.model_validate(
        {
            "loop_id": ctx.instance_id,
            **fields,
            "status": "created",
            "current_iteration": 0,
            "created_at": now,
            "updated_at": now,
            **optional,
        }
    )


def record_error(doc: LoopState, ctx: LoopContext, error: BaseException) -> Update:
    """Append {action, message, timestamp} to skill_state.errors (creating it if init failed)."""
    now = ctx.clock.iso()
    action, message = _error_entry(ctx, error)
    if doc.skill_state is not None:
        return {**error_update(doc.skill_state, action, message, now), "updated_at": now}
    # init itself failed: keep the error in an uninitialised skill_state (the codec still reads
    # the loop as created), so the error limit can end a loop whose init keeps failing.
    entry = ErrorEntry(action=action, message=message, timestamp=now)
    fresh = SkillState(
        mode=loop_mode(ctx),
        errors=[entry],
        consecutive_errors=1,
        max_errors=max_errors_of(doc, ctx),
    )
    skill_state = fresh.model_dump(mode="json", by_alias=True, exclude={"summary"})
    return {"skill_state": skill_state, "updated_at": now}


def _error_entry(ctx: LoopContext, error: BaseException) -> tuple[str, str]:
    """The ``action`` and ``message`` of an error entry: the action that failed (``DEVELOP``
    for the develop of a fix step), or the step's event when a guard or the validation of the
    result failed, which the message then names."""
    event = (ctx.transition.event if ctx.transition else "unknown").upper()
    failed = ctx.failed_action
    message = f"{type(error).__name__}: {error}"
    if failed is None:
        return event, message[:2000]
    if failed.startswith("guard ") or failed == "validation":
        return event, f"{failed}: {message}"[:2000]
    return failed.upper(), message[:2000]
