"""The lines ``fsm status`` shows for a loop (the ``summary`` hook), true to the document.

Tasks of the task list and fix attempts are counted apart, failed ones are named as failed (a
failed task is never "done"), a fix attempt counts as having changed files when its
``files_changed`` names any (even if it then failed or timed out), and the files they changed
are counted, each once (``2 changed 3 files``), the validation line shows the counts of every
part of the test command (and that the run stopped at the first failures, with pytest's
``-x``) and its exit status when that is what failed, flaky tests are named, and a validation
older than the last change says so.
"""

from __future__ import annotations

from .baseline import changes_note
from .hypotheses import fix_attempts, flaky_tests
from .model import LoopState, SkillState
from .options import LoopOptions
from .rules import is_fix, last_developed, last_work, may_have_changed
from .verdict import validation_counts

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
        applied = sum(bool(t.files_changed) for t in fixes)
        files = len({name for t in fixes for name in t.files_changed})
        failed = sum(t.status == "failed" for t in fixes)
        plural = "s" if len(fixes) != 1 else ""
        changed = f"{applied} changed {files} file{'s' if files != 1 else ''}"
        if not applied:
            changed = "none changed a file"
        lines["fixes"] = f"{len(fixes)} attempt{plural} ({changed}, {failed} failed)"
        note = changes_note(state)
        if note:
            lines["fixes"] += f"; {note}"
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
    flaky = flaky_tests(state)
    if flaky:
        shown = ", ".join(flaky[:3]) + (f" and {len(flaky) - 3} more" if len(flaky) > 3 else "")
        return f"round {state.debug.iteration}, {len(flaky)} flaky ({shown}: passed alone)"
    if state.debug.iteration:
        return f"round {state.debug.iteration}, no root cause yet"
    return "not started"


def _validate(state: SkillState) -> str:
    validate = state.validate_
    if validate.last_run_at is None:
        return "not run"
    counts = validation_counts(state)
    extra = validate.model_extra or {}
    exit_code = extra.get("exit_code")
    lost = extra.get("lost_tests")
    lost = [str(entry) for entry in lost] if isinstance(lost, list) else []
    if lost and (counts is None or not counts[1]):
        text = f"FAILED ({len(lost)} lost since the first fix: {lost[0]})"
    elif validate.passed:
        text = f"PASSED ({counts[0]} passed)" if counts else f"PASSED ({validate.pass_rate:.1f}%)"
    elif counts is None:
        text = f"FAILED ({len(validate.failed_tests)} failed)"
    elif counts[1]:
        recorded = (validate.model_extra or {}).get("counts")
        recorded = recorded if isinstance(recorded, dict) else {}
        stopped = recorded.get("stopped") is True
        uncollected = recorded.get("uncollected")
        modules = ""
        if isinstance(uncollected, int) and uncollected > 0:
            modules = f"{uncollected} module{'s' if uncollected != 1 else ''} not collected"
        if modules and stopped and not counts[0]:
            text = f"FAILED ({modules}, so no test ran)"
        else:
            then = f": {modules}" if modules else ""
            then += ", then the run stopped" if stopped else ""
            text = f"FAILED ({counts[1]} of {sum(counts)} failed{then})"
    elif isinstance(exit_code, int) and exit_code != 0:
        text = f"FAILED (exit {exit_code} although no test failed: {counts[0]} passed)"
    else:
        text = f"FAILED (no test passed: {counts[0]} passed, {counts[2]} skipped)"
    if lost and counts is not None and counts[1]:
        text = text[:-1] + f"; {len(lost)} lost since the first fix)"
    if extra.get("tests_restored"):
        text += ", on the tests as they were"
    latest = last_developed(state)
    if last_work(state) == "develop" and latest is not None and may_have_changed(latest):
        text += ", before the latest changes"
    return text


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
