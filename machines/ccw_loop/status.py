"""The lines ``fsm status`` shows for a loop (the ``summary`` hook), true to the document.

Tasks of the task list and fix attempts are counted apart, failed ones are named as failed (a
failed task is never "done"), and a validation older than the last change says so.
"""

from __future__ import annotations

from .hypotheses import fix_attempts
from .model import LoopState, SkillState
from .options import LoopOptions
from .rules import is_fix, last_developed, last_work

__all__ = ["status_lines"]


def status_lines(doc: LoopState) -> dict[str, str]:
    """Iteration, phase and per-phase progress for ``fsm status``."""
    lines = {"iteration": f"{doc.current_iteration}/{_number(doc.max_iterations)}"}
    state = doc.skill_state
    if state is None:
        lines["phase"] = "not initialised"
        return lines
    lines["phase"] = state.current_action or "none"
    lines["develop"] = _develop(state)
    fixes = [t for t in state.develop.tasks if is_fix(t)]
    if fixes:
        applied = sum(t.status == "completed" for t in fixes)
        failed = sum(t.status == "failed" for t in fixes)
        plural = "s" if len(fixes) != 1 else ""
        lines["fixes"] = f"{len(fixes)} attempt{plural} ({applied} changed files, {failed} failed)"
    lines["debug"] = _debug(state)
    lines["validate"] = _validate(state)
    limit = f" of max {state.max_errors}" if state.max_errors is not None else ""
    lines["errors"] = f"{len(state.errors)} ({state.consecutive_errors} in a row{limit})"
    return lines


def _develop(state: SkillState) -> str:
    tasks = [t for t in state.develop.tasks if not is_fix(t)]
    done = sum(t.status == "completed" for t in tasks)
    failed = sum(t.status == "failed" for t in tasks)
    pending = len(tasks) - done - failed
    text = f"{done}/{len(tasks)} tasks done"
    if tasks:
        text += f" ({done * 100 / len(tasks):.0f}%)"
    if failed:
        text += f", {failed} failed"
    if pending:
        text += f", {pending} pending"
    return text


def _debug(state: SkillState) -> str:
    confirmed = state.debug.confirmed_hypothesis
    hypothesis = next((h for h in state.debug.hypotheses if h.id == confirmed), None)
    if hypothesis is not None:
        test = (hypothesis.model_extra or {}).get("test")
        limit = state.max_fix_attempts or LoopOptions().max_fix_attempts
        attempts = len(fix_attempts(state, hypothesis.id))
        about = f" ({test})" if test else ""
        return f"root cause {hypothesis.id}{about}, {attempts}/{limit} fix attempts"
    if state.debug.iteration:
        return f"round {state.debug.iteration}, no root cause yet"
    return "not started"


def _validate(state: SkillState) -> str:
    validate = state.validate_
    if validate.last_run_at is None:
        return "not run"
    rows = validate.test_results
    failed = sum(r.status == "failed" for r in rows) or len(validate.failed_tests)
    if validate.passed:
        passed = sum(r.status == "passed" for r in rows)
        text = f"PASSED ({passed} passed)" if rows else f"PASSED ({validate.pass_rate:.1f}%)"
    else:
        text = f"FAILED ({failed} failed)"
    latest = last_developed(state)
    if last_work(state) == "develop" and latest is not None and latest.status == "completed":
        text += ", before the latest changes"
    return text


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
