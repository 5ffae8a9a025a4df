"""The names ``machine.yaml`` uses: document and options models, guards, actions, hooks, codec.

Guards are thin: the automatic ones ask :func:`fsm_machines.ccw_loop.rules.next_work` which work is
next, the menu's ask whether one is possible. Actions do the real work in
:mod:`~fsm_machines.ccw_loop.develop`, :mod:`~fsm_machines.ccw_loop.verify` and
:mod:`~fsm_machines.ccw_loop.endings`, hooks in :mod:`~fsm_machines.ccw_loop.lifecycle`,
:mod:`~fsm_machines.ccw_loop.status`, :mod:`~fsm_machines.ccw_loop.verdict` and
:mod:`~fsm_machines.ccw_loop.recovery`; here they are only given their names.
"""

from __future__ import annotations

from fsm.outcome import Verdict
from fsm.registry import Recovery, Registry, Update

from . import attempts, hypotheses, rules
from .adding import NewTask, add_task
from .bookkeeping import (
    loop_mode,
    max_errors_of,
    max_fix_attempts_of,
    progress_of,
)
from .codec import LoopCodec
from .develop import add_fix_task, develop_task, init_loop
from .endings import (
    STOP_REASON,
    complete_loop,
    end_loop,
    error_limit_reason,
    iteration_limit_reason,
)
from .inputs import LoopInputs
from .lifecycle import new_loop, record_error
from .model import LoopState, SkillState
from .options import LoopContext, LoopOptions
from .pinning import pinned, with_pinned
from .recovery import recover_loop
from .status import status_lines
from .tasks import fallback_task_list, waiting_task_ids
from .verdict import loop_outcome, missing_requirements, success_reason
from .verify import debug_failures, validate_tests

__all__ = ["registry"]

registry = Registry()
registry.document(LoopState)
registry.options(LoopOptions)
registry.inputs(LoopInputs)
registry.inputs(NewTask)
registry.hook(add_task)
registry.codec("loop_phase", LoopCodec())


def _state(doc: LoopState) -> SkillState:
    return doc.skill_state if doc.skill_state is not None else SkillState()


# --- guards ----------------------------------------------------------------------------------


def _can_fix(doc: LoopState, ctx: LoopContext) -> bool:
    """The loop has a fix agent (its pinned fix_tool is not none)."""
    return pinned(doc, ctx).options.fix_tool != "none"


def _next(doc: LoopState, ctx: LoopContext) -> rules.Next:
    """The next work the phase rules choose (tasks added to the task-list file count)."""
    state = _state(doc)
    known = [task.id for task in state.develop.tasks]
    # What the rules read besides the document goes through ctx.observe: the step's journal
    # record keeps it, and fsm replay --decisions serves it back.
    waiting = ctx.observe(
        "waiting_tasks",
        lambda: waiting_task_ids(
            ctx.instance_dir, ctx.instance_id, known, fallback=fallback_task_list(ctx)
        ),
    )

    def interrupted_id() -> str | None:
        attempt = attempts.interrupted_fix(progress_of(doc, ctx).folder, state)
        return attempt.task.id if attempt is not None else None

    return rules.next_work(
        state,
        waiting=waiting,
        max_attempts=max_fix_attempts_of(doc, ctx),
        can_fix=_can_fix(doc, ctx),
        interrupted=ctx.observe("interrupted_fix", interrupted_id),
    )


@registry.guard(budget=True)
def within_iteration_budget(doc: LoopState, ctx: LoopContext) -> bool:
    """The next work, and the validation that must follow it, fit in max_iterations."""
    cost = rules.cost(_next(doc, ctx).work, can_fix=_can_fix(doc, ctx))
    return rules.iteration_budget_left(doc, cost)


@registry.guard(budget=True)
def room_to_change(doc: LoopState, ctx: LoopContext) -> bool:
    """Two iterations are left: one for a develop or fix, one for the validation after it."""
    return rules.iteration_budget_left(doc, 2)


@registry.guard(budget=True)
def room_to_run(doc: LoopState, ctx: LoopContext) -> bool:
    """An iteration is left (fewer actions than max_iterations have run)."""
    return rules.iteration_budget_left(doc, 1)


