"""Init and develop: load the task list, run one task per step, turn a root cause into a fix task.

A bash task runs its ``command`` through the executor's shell in the workspace; any other task
runs an agent (``tool``, or ``fix_tool`` when the task names none) with its prompt as one
argument; a task that names no tool while ``fix_tool`` is none cannot run. Either way the task
gets a timeout, and a missing command, a missing agent, a non-zero exit or a timeout (or no tool
at all) make a *failed task* with the reason recorded in the task and in
``skill_state.errors``; the action itself succeeds, so the document always says what happened.

An agent task in ``write`` mode whose run changed no file (see
:mod:`fsm.process.changes`), a fix or a task of the task list, is failed as well: it
was asked to change the code and did nothing. Analysis tasks (the agent may not edit) and bash
tasks (a compile check or a linter rightly change nothing) are judged by their exit status
only. What a task changed is recorded even when it then failed or timed out (``files_changed``;
``changes_unknown`` when the workspace could not be compared), so the work is validated. Agent
attempts are recorded while they run (:mod:`fsm_machines.ccw_loop.attempts`), so that changes of
an attempt interrupted by a killed or crashed run still count. Agent runs are recorded by tool
and the command as the executor redacted it (:mod:`fsm.process.redaction`).

Before taking the next task, develop loads the tasks added to the task-list file since init (the
dashboard's add-task button) at the end of the list. A failed task with ``on_error: pause``
pauses the loop and becomes pending again, so that resuming retries it; other failed tasks are
not retried (see :mod:`fsm_machines.ccw_loop.rules`).
"""

from __future__ import annotations

from typing import Any

from fsm.executor import ExecResult, changed_files, is_known, take_snapshot
from fsm.registry import Update

from . import attempts, baseline
from .bookkeeping import (
    LoopActionError,
    develop_block,
    dump_task,
    loop_mode,
    max_errors_of,
    max_fix_attempts_of,
    progress_of,
    skill_state_of,
    work_done,
)
from .hypotheses import failing_rows, fix_attempts, fix_target
from .model import (
    DebugState,
    DevelopTask,
    ErrorEntry,
    Hypothesis,
    LoopState,
    SkillState,
    ValidateState,
)
from .options import LoopContext
from .pinning import pinned_config
from .rules import next_pending_task
from .tasks import (
    description_task,
    fallback_task_list,
    new_tasks,
    read_task_list,
    task_list_stamps,
)

__all__ = ["add_fix_task", "develop_task", "fix_prompt", "init_loop", "task_prompt"]


def init_loop(doc: LoopState, ctx: LoopContext) -> Update:
    """Create ``skill_state``: the tasks (task list, else the description), empty phases, and
    the loop's error limit (persisted, so that it survives restarts)."""
    now = ctx.clock.iso()
    mode = loop_mode(ctx)
    max_errors = max_errors_of(doc, ctx)
    listed = read_task_list(
        ctx.instance_dir, ctx.instance_id, now, fallback=fallback_task_list(ctx)
    )
    tasks = listed.tasks or [description_task(doc.description.strip() or doc.title, now)]
    previous = doc.skill_state
    errors = list(previous.errors) if previous is not None else []
    errors += [ErrorEntry(action="INIT", message=p, timestamp=now) for p in listed.problems]
    skill_state: dict[str, Any] = {
        "current_action": "init",
        "last_action": None,
        "completed_actions": [],
        "mode": mode,
        "develop": {
            "total": len(tasks),
            "completed": 0,
            "current_task": None,
            "tasks": [dump_task(task) for task in tasks],
            "last_progress_at": None,
        },
        "debug": DebugState().model_dump(mode="json"),
        "validate": ValidateState().model_dump(mode="json"),
        "errors": [e.model_dump(mode="json") for e in errors],
        "max_errors": max_errors,
        "max_fix_attempts": max_fix_attempts_of(doc, ctx),
        "config": pinned_config(ctx.options),
    }
    if previous is not None:
        skill_state["consecutive_errors"] = 0
    progress_of(doc, ctx).start_develop(doc, tasks, mode, max_errors, now)
    ctx.log.info(
        "loop_initialized",
        tasks=len(tasks),
        task_list=str(listed.source) if listed.source else None,
        skipped_lines=len(listed.problems),
    )
    return {"skill_state": skill_state, "updated_at": now}


