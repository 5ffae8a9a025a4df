"""Init and develop: load the task list, run one task per step, turn a root cause into a fix task.

A bash task runs its ``command`` through the executor's shell in the workspace; any other task
runs an agent (``tool``, or ``fix_tool`` when the task names none) with its prompt as one
argument. Either way the task gets a timeout, and a missing command, a missing agent, a non-zero
exit or a timeout make a *failed task* with the reason recorded in the task and in
``skill_state.errors``; the action itself succeeds, so the document always says what happened.
"""

from __future__ import annotations

from typing import Any

from fsm.context import Context
from fsm.executor import ExecResult
from fsm.registry import Update
from machines.ccw_loop.bookkeeping import (
    LoopActionError,
    develop_block,
    dump_task,
    loop_mode,
    max_errors_of,
    options_of,
    progress_of,
    skill_state_of,
    work_done,
)
from machines.ccw_loop.changes import changed_files, take_snapshot
from machines.ccw_loop.model import (
    DebugState,
    DevelopTask,
    ErrorEntry,
    Hypothesis,
    LoopState,
    ValidateState,
)
from machines.ccw_loop.rules import next_pending_task, unfixed_hypothesis
from machines.ccw_loop.tasks import description_task, fallback_task_list, read_task_list

__all__ = ["add_fix_task", "develop_task", "fix_prompt", "init_loop", "task_prompt"]


def init_loop(doc: LoopState, ctx: Context) -> Update:
    """Create ``skill_state``: the tasks (task list, else the description), empty phases, and
    the loop's error limit (persisted, so that it survives restarts)."""
    now = ctx.clock.iso()
    mode = loop_mode(ctx)
    max_errors = max_errors_of(doc, ctx)
    listed = read_task_list(ctx.instance_dir, doc.loop_id, now, fallback=fallback_task_list(ctx))
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


def add_fix_task(doc: LoopState, ctx: Context) -> Update:
    """Append a pending fix task for the confirmed hypothesis (which it thereby consumes)."""
    state = skill_state_of(doc)
    hypothesis_id = unfixed_hypothesis(state)
    if hypothesis_id is None:
        raise LoopActionError("no confirmed hypothesis is waiting for a fix")
    hypothesis = next((h for h in state.debug.hypotheses if h.id == hypothesis_id), None)
    if hypothesis is None:
        raise LoopActionError(f"confirmed hypothesis {hypothesis_id} is not in debug.hypotheses")
    now = ctx.clock.iso()
    task = DevelopTask.model_validate(
        {
            "id": f"fix-{hypothesis_id}",
            "description": f"Fix {hypothesis_id}: {hypothesis.description}"[:500],
            "tool": options_of(ctx).fix_tool,
            "mode": "write",
            "status": "pending",
            "files_changed": [],
            "created_at": now,
            "completed_at": None,
            "fixes": hypothesis_id,
            "prompt_template": fix_prompt(doc, hypothesis),
        }
    )
    # before the first pending task, so that the fix is what develop takes up next
    tasks = list(state.develop.tasks)
    first_pending = next((i for i, t in enumerate(tasks) if t.status == "pending"), len(tasks))
    tasks.insert(first_pending, task)
    ctx.log.info("fix_task_added", task=task.id, hypothesis=hypothesis_id)
    return {"skill_state.develop": develop_block(state.develop, tasks), "updated_at": now}


def develop_task(doc: LoopState, ctx: Context) -> Update:
    """Run the first pending task and record its outcome, changed files and progress entry."""
    state = skill_state_of(doc)
    task = next_pending_task(state)
    if task is None:
        raise LoopActionError("no pending task to develop")
    opts = options_of(ctx)
    tool = task.tool or opts.fix_tool
    before = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
    result, error = _run(doc, task, tool, ctx, opts.task_timeout)
    after = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
    now = ctx.clock.iso()
    changes: dict[str, Any] = {
        "tool": tool,
        "status": "failed" if error else "completed",
        "files_changed": changed_files(before, after),
        "completed_at": now,
    }
    if error:
        changes["error"] = error
    done = task.model_copy(update=changes)
    tasks = [done if t.id == task.id else t for t in state.develop.tasks]
    iteration = doc.current_iteration + 1
    output = (result.stdout + "\n" + result.stderr) if result is not None else ""
    progress_of(doc, ctx).record_task(iteration, done, output, now)
    ctx.log.info("task_developed", task=task.id, tool=tool, ok=error is None, error=error)
    update: dict[str, Any] = {
        "skill_state.develop": develop_block(
            state.develop, tasks, current_task=task.id, last_progress_at=now
        ),
        **work_done(doc, "develop", now, f"task {task.id} failed: {error}" if error else None),
    }
    if error and task.extra("on_error") == "pause":
        update["status"] = "paused"  # the dashboard's on_error "pause": wait for a person
    return update


def _run(
    doc: LoopState, task: DevelopTask, tool: str, ctx: Context, timeout: float
) -> tuple[ExecResult | None, str | None]:
    if tool == "bash":
        command = task.extra("command")
        if not isinstance(command, str) or not command.strip():
            return None, "tool bash needs a command, and the task has none"
        result = ctx.executor.shell(command, cwd=ctx.workspace, timeout=timeout)
    else:
        result = ctx.executor.agent(
            tool, task_prompt(doc, task), mode=task.mode, cwd=ctx.workspace, timeout=timeout
        )
    return result, None if result.ok else result.describe()


def task_prompt(doc: LoopState, task: DevelopTask) -> str:
    """The prompt an agent gets for ``task``: its template (or description) and the loop context."""
    template = task.extra("prompt_template")
    body = template if isinstance(template, str) and template.strip() else task.description
    return (
        f"{body}\n\n"
        f'Context: loop {doc.loop_id} "{doc.title}": {doc.description}\n'
        f"Task {task.id} ({task.mode}): {task.description}"
    )


def fix_prompt(doc: LoopState, hypothesis: Hypothesis) -> str:
    """The fix task's prompt: the confirmed hypothesis and its evidence."""
    evidence = hypothesis.evidence or {}
    lines = [
        f"Fix a confirmed bug in this repository (loop {doc.loop_id}: {doc.title}).",
        f"Hypothesis {hypothesis.id}: {hypothesis.description}",
        f"Failing test: {evidence.get('test_name', '(unknown)')}",
        f"Error: {evidence.get('error_message') or '(no message)'}",
        f"Location: {hypothesis.logging_point}",
        f"Evidence: {hypothesis.verdict_reason or 'none'}",
    ]
    trace = evidence.get("stack_trace")
    if isinstance(trace, str) and trace.strip():
        lines += ["Trace (end):", *trace.strip().splitlines()[-20:]]
    lines.append("Change the code under test so that the test passes; do not weaken the test.")
    return "\n".join(lines)
