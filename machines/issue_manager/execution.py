"""Executing one planned solution: its tasks in dependency order, stopping at the first failure.

A task with a ``command`` runs it through bash in the workspace; a task without one runs the
execution agent with the task's prompt (``write`` mode: it may edit files), and an agent that
ends without changing any file of the workspace has not done the task: it fails, saying so
(what changed is read from git, or from file stamps outside a repository; when it cannot be
known, the agent's exit status decides). Progress is written
task by task to ``solutions/{issue_id}-execution.json``. That record is what makes a resumed item
safe: when an item runs again (the run crashed after some of its tasks, before the document was
saved), tasks the record shows completed for the same solution are not run a second time.
Each task's entry names how it ran (``via``) and what ran (``command``): the task's own command,
or for an agent the redacted command of :mod:`.redaction`, never the configured secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm.executor import ExecResult, changed_files, is_known, take_snapshot

from .files import read_json, write_json_atomic
from .ids import UnsafeIdError
from .model import IssueState
from .options import IssueManagerContext, IssueManagerOptions
from .records import execution_record_path, read_plan
from .redaction import describe_agent_run
from .solution import Solution, SolutionTask

__all__ = ["ExecutionOutcome", "execute_issue", "task_prompt"]


@dataclass(frozen=True)
class ExecutionOutcome:
    """Whether every task succeeded; else the first error. ``tasks`` lists what each task did."""

    solution_id: str
    error: str | None
    tasks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every task of the solution succeeded."""
        return self.error is None


def execute_issue(
    issue: IssueState, work_dir: Path, ctx: IssueManagerContext, options: IssueManagerOptions
) -> ExecutionOutcome:
    """Run the tasks of the solution planned for ``issue``."""
    solution_id = issue.solution_id or ""
    try:
        solution = read_plan(work_dir, issue.id)
    except UnsafeIdError as exc:
        return ExecutionOutcome(solution_id, str(exc))
    except (OSError, ValueError) as exc:
        return ExecutionOutcome(solution_id, f"cannot read the planned solution: {exc}")
    record_path = execution_record_path(work_dir, issue.id)
    record = _start_record(record_path, issue, solution, ctx.clock.iso())
    done_before = {
        t["id"] for t in record["execution_result"]["tasks"] if t.get("status") == "completed"
    }
    results: list[dict[str, Any]] = [
        t for t in record["execution_result"]["tasks"] if t["id"] in done_before
    ]
    _save_record(record_path, record, results, "executing")
    error: str | None = None
    for task in solution.ordered_tasks():
        if task.id in done_before:
            ctx.log.info(
                "task_skipped",
                issue_id=issue.id,
                task_id=task.id,
                reason="completed in an earlier attempt",
            )
            continue
        ran = _run_task(task, issue, solution, ctx, options)
        entry = {
            "id": task.id,
            "title": task.title,
            "via": ran.via,
            "command": ran.command,
            "status": "completed" if ran.succeeded else "failed",
            "detail": ran.detail,
            "duration_ms": ran.result.duration_ms,
            "finished_at": ctx.clock.iso(),
        }
        results.append(entry)
        _save_record(record_path, record, results, "executing")
        ctx.log.info("task_finished", issue_id=issue.id, task_id=task.id, status=entry["status"])
        if not ran.succeeded:
            title = f" ({task.title})" if task.title else ""
            error = f"task {task.id}{title} failed: {ran.detail}"
            break
    record["executed_at"] = ctx.clock.iso()
    _save_record(record_path, record, results, "completed" if error is None else "failed")
    return ExecutionOutcome(solution.id, error, results)


def task_prompt(task: SolutionTask, issue: IssueState, solution: Solution) -> str:
    """The execution agent's prompt: the task's own prompt, with the issue and criteria."""
    lines = [
        f"Issue {issue.id}: {issue.title}",
        f"Solution {solution.id}: {solution.description}".rstrip(": "),
        f"Task {task.id}: {task.title}".rstrip(": "),
        "",
        task.prompt or task.title or f"Carry out task {task.id}.",
    ]
    criteria = task.acceptance.criteria if task.acceptance else []
    if criteria:
        lines += ["", "Acceptance criteria:", *(f"- {c}" for c in criteria)]
    return "\n".join(lines)


@dataclass(frozen=True)
class _TaskRun:
    """One task's run: how it ran (``command`` or ``agent:<tool>``), what ran, how it ended."""

    result: ExecResult
    via: str
    command: str
    detail: str
    ok: bool = True
    """False when the run itself succeeded but did not do the task (an agent that changed no
    file); ``detail`` says why."""

    @property
    def succeeded(self) -> bool:
        """The task is done: it ran to a zero exit and, for an agent, changed something."""
        return self.ok and self.result.ok


def _run_task(
    task: SolutionTask,
    issue: IssueState,
    solution: Solution,
    ctx: IssueManagerContext,
    options: IssueManagerOptions,
) -> _TaskRun:
    if task.command:
        result = ctx.executor.shell(task.command, cwd=ctx.workspace, timeout=options.task_timeout)
        return _TaskRun(result, "command", task.command, result.describe())
    tool = options.execute_tool
    prompt = task_prompt(task, issue, solution)
    before = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
    result = ctx.executor.agent(
        tool, prompt, mode="write", cwd=ctx.workspace, timeout=options.task_timeout
    )
    detail = describe_agent_run(tool, result)
    if result.ok:
        after = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
        if is_known(before, after) and not changed_files(
            before, after, ctx.executor, ctx.workspace
        ):
            said = _last_line(result.stdout)
            detail = f"the task changed no file (agent {tool} exited 0 without an edit)"
            detail += f"; {said}" if said else ""
            return _TaskRun(result, f"agent:{tool}", " ".join(result.argv), detail, ok=False)
    return _TaskRun(result, f"agent:{tool}", " ".join(result.argv), detail)


def _last_line(output: str) -> str:
    """The agent's last word (its last non-empty output line), shortened."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _start_record(path: Path, issue: IssueState, solution: Solution, now: str) -> dict[str, Any]:
    """The execution record to continue: the earlier one for this solution, else a new one."""
    try:
        earlier = read_json(path)
    except ValueError:
        earlier = None
    if (
        isinstance(earlier, dict)
        and earlier.get("solution_id") == solution.id
        and isinstance(earlier.get("execution_result"), dict)
        and isinstance(earlier["execution_result"].get("tasks"), list)
    ):
        earlier["execution_result"]["tasks"] = [
            t for t in earlier["execution_result"]["tasks"] if isinstance(t, dict) and "id" in t
        ]
        return earlier
    return {
        "solution_id": solution.id,
        "issue_id": issue.id,
        "status": "executing",
        "started_at": now,
        "executed_at": None,
        "execution_result": {"tasks": []},
    }


def _save_record(
    path: Path, record: dict[str, Any], tasks: list[dict[str, Any]], status: str
) -> None:
    record["status"] = status
    record["execution_result"] = {"tasks": tasks}
    write_json_atomic(path, record)