def add_fix_task(doc: LoopState, ctx: LoopContext) -> Update:
    """Insert a pending fix task for the next fix target (attempt N for its hypothesis)."""
    state = skill_state_of(doc)
    hypothesis = fix_target(state, max_fix_attempts_of(doc, ctx))
    if hypothesis is None:
        raise LoopActionError("no confirmed hypothesis of a failing test is waiting for a fix")
    earlier = fix_attempts(state, hypothesis.id)
    attempt = len(earlier) + 1
    now = ctx.clock.iso()
    task = DevelopTask.model_validate(
        {
            "id": f"fix-{hypothesis.id}" + (f"-{attempt}" if attempt > 1 else ""),
            "description": f"Fix {hypothesis.id}: {hypothesis.description}"[:500],
            "tool": ctx.options.fix_tool,
            "mode": "write",
            "status": "pending",
            "files_changed": [],
            "created_at": now,
            "completed_at": None,
            "fixes": hypothesis.id,
            "attempt": attempt,
            "prompt_template": fix_prompt(
                doc, hypothesis, earlier, _latest_error(state, hypothesis)
            ),
        }
    )
    # before the first pending task, so that the fix is what develop takes up next
    tasks = list(state.develop.tasks)
    first_pending = next((i for i, t in enumerate(tasks) if t.status == "pending"), len(tasks))
    tasks.insert(first_pending, task)
    counted = hypothesis.model_copy(update={"fix_attempts": attempt})
    hypotheses = [counted if h.id == hypothesis.id else h for h in state.debug.hypotheses]
    debug = {
        **state.debug.model_dump(mode="json"),
        "hypotheses": [h.model_dump(mode="json") for h in hypotheses],
        "confirmed_hypothesis": hypothesis.id,
    }
    files = progress_of(doc, ctx)
    files.write_hypotheses(debug)
    # before the first fix: the tests it will be judged on
    baseline.record(
        files.folder,
        ctx.workspace,
        ctx.instance_dir,
        state,
        command=ctx.options.test_command,
        task=task.id,
        now=now,
    )
    ctx.log.info("fix_task_added", task=task.id, hypothesis=hypothesis.id, attempt=attempt)
    return {
        "skill_state.develop": develop_block(state.develop, tasks),
        "skill_state.debug": debug,
        "updated_at": now,
    }


def _latest_error(state: SkillState, hypothesis: Hypothesis) -> str | None:
    """The failure of the hypothesis's test in the last validation (it may differ from the
    failure debug saw, after an earlier fix attempt)."""
    test = (hypothesis.model_extra or {}).get("test")
    row = next((r for r in failing_rows(state) if r.test_name == test), None)
    return row.error_message if row is not None else None


def develop_task(doc: LoopState, ctx: LoopContext) -> Update:
    """Load tasks added to the task list, then run the first pending task and record its outcome,
    changed files and progress entry."""
    state = skill_state_of(doc)
    now = ctx.clock.iso()
    synced = _with_new_tasks(state, ctx, now)
    task = next_pending_task(synced)
    if task is None:
        if synced is state:
            raise LoopActionError("no pending task to develop")
        # every task that arrived is one that cannot run: record them; the rules end the loop
        return {
            "skill_state.develop": develop_block(synced.develop, synced.develop.tasks),
            "skill_state.errors": [e.model_dump(mode="json") for e in synced.errors],
            "updated_at": now,
        }
    opts = ctx.options
    tool = task.tool or opts.fix_tool
    folder = progress_of(doc, ctx).folder
    before = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
    earlier = attempts.interrupted(folder, synced)
    resumed: dict[str, Any] = {}
    if earlier is not None and earlier.task.id == task.id:
        # the same task was running when a run ended without recording it: what it changed
        # then counts as this attempt's work
        before = earlier.before
        resumed["resumes_attempt_of"] = earlier.started_at
    is_agent = tool not in ("bash", "none")
    if is_agent:
        attempts.start(folder, task, before, now, ctx.workspace)
    lists = task_list_stamps(ctx)
    output, error, recorded = _run(doc, task, tool, ctx, opts.task_timeout)
    after = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
    changed = changed_files(before, after, ctx.executor, ctx.workspace)
    protected = [name for name in changed if baseline.is_protected(name)]
    protected += [
        name
        for name, stamp in task_list_stamps(ctx).items()
        if lists.get(name) != stamp and name not in protected
    ]
    known = is_known(before, after)
    if error is None and is_agent and task.mode == "write" and known and not changed:
        what = "the fix" if task.extra("fixes") else "the task"
        error = f"{what} changed no file (agent {tool} exited 0 without an edit)"
    now = ctx.clock.iso()
    retry = error is not None and task.extra("on_error") == "pause"
    changes: dict[str, Any] = {
        **recorded,
        **resumed,
        "tool": tool if tool != "none" else None,  # the dashboard knows no tool "none"
        "status": "failed" if error else "completed",
        "files_changed": changed,
        "completed_at": now,
    }
    if not known:
        changes["changes_unknown"] = True
    if error:
        changes["error"] = error
    if protected and task.extra("fixes"):
        changes["protected_files_changed"] = protected
    kept = baseline.load(folder)
    if kept is not None and task.extra("allow_test_changes") is True and not task.extra("fixes"):
        baseline.adopt(kept, ctx.workspace, ctx.instance_dir, now)
    done = task.model_copy(update=changes)
    iteration = doc.current_iteration + 1
    progress_of(doc, ctx).record_task(iteration, done, output, now)
    if retry:
        # on_error pause: a person fixes the cause and resumes; the task is then retried
        done = done.model_copy(update={"status": "pending", "completed_at": None})
    tasks = [done if t.id == task.id else t for t in synced.develop.tasks]
    ctx.log.info("task_developed", task=task.id, tool=tool, ok=error is None, error=error)
    failure = f"task {task.id} failed: {error}" if error else None
    bookkeeping = dict(
        work_done(doc.model_copy(update={"skill_state": synced}), "develop", now, failure)
    )
    if synced.errors != state.errors and "skill_state.errors" not in bookkeeping:
        bookkeeping["skill_state.errors"] = [e.model_dump(mode="json") for e in synced.errors]
    update: dict[str, Any] = {
        "skill_state.develop": develop_block(
            synced.develop, tasks, current_task=task.id, last_progress_at=now
        ),
        **bookkeeping,
    }
    if retry:
        update["status"] = "paused"  # the dashboard's on_error "pause": wait for a person
    attempts.clear(folder)  # the outcome is in this update
    return update


