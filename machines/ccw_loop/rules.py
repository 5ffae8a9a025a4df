"""The phase rules of the loop as pure functions of the document: what the next work is.

These are CCW's skills' documented intent, not their literal selectors (which never reach validate
after the last task, re-validate forever once a hypothesis is confirmed, and count iterations
twice). :func:`next_work` decides, in this order:

1. a task marked ``on_error: fail_fast`` failed -> abort;
2. a task is pending (in the document, or new in the task-list file) -> develop it;
3. a task of the task list failed (failed tasks are not retried) -> abort, naming it;
4. a fix attempt was interrupted (the run was killed or crashed while its agent ran, so the
   document does not hold it) -> validate what it may have changed before anything else;
5. the last work was a validation: passed -> complete; failed -> give up on a failing test whose
   hypothesis already had ``max_fix_attempts`` fixes, else debug the failing tests nobody
   understands yet, else fix the first understood (confirmed) failing test; a failed validation
   that names no failing test (the command exited non-zero although every reported test passed,
   or failures were counted but not named) -> halt, since neither debug nor a fix has a test to
   work on (a run that could not be judged at all is a failed action instead, retried until
   ``max_errors``);
6. the last work was a develop: a fix that failed without changing anything (it did not run, or
   changed no file) -> the next fix attempt (or give up); anything else, a fix that changed
   files before it failed or timed out included -> validate;
7. the last work was a debug round: fix a confirmed failing test, else validate again.

Without a fix agent (``fix_tool`` none, ``can_fix=False``) no fix is ever due: where a fix would
be, and after a debug round that left any failing test unexplained (confirmed, or not judged),
the next work is ``hand_over``, ending the loop for a person to fix the tests; only a round that
found every failure flaky (it passes alone) leads to another validation.

Whether tests are due is read from the order of ``completed_actions``, the append-only log of
work actions, not from timestamps (two actions may share a timestamp). Action names of both skill
versions are understood: ``DEVELOP`` (Codex), ``action-develop-with-file`` (Claude) and
``develop`` (the executor role).

The iteration budget reserves what must follow: a develop or a fix runs only when an iteration is
left for the validation after it, a debug round only when a fix and its validation fit as well
(:data:`COST`). So a fix is always validated before ``max_iterations`` ends the loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .hypotheses import (
    failing_rows,
    fix_attempts,
    fix_target,
    spent_test,
    tests_to_debug,
    unexplained_tests,
)
from .model import (
    DevelopTask,
    Hypothesis,
    LoopState,
    Phase,
    SkillState,
    TestResult,
)

__all__ = [
    "COST",
    "WORK_PHASES",
    "Next",
    "cost",
    "error_budget_left",
    "fail_fast_task",
    "failed_tasks",
    "halt_reason",
    "has_pending_task",
    "is_fix",
    "is_initialized",
    "iteration_budget_left",
    "iterations_left",
    "last_developed",
    "last_work",
    "may_have_changed",
    "next_pending_task",
    "next_work",
    "phase_of_action",
]

WORK_PHASES: tuple[Phase, ...] = ("develop", "debug", "validate")

Work = Literal[
    "develop", "fix", "validate", "debug", "complete", "abort", "abandon", "hand_over", "halt"
]

COST: dict[Work, int] = {
    "develop": 2,
    "fix": 2,
    "validate": 1,
    "debug": 3,
    "complete": 0,
    "abort": 0,
    "abandon": 0,
    "hand_over": 0,
    "halt": 0,
}
"""Iterations a work needs, counting what must follow it: a develop or fix and its validation; a
debug round, the fix it leads to and that fix's validation (see :func:`cost` without a fix
agent)."""

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


@dataclass(frozen=True)
class Next:
    """The next work of an auto-mode loop, and what it concerns."""

    work: Work
    reason: str = ""
    """For ``abort``, ``abandon`` and ``halt``: the loop's ``failure_reason`` (``hand_over``
    names the progress files in its own, so its action writes it)."""
    hypothesis: str | None = None
    """For ``fix`` (and ``abandon``): the hypothesis concerned."""
    task: str | None = None
    """For ``develop``: the task that is next (None when it is still in the task-list file)."""


def phase_of_action(name: str | None) -> Phase | None:
    """The phase an action name of either skill version belongs to (None when it is no phase)."""
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


def is_fix(task: DevelopTask) -> bool:
    """True for a fix task the loop made for a hypothesis (not a task of the task list)."""
    return task.extra("fixes") is not None


def next_pending_task(state: SkillState) -> DevelopTask | None:
    """The first pending task in list order."""
    return next((t for t in state.develop.tasks if t.status == "pending"), None)


def has_pending_task(state: SkillState) -> bool:
    """True when some task of the document waits to be developed."""
    return next_pending_task(state) is not None


def failed_tasks(state: SkillState) -> list[DevelopTask]:
    """Tasks of the task list (not fix attempts) that failed."""
    return [t for t in state.develop.tasks if t.status == "failed" and not is_fix(t)]


def fail_fast_task(state: SkillState) -> DevelopTask | None:
    """A failed task whose task-list entry says ``on_error: fail_fast``."""
    return next(
        (t for t in failed_tasks(state) if t.extra("on_error") == "fail_fast"),
        None,
    )


def cost(work: Work, *, can_fix: bool = True) -> int:
    """Iterations ``work`` needs with what must follow it. Without a fix agent a debug round is
    followed by at most a validation (when every failure proved flaky), never by a fix."""
    if work == "debug" and not can_fix:
        return 2
    return COST[work]


def next_work(
    state: SkillState,
    *,
    waiting: Iterable[str] = (),
    max_attempts: int,
    can_fix: bool = True,
    interrupted: str | None = None,
) -> Next:
    """The next work of an initialised auto-mode loop. ``waiting`` are ids of tasks in the
    task-list file that the document does not hold yet (added after init); ``can_fix`` is False
    when the loop has no fix agent (``fix_tool`` none); ``interrupted`` names a fix attempt
    whose run was interrupted before the document recorded it (its changes are not validated)."""
    upcoming = _next_work(state, waiting, max_attempts, interrupted)
    if can_fix:
        return upcoming
    if upcoming.work == "fix" or (
        upcoming.work == "validate" and last_work(state) == "debug" and unexplained_tests(state)
    ):
        return Next("hand_over")
    return upcoming


def _next_work(
    state: SkillState, waiting: Iterable[str], max_attempts: int, interrupted: str | None
) -> Next:
    fail_fast = fail_fast_task(state)
    if fail_fast is not None:
        detail = fail_fast.extra("error") or "failed"
        return Next("abort", f"Task failed with on_error fail_fast ({fail_fast.id}: {detail})")
    pending = next_pending_task(state)
    waiting_ids = list(waiting)
    if pending is not None or waiting_ids:
        return Next("develop", task=pending.id if pending else waiting_ids[0])
    failed = failed_tasks(state)
    if failed:
        return Next("abort", _failed_tasks_reason(failed))
    if interrupted is not None:
        return Next("validate")
    last = last_work(state)
    if last == "validate":
        if state.validate_.passed:
            return Next("complete")
        spent = spent_test(state, max_attempts)
        if spent is not None:
            return _give_up(state, *spent)
        if tests_to_debug(state):
            return Next("debug")
        target = fix_target(state, max_attempts)
        if target is not None:
            return Next("fix", hypothesis=target.id)
        if not failing_rows(state) and _was_judged(state):
            return Next("halt", halt_reason(state))
        return Next("debug")
    if last == "develop":
        latest = last_developed(state)
        if latest is not None and is_fix(latest) and not may_have_changed(latest):
            return _fix_again(state, str(latest.extra("fixes")), max_attempts)
        return Next("validate")
    if last == "debug":
        spent = spent_test(state, max_attempts)
        if spent is not None:
            return _give_up(state, *spent)
        target = fix_target(state, max_attempts)
        return Next("fix", hypothesis=target.id) if target else Next("validate")
    return Next("validate")


def may_have_changed(task: DevelopTask) -> bool:
    """True unless ``task`` is known to have changed nothing: it completed, it changed files
    (even if it then failed or timed out), or what it changed could not be known."""
    return (
        task.status != "failed" or bool(task.files_changed) or bool(task.extra("changes_unknown"))
    )


def _was_judged(state: SkillState) -> bool:
    """True when the last validation produced counts (a run that could not be judged is a
    failed action, retried until ``max_errors``; documents without counts predate them)."""
    return isinstance((state.validate_.model_extra or {}).get("counts"), dict)


def halt_reason(state: SkillState) -> str:
    """``failure_reason`` of a failed validation that names no failing test."""
    verdict = (state.validate_.model_extra or {}).get("verdict")
    detail = str(verdict) if verdict else "the last validation failed"
    return (
        f"Validation failed without naming a failing test for debug or a fix to work on: "
        f"{detail.removeprefix('failed: ')}"
    )[:1000]


def last_developed(state: SkillState) -> DevelopTask | None:
    """The task the last develop action ran (``develop.current_task``)."""
    current = state.develop.current_task
    return next((t for t in state.develop.tasks if t.id == current), None)


def _fix_again(state: SkillState, hypothesis_id: str, max_attempts: int) -> Next:
    """After a fix attempt that failed: the next attempt, or give up when none is left."""
    attempts = fix_attempts(state, hypothesis_id)
    hypothesis = next((h for h in state.debug.hypotheses if h.id == hypothesis_id), None)
    if len(attempts) < max_attempts and hypothesis is not None:
        target = fix_target(state, max_attempts)
        # no target: the test no longer fails (or the document has no test links): re-validate
        return Next("fix", hypothesis=target.id) if target else Next("validate")
    test = (hypothesis.model_extra or {}).get("test") if hypothesis else None
    last = attempts[-1].extra("error") if attempts else None
    return Next(
        "abandon",
        f"Gave up on {test or hypothesis_id} after {len(attempts)} fix attempts "
        f"({hypothesis_id}); last attempt: {last or 'failed'}"[:1000],
        hypothesis=hypothesis_id,
    )


def _give_up(state: SkillState, row: TestResult, hypothesis: Hypothesis) -> Next:
    attempts = len(fix_attempts(state, hypothesis.id))
    error = (row.error_message or "failed").strip().splitlines()
    return Next(
        "abandon",
        f"Gave up on {row.test_name} after {attempts} fix attempt{'s' if attempts != 1 else ''} "
        f"({hypothesis.id}); "
        f"it still fails: {error[0] if error else 'failed'}"[:1000],
        hypothesis=hypothesis.id,
    )


def _failed_tasks_reason(failed: list[DevelopTask]) -> str:
    parts = [f"{t.id} ({t.extra('error') or 'failed'})" for t in failed]
    if len(parts) == 1:
        return f"Task {parts[0]} failed; a failed task is not retried"[:1000]
    return f"{len(parts)} tasks failed: {'; '.join(parts)}; failed tasks are not retried"[:1000]


def iterations_left(doc: LoopState) -> float:
    """Iterations ``max_iterations`` still allows."""
    return doc.max_iterations - doc.current_iteration


def iteration_budget_left(doc: LoopState, needed: int = 1) -> bool:
    """``needed`` more iterations fit in ``max_iterations``."""
    return iterations_left(doc) >= needed


def error_budget_left(doc: LoopState, max_errors: int) -> bool:
    """Fewer than ``max_errors`` actions in a row have failed."""
    errors = doc.skill_state.consecutive_errors if doc.skill_state is not None else 0
    return errors < max_errors
