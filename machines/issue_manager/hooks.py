"""Hooks of the issue-manager machine: create, after_save, on_error, the status summary, the
outcome, the preflight check and the retry.

They are plain functions here; :mod:`.functions` registers them under these names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from fsm.errors import InputError, RefusedError
from fsm.outcome import Verdict
from fsm.registry import Reopening, Update

from .dependencies import blocked_dependents
from .ids import shown
from .model import IssueManagerState, IssueState, ManagerContext, initial_template
from .options import IssueManagerContext
from .preflight import missing_requirements
from .records import append_history
from .report import run_stats, run_verdict
from .updates import issues_update

__all__ = [
    "create_instance",
    "judge_outcome",
    "record_error",
    "record_history",
    "reopen_issues",
    "requirements",
    "summarize",
]


def create_instance(inputs: dict[str, Any], ctx: IssueManagerContext) -> IssueManagerState:
    """The original skill's template, with the inputs merged in and the work_dir and times
    filled."""
    # The engine has refused every key the inputs model (IssueManagerInputs) does not name.
    _check_context(inputs.get("context", {}))
    document = _merged(initial_template(), inputs)
    now = ctx.clock.iso()
    document |= {"work_dir": _work_dir(ctx), "created_at": now, "updated_at": now}
    context = {"rounds": 0, "max_rounds": 10, "consecutive_errors": 0, "max_errors": 3}
    document["context"] = context | cast(dict[str, Any], document["context"])
    return IssueManagerState.model_validate(document)


def _check_context(given: object) -> None:
    """``context`` inputs are the loop limits and counters: an object of known keys, so that a
    typo (``--set context.max_round=3``) is an error rather than a limit silently not set."""
    if not isinstance(given, dict):
        raise ValueError(f"context must be an object (--set context.max_rounds=N), got {given!r}")
    unknown = sorted(set(given) - set(ManagerContext.model_fields))
    if unknown:
        known = ", ".join(ManagerContext.model_fields)
        raise ValueError(f"unknown context key(s) {', '.join(unknown)}; use {known}")


def record_history(doc: IssueManagerState, ctx: IssueManagerContext) -> None:
    """Append this save to ``state-history.json``, as the original skill's ``saveState`` does."""
    append_history(ctx.instance_dir, doc, ctx.clock.iso())


def record_error(doc: IssueManagerState, ctx: IssueManagerContext, error: BaseException) -> Update:
    """Log the failed step in ``errors``; at ``context.max_errors`` in a row, pause the instance.

    Actions raise only when something outside the issues needs a person (a malformed issues
    file, a disk error): retrying cannot help, and completing would end the instance with its
    issues unprocessed. Paused, it keeps its queue; fix the cause and ``fsm resume`` (which
    resets the count), then ``fsm run``. This replaces the original skill's "complete when the error
    limit is reached".
    """
    event = ctx.transition.event if ctx.transition else "step"
    entry = {
        "action": f"action-{event}",
        "message": str(error) or type(error).__name__,
        "timestamp": ctx.clock.iso(),
    }
    errors = [e if isinstance(e, str) else e.model_dump(mode="json") for e in doc.errors]
    streak = doc.context.consecutive_errors + 1
    update: dict[str, Any] = {
        "errors": [*errors, entry],
        "context.consecutive_errors": streak,
        "updated_at": entry["timestamp"],
    }
    if streak >= doc.context.max_errors and doc.status == "running":
        ctx.log.warning("paused_after_errors", errors=streak, last_error=entry["message"])
        update["status"] = "paused"
    return update