def _with_new_tasks(state: SkillState, ctx: LoopContext, now: str) -> SkillState:
    """``state`` with the tasks added to the task-list file since init appended (the same object
    when there are none), and their problems as error entries."""
    known = [t.id for t in state.develop.tasks]
    listed = new_tasks(
        ctx.instance_dir, ctx.instance_id, now, known, fallback=fallback_task_list(ctx)
    )
    if not listed.tasks:
        return state
    reported = {e.message for e in state.errors}
    errors = list(state.errors) + [
        ErrorEntry(action="DEVELOP", message=problem, timestamp=now)
        for problem in listed.problems
        if problem not in reported
    ]
    ctx.log.info("tasks_added", tasks=[t.id for t in listed.tasks])
    develop = state.develop.model_copy(update={"tasks": [*state.develop.tasks, *listed.tasks]})
    return state.model_copy(update={"develop": develop, "errors": errors})


def _run(
    doc: LoopState, task: DevelopTask, tool: str, ctx: LoopContext, timeout: float
) -> tuple[str, str | None, dict[str, Any]]:
    """Run ``task``: its output, why it failed (None when it did not), and what to record about
    the command besides the task's own fields."""
    if tool == "none":
        # fsm step and fsm fire do not run the preflight, which reports this before a run
        return "", "the task names no tool and fix_tool is none: give it a tool or set fix_tool", {}
    if tool == "bash":
        command = task.extra("command")
        if not isinstance(command, str) or not command.strip():
            return "", "tool bash needs a command, and the task has none", {}
        result = ctx.executor.shell(command, cwd=ctx.workspace, timeout=timeout)
        output = result.stdout + "\n" + result.stderr
        return output, None if result.ok else _failure(result), {}
    # the executor redacts agent results (fsm.process.redaction): the argv shows option names and
    # {prompt}, never a token configured in fsm.toml, and hidden values are scrubbed from the
    # output; only that form is recorded
    prompt = task_prompt(doc, task)
    result = ctx.executor.agent(tool, prompt, mode=task.mode, cwd=ctx.workspace, timeout=timeout)
    output = result.stdout + "\n" + result.stderr
    if result.error is not None:
        return output, result.error, {}
    recorded = {"agent_command": " ".join(result.argv)}
    return output, None if result.ok else f"agent {tool} {_failure(result)}", recorded


def _failure(result: ExecResult) -> str:
    """How a task's command failed; a timeout names the option that set it."""
    return result.describe() + (" (option task_timeout)" if result.timed_out else "")


def task_prompt(doc: LoopState, task: DevelopTask) -> str:
    """The prompt an agent gets for ``task``: its template (or description) and the loop context."""
    template = task.extra("prompt_template")
    body = template if isinstance(template, str) and template.strip() else task.description
    return (
        f"{body}\n\n"
        f'Context: loop {doc.loop_id} "{doc.title}": {doc.description}\n'
        f"Task {task.id} ({task.mode}): {task.description}"
    )


def fix_prompt(
    doc: LoopState,
    hypothesis: Hypothesis,
    earlier: list[DevelopTask] | None = None,
    latest_error: str | None = None,
) -> str:
    """The fix task's prompt: the confirmed hypothesis, its evidence, and what earlier attempts
    at it did."""
    evidence = hypothesis.evidence or {}
    lines = [
        f"Fix a confirmed bug in this repository (loop {doc.loop_id}: {doc.title}).",
        f"Hypothesis {hypothesis.id}: {hypothesis.description}",
        f"Failing test: {evidence.get('test_name', '(unknown)')}",
        f"Error: {latest_error or evidence.get('error_message') or '(no message)'}",
        f"Location: {hypothesis.logging_point}",
        f"Evidence: {hypothesis.verdict_reason or 'none'}",
    ]
    trace = evidence.get("stack_trace")
    if isinstance(trace, str) and trace.strip():
        lines += ["Trace (end):", *trace.strip().splitlines()[-20:]]
    for task in earlier or []:
        outcome = task.extra("error") or "it ran, but the test still fails"
        changed = ", ".join(task.files_changed) or "no file"
        lines.append(f"Earlier attempt {task.id} changed {changed}: {outcome}")
    lines.append("Change the code under test so that the test passes; do not weaken the test.")
    return "\n".join(lines)
