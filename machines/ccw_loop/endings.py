"""How a loop ends: completed (validation passed), failed at a limit, exited by the user, stopped.

Every ending but a manual stop writes ``skill_state.summary`` and ``summary.md`` (an ending
whose summary.md cannot be written still ends the loop); the final ``status`` itself is written
by the state codec for the destination state (or by the control command, for stop).
"""

from __future__ import annotations

from typing import Any

from fsm.clock import iso_utc
from fsm.registry import Update

from . import baseline, rules
from .bookkeeping import max_errors_of, progress_of, skill_state_of
from .hypotheses import flaky_note
from .model import LoopState, SkillState
from .options import LoopContext
from .rules import Next
from .summary import build_summary, summary_markdown

__all__ = [
    "STOP_REASON",
    "complete_loop",
    "end_loop",
    "error_limit_reason",
    "iteration_limit_reason",
]

STOP_REASON = "Manually stopped by user"


def complete_loop(doc: LoopState, ctx: LoopContext, reason: str) -> Update:
    """Every task done and validation passed (``reason`` says so): write the summary and mark
    the COMPLETE action. A failure_reason left by an earlier attempt no longer holds."""
    state = skill_state_of(doc)
    update = end_loop(doc, ctx, outcome=f"completed: {reason}")
    if doc.failure_reason is not None:
        update["failure_reason"] = None
    update["skill_state.last_action"] = "COMPLETE"
    update["skill_state.completed_actions"] = [*state.completed_actions, "COMPLETE"]
    return update


def end_loop(
    doc: LoopState, ctx: LoopContext, *, outcome: str, reason: str | None = None
) -> dict[str, Any]:
    """``completed_at``, ``failure_reason`` (when given), the summary and summary.md."""
    moment = ctx.clock.now()
    now = iso_utc(moment)
    update: dict[str, Any] = {"completed_at": now, "updated_at": now}
    if reason is not None:
        reason = _with_notes(reason, doc.skill_state)
        update["failure_reason"] = reason
    if doc.skill_state is not None:
        summary = build_summary(doc, doc.skill_state, moment)
        update["skill_state.summary"] = summary.model_dump(mode="json")
        text = summary_markdown(doc, doc.skill_state, summary, outcome, reason)
        try:
            progress_of(doc, ctx).write_summary(text)
        except OSError as exc:
            # ending is what stops a loop whose progress folder broke: it must not fail on it
            ctx.log.warning("summary_not_written", error=f"{type(exc).__name__}: {exc}")
    ctx.log.info("loop_ended", outcome=outcome, reason=reason)
    return update


def _with_notes(reason: str, state: SkillState | None) -> str:
    """``reason`` with what the last line must also say: the flaky tests (seen passing alone)
    and the fixes' changes to the tests or the configuration."""
    if state is None:
        return reason
    notes = [flaky_note(state), baseline.changes_note(state)]
    said = "; ".join(note for note in notes if note)
    if not said:
        return reason
    return f"{reason[: 999 - len(said) - 2]}; {said}"[:1000]


def iteration_limit_reason(
    doc: LoopState, upcoming: Next | None = None, *, can_fix: bool = True
) -> str:
    """``failure_reason`` when the iteration budget ran out, or cannot hold ``upcoming`` and the
    validation that must follow it (``can_fix`` False: the loop has no fix agent)."""
    reason = f"Reached max_iterations ({_number(doc.max_iterations)}) without a passing validation"
    state = doc.skill_state
    if state is not None and not state.validate_.passed and state.validate_.failed_tests:
        failing = state.validate_.failed_tests
        more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
        reason += f" (still failing: {', '.join(failing[:3])}{more})"
    left = rules.iterations_left(doc)
    if upcoming is None or left <= 0:
        return reason[:1000]
    needs = {
        "develop": f"task {upcoming.task} and the validation after it",
        "fix": f"a fix for {upcoming.hypothesis} and its validation",
        "debug": "a debug round, the fix it leads to and that fix's validation"
        if can_fix
        else "a debug round and the validation after it",
        "validate": "a validation",
    }.get(upcoming.work, upcoming.work)
    cost = rules.cost(upcoming.work, can_fix=can_fix)
    return f"{reason}: {needs} need {cost} iterations, {_number(left)} left"[:1000]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def error_limit_reason(doc: LoopState, ctx: LoopContext) -> str:
    """``failure_reason`` when ``max_errors`` actions in a row failed."""
    state = doc.skill_state
    streak = state.consecutive_errors if state is not None else 0
    last = state.errors[-1].message if state is not None and state.errors else "unknown"
    limit = max_errors_of(doc, ctx)
    return f"{streak} consecutive action failures (max_errors {limit}); last: {last}"[:1000]
