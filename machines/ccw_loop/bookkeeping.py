"""What every action writes besides its own result: iteration, action log, errors, timestamps.

``current_iteration`` is incremented here and nowhere else, once per develop, debug or validate
action (CCW's skills count it twice: once in the orchestrator pass and once in the action). A
failed action appends ``{action, message, timestamp}`` to ``skill_state.errors`` and extends the
``consecutive_errors`` streak that ``max_errors`` bounds; a successful one ends the streak.
"""

from __future__ import annotations

from typing import Any, Literal

from fsm.registry import Update

from .model import (
    DevelopState,
    DevelopTask,
    ErrorEntry,
    LoopState,
    Phase,
    SkillState,
)
from .options import LoopContext
from .progress import ProgressFiles

__all__ = [
    "LoopActionError",
    "develop_block",
    "dump_task",
    "error_update",
    "loop_mode",
    "max_errors_of",
    "max_fix_attempts_of",
    "progress_of",
    "skill_state_of",
    "work_done",
]


class LoopActionError(RuntimeError):
    """An action asked to do something the document does not allow (e.g. develop with no task)."""


def loop_mode(ctx: LoopContext) -> Literal["auto", "interactive"]:
    """The mode a loop is initialised in: interactive when the option says so or when a person
    drives the run (``fsm run --interactive``), else auto."""
    return "interactive" if ctx.interactive or ctx.options.mode == "interactive" else "auto"


def max_errors_of(doc: LoopState, ctx: LoopContext) -> int:
    """The loop's error limit: persisted in ``skill_state.max_errors`` at init, else the option."""
    state = doc.skill_state
    if state is not None and state.max_errors is not None and not ctx.reconfigure:
        return state.max_errors
    return ctx.options.max_errors


def max_fix_attempts_of(doc: LoopState, ctx: LoopContext) -> int:
    """Fix attempts per failing test: persisted in ``skill_state.max_fix_attempts``, else the
    option."""
    state = doc.skill_state
    if state is not None and state.max_fix_attempts is not None and not ctx.reconfigure:
        return state.max_fix_attempts
    return ctx.options.max_fix_attempts


def progress_of(doc: LoopState, ctx: LoopContext) -> ProgressFiles:
    """The progress folder beside the loop's master file."""
    # the instance id, checked by the engine, names files; the document's loop_id is data another
    # program may have written ("../x" must not lead out of the state folder)
    return ProgressFiles.of(ctx.instance_dir, ctx.instance_id, ctx.workspace)


def skill_state_of(doc: LoopState) -> SkillState:
    """The skill_state of an initialised loop; an action on an uninitialised loop is a bug."""
    if doc.skill_state is None:
        raise LoopActionError(f"loop {doc.loop_id} has no skill_state: run init first")
    return doc.skill_state


def dump_task(task: DevelopTask) -> dict[str, Any]:
    """A task as JSON, keeping the shape it was read in (fields never set are not added)."""
    return task.model_dump(mode="json", exclude_unset=True)


def develop_block(
    develop: DevelopState, tasks: list[DevelopTask], **changes: Any
) -> dict[str, Any]:
    """The whole ``skill_state.develop`` value with ``tasks`` and recounted totals."""
    block: dict[str, Any] = {
        **(develop.model_extra or {}),
        "total": len(tasks),
        "completed": sum(task.status == "completed" for task in tasks),
        "current_task": develop.current_task,
        "tasks": [dump_task(task) for task in tasks],
        "last_progress_at": develop.last_progress_at,
    }
    block.update(changes)
    return block


def error_update(state: SkillState, action: str, message: str, now: str) -> dict[str, Any]:
    """Append an error entry and extend the failure streak."""
    entry = ErrorEntry(action=action, message=message, timestamp=now)
    return {
        "skill_state.errors": [e.model_dump(mode="json") for e in [*state.errors, entry]],
        "skill_state.consecutive_errors": state.consecutive_errors + 1,
    }


def work_done(doc: LoopState, phase: Phase, now: str, error: str | None = None) -> Update:
    """The bookkeeping of one develop/debug/validate action (``error`` when it failed)."""
    state = skill_state_of(doc)
    name = phase.upper()
    update: dict[str, Any] = {
        "current_iteration": doc.current_iteration + 1,
        "updated_at": now,
        "skill_state.current_action": phase,
        "skill_state.last_action": name,
        "skill_state.completed_actions": [*state.completed_actions, name],
    }
    if error is not None:
        update.update(error_update(state, name, error, now))
    elif state.consecutive_errors or "consecutive_errors" in state.model_fields_set:
        update["skill_state.consecutive_errors"] = 0
    return update