def summarize(doc: IssueManagerState) -> dict[str, str]:
    """Progress lines for ``fsm status``: the same counts as the final report's Summary table."""
    stats = run_stats(doc)
    finished = sum(item.status in ("completed", "failed", "blocked") for item in doc.queue)
    settled = [f"{stats.completed} completed", f"{stats.failed} failed"]
    settled += [
        f"{n} {word}"
        for n, word in ((stats.blocked, "blocked"), (stats.unplanned, "unplanned"))
        if n
    ]
    return {
        "issues": f"{stats.total_issues} ({', '.join(settled)}, {stats.pending} pending)",
        "queue": f"{finished}/{len(doc.queue)} items done",
        "round": f"{doc.context.rounds} of at most {doc.context.max_rounds}",
        "errors": (
            f"{len(doc.errors)} recorded; {doc.context.consecutive_errors} failed steps in a row "
            f"(limit {doc.context.max_errors})"
        ),
    }


def judge_outcome(doc: IssueManagerState) -> Verdict:
    """Success only when every listed issue is done; the reason counts them and names each
    problem with its cause (the same line as the report's Outcome and ``failure_reason``)."""
    success, reason = run_verdict(doc)
    return Verdict(success, reason)


def requirements(doc: IssueManagerState, ctx: IssueManagerContext) -> list[str]:
    """What the run still ahead needs and lacks (see :mod:`.preflight`)."""
    return missing_requirements(doc, ctx)


def reopen_issues(doc: IssueManagerState, ctx: IssueManagerContext, items: list[str]) -> Reopening:
    """``fsm retry``: the issues named (else every one not completed) go back to be planned,
    with the issues they blocked; the instance reopens in ``listing``.

    A reopened issue loses its error, solution, times and ``failed_before``, and is selected for
    planning again: its solution file is read anew (a corrected one is used; one the planning
    agent wrote was bound to the issue, so the agent is not asked twice), and the tasks its
    execution record shows completed for that same solution are not run again. Its old queue
    item stays as it ended (the history of the first attempt); planning queues a new one. The
    loop limits start over (``rounds``, the error streak), ``retries`` counts the retry, and
    ``failure_reason`` and ``completed_at`` are cleared. Issues not named keep their end, so a
    dependent of one of them is blocked again at its planning.
    """
    undone = [i for i in doc.issues.values() if i.status != "completed"]
    unknown = [item for item in items if item not in doc.issues]
    if unknown:
        can = ", ".join(shown(i.id) for i in undone) or "none"
        raise InputError(
            f"no issue {', '.join(map(shown, unknown))} in this instance (issues not done: {can})"
        )
    done = [item for item in items if doc.issues[item].status == "completed"]
    if done:
        raise RefusedError(f"issue {', '.join(map(shown, done))} is completed: nothing to retry")
    chosen = list(dict.fromkeys(items)) or [i.id for i in undone]
    chosen += blocked_dependents(chosen, doc.issues)
    issues = dict(doc.issues)
    for issue_id in chosen:
        issues[issue_id] = _reopened(issues[issue_id])
    now = ctx.clock.iso()
    update: dict[str, Any] = {
        **issues_update(issues),
        "failure_reason": None,
        "completed_at": None,
        "updated_at": now,
        "context.rounds": 0,
        "context.round_limit_reached": False,
        "context.consecutive_errors": 0,
        "context.retries": doc.context.retries + 1,
    }
    ctx.log.info("issues_reopened", issues=chosen)
    return Reopening("listing", update, chosen)


def _reopened(issue: IssueState) -> IssueState:
    """``issue`` selected for planning again, its earlier end forgotten (a planned issue with a
    queued item, or one being planned, is left as it is: it runs next anyway)."""
    if issue.status in ("planned", "planning"):
        return issue
    return issue.model_copy(
        update={
            "status": "planning",
            "error": None,
            "solution_id": None,
            "planned_at": None,
            "executed_at": None,
            "failed_before": False,
        }
    )


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _work_dir(ctx: IssueManagerContext) -> str:
    """The instance folder, relative to the workspace when it is inside it."""
    folder = ctx.instance_dir
    try:
        return Path(folder).relative_to(ctx.workspace).as_posix()
    except ValueError:
        return str(folder)
