"""The phase rules of the loop as pure predicates on the document.

These are the seeds' documented intent, not their literal selectors (which never reach validate
after the last task, re-validate forever once a hypothesis is confirmed, and count iterations
twice). Whether tests are due is read from the order of ``completed_actions``, the append-only log
of work actions, not from timestamps (two actions may share a timestamp):

* pending tasks -> develop, one task per step;
* no pending task and no validation since the last develop or debug -> validate;
* the last validation passed (and nothing is pending) -> complete;
* the last validation failed -> debug;
* a confirmed hypothesis that no task fixes yet -> develop a fix task; the fix task consumes it.

Action names of both seed versions are understood: ``DEVELOP`` (Codex), ``action-develop-with-file``
(Claude) and ``develop`` (the executor role).
"""

from __future__ import annotations

from machines.ccw_loop.model import DevelopTask, LoopState, Phase, SkillState

__all__ = [
    "WORK_PHASES",
    "debug_due",
    "error_budget_left",
    "fail_fast_task",
    "has_failing_tests",
    "has_pending_task",
    "is_initialized",
    "iteration_budget_left",
    "last_work",
    "next_pending_task",
    "phase_of_action",
    "unfixed_hypothesis",
    "validation_due",
    "validation_passed",
]

WORK_PHASES: tuple[Phase, ...] = ("develop", "debug", "validate")

_PHASES: dict[str, Phase] = {
    "init": "init",
    "develop": "develop",
    "debug": "debug",
    "validate": "validate",
    "complete": "complete",
}
_CLAUDE_IDS: dict[str, Phase] = {
    "action-init": "init",
    "action-develop-with-file": "develop",
    "action-debug-with-file": "debug",
    "action-validate-with-file": "validate",
    "action-complete": "complete",
}


def phase_of_action(name: str | None) -> Phase | None:
    """The phase an action name of either seed version belongs to (None when it is no phase)."""
    if not name:
        return None
    if name in _CLAUDE_IDS:
        return _CLAUDE_IDS[name]
    return _PHASES.get(name.lower())


def is_initialized(state: SkillState | None) -> bool:
    """True once init has run (a skill_state holding only the errors of a failed init is not)."""
    if state is None:
        return False
    return bool(
        state.current_action or state.last_action or state.completed_actions or state.develop.tasks
    )


def last_work(state: SkillState) -> Phase | None:
    """The most recent develop, debug or validate action, or None before any ran."""
    for name in reversed(state.completed_actions):
        phase = phase_of_action(name)
        if phase in WORK_PHASES:
            return phase
    return None


def next_pending_task(state: SkillState) -> DevelopTask | None:
    """The first pending task in list order."""
    return next((t for t in state.develop.tasks if t.status == "pending"), None)


def has_pending_task(state: SkillState) -> bool:
    """True when some task waits to be developed."""
    return next_pending_task(state) is not None


def unfixed_hypothesis(state: SkillState) -> str | None:
    """The confirmed hypothesis no fix task has been made for yet, if any."""
    confirmed = state.debug.confirmed_hypothesis
    if confirmed is None:
        return None
    if any(task.extra("fixes") == confirmed for task in state.develop.tasks):
        return None
    return confirmed


def validation_due(state: SkillState) -> bool:
    """Nothing pending and the tests have not run since the last develop or debug action."""
    return not has_pending_task(state) and last_work(state) != "validate"


def validation_passed(state: SkillState) -> bool:
    """The last work action was a passing validation and nothing is pending."""
    return not has_pending_task(state) and last_work(state) == "validate" and state.validate_.passed


def debug_due(state: SkillState) -> bool:
    """Nothing pending and the last work action was a failed validation."""
    return (
        not has_pending_task(state)
        and last_work(state) == "validate"
        and not state.validate_.passed
    )


def has_failing_tests(state: SkillState) -> bool:
    """The last validation reported failing tests that debug can investigate."""
    return bool(state.validate_.failed_tests) or any(
        row.status == "failed" for row in state.validate_.test_results
    )


def fail_fast_task(state: SkillState) -> DevelopTask | None:
    """A failed task whose task-list entry says ``on_error: fail_fast``."""
    return next(
        (
            t
            for t in state.develop.tasks
            if t.status == "failed" and t.extra("on_error") == "fail_fast"
        ),
        None,
    )


def iteration_budget_left(doc: LoopState) -> bool:
    """Fewer develop/debug/validate actions than ``max_iterations`` have run."""
    return doc.current_iteration < doc.max_iterations


def error_budget_left(doc: LoopState, max_errors: int) -> bool:
    """Fewer than ``max_errors`` actions in a row have failed."""
    errors = doc.skill_state.consecutive_errors if doc.skill_state is not None else 0
    return errors < max_errors