@registry.guard(budget=True)
def within_error_budget(doc: LoopState, ctx: LoopContext) -> bool:
    """Fewer than max_errors (the loop's persisted limit) actions in a row have failed."""
    return rules.error_budget_left(doc, max_errors_of(doc, ctx))


@registry.guard
def auto_mode(doc: LoopState, ctx: LoopContext) -> bool:
    """The loop follows the phase rules by itself."""
    return loop_mode(ctx) == "auto"


@registry.guard
def interactive_mode(doc: LoopState, ctx: LoopContext) -> bool:
    """The loop offers a menu after every action (option mode, or fsm run --interactive)."""
    return loop_mode(ctx) == "interactive"


@registry.guard
def develop_due(doc: LoopState, ctx: LoopContext) -> bool:
    """A task waits to be developed (in the document or added to the task-list file)."""
    return _next(doc, ctx).work == "develop"


@registry.guard
def fix_due(doc: LoopState, ctx: LoopContext) -> bool:
    """A failing test is understood (confirmed) and has fix attempts left."""
    return _next(doc, ctx).work == "fix"


@registry.guard
def validation_due(doc: LoopState, ctx: LoopContext) -> bool:
    """Nothing is pending and the code changed (or debug rejected the failures) since the tests
    last ran."""
    return _next(doc, ctx).work == "validate"


@registry.guard
def debug_due(doc: LoopState, ctx: LoopContext) -> bool:
    """The last validation failed and some failing test has no confirmed hypothesis yet."""
    return _next(doc, ctx).work == "debug"


@registry.guard
def validation_passed(doc: LoopState, ctx: LoopContext) -> bool:
    """Every task is done and the last work was a passing validation."""
    return _next(doc, ctx).work == "complete"


@registry.guard
def task_failed(doc: LoopState, ctx: LoopContext) -> bool:
    """A fail_fast task failed, or nothing is pending and a task of the task list failed."""
    return _next(doc, ctx).work == "abort"


@registry.guard
def fix_attempts_spent(doc: LoopState, ctx: LoopContext) -> bool:
    """A failing test still fails after max_fix_attempts fixes."""
    return _next(doc, ctx).work == "abandon"


@registry.guard
def fix_agent_missing(doc: LoopState, ctx: LoopContext) -> bool:
    """fix_tool is none and the last validation failed on tests debug did not find flaky."""
    return _next(doc, ctx).work == "hand_over"


@registry.guard
def failure_unnamed(doc: LoopState, ctx: LoopContext) -> bool:
    """The last validation failed without naming a failing test (non-zero exit with every
    reported test passing, or failures counted but not named)."""
    return _next(doc, ctx).work == "halt"


@registry.guard
def has_pending_task(doc: LoopState, ctx: LoopContext) -> bool:
    """Some task waits to be developed (in the document or added to the task-list file)."""
    state = _state(doc)
    if rules.has_pending_task(state):
        return True
    known = [task.id for task in state.develop.tasks]
    return bool(
        waiting_task_ids(ctx.instance_dir, ctx.instance_id, known, fallback=fallback_task_list(ctx))
    )


@registry.guard
def has_unfixed_hypothesis(doc: LoopState, ctx: LoopContext) -> bool:
    """A failing test is understood (confirmed) and has fix attempts left, and fix_tool is an
    agent."""
    target = hypotheses.fix_target(_state(doc), max_fix_attempts_of(doc, ctx))
    return target is not None and _can_fix(doc, ctx)


@registry.guard
def has_failing_tests(doc: LoopState, ctx: LoopContext) -> bool:
    """The last validation reported failing tests to investigate."""
    return hypotheses.has_failing_tests(_state(doc))


@registry.guard
def fail_fast_task_failed(doc: LoopState, ctx: LoopContext) -> bool:
    """A task whose task-list entry says on_error fail_fast has failed."""
    return rules.fail_fast_task(_state(doc)) is not None


# --- actions ---------------------------------------------------------------------------------

registry.action(name="init")(init_loop)
registry.action(name="develop")(with_pinned(develop_task))
registry.action(name="add_fix_task")(with_pinned(add_fix_task))
registry.action(name="validate")(with_pinned(validate_tests))
registry.action(name="debug")(with_pinned(debug_failures))


@registry.action
def complete(doc: LoopState, ctx: LoopContext) -> Update:
    """Every task is done and validation passed: write the summary, mark COMPLETE."""
    return complete_loop(doc, ctx, success_reason(_state(doc)))


@registry.action
def fail_on_iterations(doc: LoopState, ctx: LoopContext) -> Update:
    """End failed: the iteration budget cannot hold the next work and its validation."""
    reason = iteration_limit_reason(doc, _next(doc, ctx), can_fix=_can_fix(doc, ctx))
    return end_loop(doc, ctx, outcome="failed: iteration limit", reason=reason)


@registry.action
def fail_on_errors(doc: LoopState, ctx: LoopContext) -> Update:
    """End failed: max_errors actions in a row failed."""
    reason = error_limit_reason(doc, ctx)
    return end_loop(doc, ctx, outcome="failed: error limit", reason=reason)


@registry.action
def fail_on_task(doc: LoopState, ctx: LoopContext) -> Update:
    """End failed: a task failed (fail_fast at once, others once nothing is pending)."""
    reason = _next(doc, ctx).reason
    return end_loop(doc, ctx, outcome="failed: task failed", reason=reason or "a task failed")


@registry.action
def give_up_on_test(doc: LoopState, ctx: LoopContext) -> Update:
    """End failed: a failing test still fails after max_fix_attempts fixes."""
    reason = _next(doc, ctx).reason or "a failing test still fails after every fix attempt"
    return end_loop(doc, ctx, outcome="failed: fix attempts spent", reason=reason)


@registry.action
def halt_on_validation(doc: LoopState, ctx: LoopContext) -> Update:
    """End failed: the validation failed and names no test that debug or a fix could target."""
    reason = _next(doc, ctx).reason or rules.halt_reason(_state(doc))
    return end_loop(doc, ctx, outcome="failed: validation failed, no test named", reason=reason)


@registry.action
def hand_over(doc: LoopState, ctx: LoopContext) -> Update:
    """End failed: tests fail and fix_tool is none, so no agent can fix them; name them."""
    debug_file = progress_of(doc, ctx).path("debug.md")
    shown = (
        debug_file.relative_to(ctx.workspace)
        if debug_file.is_relative_to(ctx.workspace)
        else debug_file
    )
    reason = hypotheses.hand_over_reason(_state(doc), shown.as_posix())
    return end_loop(doc, ctx, outcome="failed: tests fail, no fix agent", reason=reason)


@registry.action
def exit_loop(doc: LoopState, ctx: LoopContext) -> Update:
    """The user chose exit in the menu."""
    return end_loop(doc, ctx, outcome="user_exit: exited from the menu")


@registry.action
def record_stop(doc: LoopState, ctx: LoopContext) -> Update:
    """The dashboard's stop: failure_reason and completed_at."""
    now = ctx.clock.iso()
    return {"failure_reason": STOP_REASON, "completed_at": now, "updated_at": now}


@registry.action
def touch(doc: LoopState, ctx: LoopContext) -> Update:
    """Record the time of a control command in updated_at."""
    return {"updated_at": ctx.clock.iso()}


# --- hooks -----------------------------------------------------------------------------------


registry.hook(name="new_loop")(new_loop)
registry.hook(name="record_error")(record_error)
registry.hook(name="status_lines")(status_lines)


@registry.hook
def judge_outcome(doc: LoopState) -> Verdict:
    """Success only when every task is done and a validation passed after them."""
    success, reason = loop_outcome(doc)
    return Verdict(success, reason)


@registry.hook
def check_requirements(doc: LoopState, ctx: LoopContext) -> list[str]:
    """The agents and programs the loop will need that cannot be run here, one line each."""
    return missing_requirements(doc, ctx)


@registry.hook
def recover(ctx: LoopContext, raw_text: str | None) -> Recovery:
    """Rebuild skill_state from the progress files and task list; report what is lost."""
    return recover_loop(ctx, raw_text)
