"""The registry of the issue-manager machine: the names ``machine.yaml`` uses.

Guards and actions are defined here; the hooks are defined in :mod:`.hooks` and registered here.

Each action does one stage of the original skill's flow and returns the update of the document; the
domain work lives in :mod:`.planning`, :mod:`.execution`, :mod:`.issues_file` and :mod:`.report`.
Planning and execution take one issue or one queue item per step, so a pause or stop lands between
items and a resumed run continues with the next unfinished one.

``completed_actions`` gets the original skill's action id (``action-init``, ``action-list``,
``action-plan``, ``action-execute``, ``action-complete``) each time an action completes.

An issue that fails (unsafe id, planning, execution) is a successful step that records a failure:
the issue becomes ``failed`` with its cause in ``error``, and ``errors`` gets an entry naming the
issue, so the report's Errors section and the run's outcome carry the cause.
"""

from __future__ import annotations

from typing import Any

from fsm.helpers import ensure_folder
from fsm.registry import Registry, Update

from .dependencies import next_work, planning_blocker
from .execution import execute_issue
from .files import write_json_atomic, write_text_atomic
from .hooks import (
    create_instance,
    judge_outcome,
    record_error,
    record_history,
    reopen_issues,
    requirements,
    summarize,
)
from .ids import unsafe_id_problem
from .issues_file import known_statuses, read_issues, write_statuses
from .model import IssueManagerState, IssueState, QueueItem
from .options import IssueManagerContext, IssueManagerInputs, IssueManagerOptions
from .planning import plan_issue
from .records import write_plan, write_snapshot
from .report import (
    all_issues_done,
    execution_results,
    final_report,
    run_stats,
    run_verdict,
    summary_file,
)
from .updates import done_update, failure_entries, issues_update

__all__ = ["registry"]

registry = Registry()
registry.document(IssueManagerState)
registry.options(IssueManagerOptions)
registry.inputs(IssueManagerInputs)

LISTED_STATUSES = frozenset({"registered", "planned"})
"""Issue-file statuses the list picks up (as ``ccw issue list --status registered,planned``)."""


# -- guards -------------------------------------------------------------------------------------


@registry.guard
def has_planning_issue(doc: IssueManagerState, ctx: IssueManagerContext) -> bool:
    """An issue was selected for planning and is not planned yet."""
    return any(issue.status == "planning" for issue in doc.issues.values())


@registry.guard
def has_unfinished_item(doc: IssueManagerState, ctx: IssueManagerContext) -> bool:
    """A queue item is pending, or was left executing by an interrupted run."""
    return doc.next_item() is not None


@registry.guard(budget=True)
def below_error_limit(doc: IssueManagerState, ctx: IssueManagerContext) -> bool:
    """Fewer than ``context.max_errors`` steps failed in a row.

    Planning and execution loops progress by one issue or item per step; only a step that keeps
    failing (and so changes nothing) could repeat forever, and this limit ends that: the
    ``on_error`` hook pauses the instance when the limit is reached.
    """
    return doc.context.consecutive_errors < doc.context.max_errors


@registry.guard
def every_issue_done(doc: IssueManagerState, ctx: IssueManagerContext) -> bool:
    """Every listed issue is completed (an empty backlog too: there was nothing to do)."""
    return all_issues_done(doc)


@registry.guard(budget=True)
def within_round_budget(doc: IssueManagerState, ctx: IssueManagerContext) -> bool:
    """Fewer than ``context.max_rounds`` list passes: issues may keep arriving forever."""
    return doc.context.rounds < doc.context.max_rounds


# -- actions ------------------------------------------------------------------------------------


@registry.action
def touch(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """Stamp ``updated_at`` when a control command changes the status."""
    return {"updated_at": ctx.clock.iso()}


@registry.action
def reset_error_streak(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """On resume: a person has looked at the errors, so the failed-step count starts over."""
    return {"updated_at": ctx.clock.iso(), "context.consecutive_errors": 0}


@registry.action
def initialize(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """Create the work folders (``snapshots/``, ``solutions/``)."""
    for name in ("snapshots", "solutions"):
        ensure_folder(ctx.instance_dir / name, ctx.workspace)
    return done_update(doc, ctx, "action-init")


@registry.action
def list_issues(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """Read the issues file; register unseen issues and select registered ones for planning.

    An issue whose id is not safe as a file name is registered as ``failed`` with the reason and
    never touches a path. An issue the file calls ``failed`` (an earlier run failed it) is
    listed as failed and not run: the backlog is not done, and ``fsm retry`` runs it. A
    registered issue with an ``error`` (left by older versions after a planning failure) is not
    selected again. A missing or malformed issues file raises before anything is changed.
    """
    path = ctx.workspace / ctx.options.issues_file
    records = read_issues(path)
    issues = dict(doc.issues)
    added: list[IssueState] = []
    for record in records:
        if record.id in issues or record.status not in (*LISTED_STATUSES, "failed"):
            continue
        issue = IssueState(
            id=record.id,
            title=record.title,
            description=record.description,
            depends_on=list(record.depends_on),
        )
        unsafe = unsafe_id_problem(record.id)
        if unsafe is not None:
            issue = issue.model_copy(update={"status": "failed", "error": unsafe})
        elif record.status == "failed":
            issue = issue.model_copy(
                update={
                    "status": "failed",
                    "failed_before": True,
                    "error": f"{ctx.options.issues_file} says failed (an earlier run failed it)",
                }
            )
        issues[record.id] = issue
        added.append(issue)
    selected = 0
    for issue_id, issue in issues.items():
        if issue.status == "registered" and issue.error is None:
            issues[issue_id] = issue.model_copy(update={"status": "planning"})
            selected += 1
    rejected = [issue for issue in added if issue.status == "failed"]
    for issue in rejected:
        ctx.log.warning("issue_rejected", issue_id=issue.id, error=issue.error)
    ctx.log.info(
        "issues_listed",
        file=str(path),
        in_file=len(records),
        added=len(added),
        rejected=len(rejected),
        selected=selected,
        known=len(issues),
    )
    return {
        **done_update(doc, ctx, "action-list"),
        **issues_update(issues),
        **failure_entries(doc, "action-list", rejected, ctx),
        "context.rounds": doc.context.rounds + 1,
    }


@registry.action
def plan_next_issue(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """Plan the first issue selected for planning; queue its solution as the next ``S-n``.

    An issue that can never run (a dependency failed, is blocked, unplanned or not completed
    outside this instance, or a dependency cycle) is blocked instead, with the reason; one
    without a solution file while ``plan_tool`` is ``"none"`` is unplanned.
    """
    issue = next(i for i in doc.issues.values() if i.status == "planning")
    update: dict[str, Any] = done_update(doc, ctx, "action-plan")
    blocker = None
    if issue.depends_on:
        outside = known_statuses(ctx.workspace / ctx.options.issues_file)
        blocker = planning_blocker(issue, doc.issues, outside)
    if blocker is not None:
        ctx.log.warning("issue_blocked", issue_id=issue.id, reason=blocker)
        blocked = issue.model_copy(update={"status": "blocked", "error": blocker})
        return (
            update
            | issues_update(doc.issues | {issue.id: blocked})
            | failure_entries(doc, "action-plan", [blocked], ctx)
        )
    outcome = plan_issue(issue, ctx, ctx.options)
    if outcome.unplanned:
        ctx.log.info("issue_unplanned", issue_id=issue.id, reason=outcome.error)
        unplanned = issue.model_copy(update={"status": "unplanned", "error": outcome.error})
        return update | issues_update(doc.issues | {issue.id: unplanned})
    if outcome.solution is None:
        # The issues file keeps "registered": the issue still awaits a plan, and a new instance
        # tries again once the cause (a solution file, an agent) is fixed.
        ctx.log.warning("issue_planning_failed", issue_id=issue.id, error=outcome.error)
        failed = issue.model_copy(update={"status": "failed", "error": outcome.error})
        return (
            update
            | issues_update(doc.issues | {issue.id: failed})
            | failure_entries(doc, "action-plan", [failed], ctx)
        )
    solution = outcome.solution
    write_plan(ctx.instance_dir, issue.id, solution, outcome.source)
    planned = issue.model_copy(
        update={
            "status": "planned",
            "solution_id": solution.id,
            "planned_at": ctx.clock.iso(),
            "error": None,
        }
    )
    number = max((item.number for item in doc.queue), default=0) + 1
    item = QueueItem(item_id=f"S-{number}", issue_id=issue.id, solution_id=solution.id)
    write_statuses(ctx.workspace / ctx.options.issues_file, {issue.id: "planned"})
    ctx.log.info(
        "issue_planned",
        issue_id=issue.id,
        solution_id=solution.id,
        source=outcome.source,
        item_id=item.item_id,
    )
    queue = [q.model_dump(mode="json") for q in doc.queue] + [item.model_dump(mode="json")]
    return update | issues_update(doc.issues | {issue.id: planned}) | {"queue": queue}


@registry.action
def execute_next_item(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """Snapshot the document, run the tasks of the next item whose dependencies are done,
    record the outcome; or block the next item whose dependency failed (see
    :mod:`.dependencies`)."""
    work = next_work(doc)
    if work is None:
        raise RuntimeError("execute_next_item: the queue has no unfinished item")
    item, blocker = work
    if blocker is not None:
        return _block_item(doc, ctx, item, blocker)
    if item.status == "executing":
        ctx.log.warning("interrupted_item_resumed", item_id=item.item_id, issue_id=item.issue_id)
    write_snapshot(ctx.instance_dir, _persisted(doc, ctx), item, ctx.clock.iso())
    issue = doc.issue(item.issue_id)
    outcome = execute_issue(issue, ctx.instance_dir, ctx, ctx.options)
    status = "completed" if outcome.ok else "failed"
    finished = issue.model_copy(
        update={"status": status, "executed_at": ctx.clock.iso(), "error": outcome.error}
    )
    queue = [q.model_copy(update={"status": status}) if q is item else q for q in doc.queue]
    issues = doc.issues | {issue.id: finished}
    write_statuses(ctx.workspace / ctx.options.issues_file, {issue.id: status})
    write_json_atomic(
        ctx.instance_dir / "execution-results.json",
        execution_results(queue, issues, ctx.clock.iso()),
    )
    ctx.log.info(
        "item_executed", item_id=item.item_id, issue_id=issue.id, status=status, error=outcome.error
    )
    return {
        **done_update(doc, ctx, "action-execute"),
        **issues_update(issues),
        **failure_entries(doc, "action-execute", [finished] if not outcome.ok else [], ctx),
        "queue": [q.model_dump(mode="json") for q in queue],
    }


def _block_item(
    doc: IssueManagerState, ctx: IssueManagerContext, item: QueueItem, blocker: str
) -> Update:
    """Settle ``item`` without running it: its issue is blocked by a dependency."""
    issue = doc.issue(item.issue_id)
    ctx.log.warning("issue_blocked", issue_id=issue.id, item_id=item.item_id, reason=blocker)
    blocked = issue.model_copy(update={"status": "blocked", "error": blocker})
    queue = [q.model_copy(update={"status": "blocked"}) if q is item else q for q in doc.queue]
    return {
        **done_update(doc, ctx, "action-execute"),
        **issues_update(doc.issues | {issue.id: blocked}),
        **failure_entries(doc, "action-execute", [blocked], ctx),
        "queue": [q.model_dump(mode="json") for q in queue],
    }


@registry.action
def finalize(doc: IssueManagerState, ctx: IssueManagerContext) -> Update:
    """Write ``final-report.md``, ``summary.json`` and ``execution-results.json``; end the run.

    The status is ``completed`` only when every issue is done, else ``failed`` with the reason
    in ``failure_reason`` (the transitions ``complete`` and ``fail`` choose the state the same way).
    """
    now = ctx.clock.iso()
    # Ending anywhere but right after a list pass means the round budget forbade one more.
    source = ctx.transition.source if ctx.transition else "listing"
    if source != "listing" and not within_round_budget(doc, ctx):
        doc = doc.model_copy(
            update={"context": doc.context.model_copy(update={"round_limit_reached": True})}
        )
    stats = run_stats(doc)
    success, reason = run_verdict(doc)
    status = "completed" if success else "failed"
    work_dir = ctx.instance_dir
    write_text_atomic(work_dir / "final-report.md", final_report(doc, ctx.instance_id, now))
    write_json_atomic(
        work_dir / "execution-results.json", execution_results(doc.queue, doc.issues, now)
    )
    write_json_atomic(
        work_dir / "summary.json", summary_file(doc, work_dir / "final-report.md", reason, now)
    )
    ctx.log.info(
        "final_report_written",
        status=status,
        reason=reason,
        total_issues=stats.total_issues,
        completed=stats.completed,
        failed=stats.failed,
    )
    return {
        **done_update(doc, ctx, "action-complete"),
        "status": status,
        "failure_reason": None if success else reason,
        "completed_at": now,
        "updated_at": now,
        "context.total_issues": stats.total_issues,
        "context.completed_count": stats.completed,
        "context.failed_count": stats.failed,
        "context.blocked_count": stats.blocked,
        "context.unplanned_count": stats.unplanned,
        "context.success_rate": stats.success_rate,
        "context.round_limit_reached": doc.context.round_limit_reached,
    }


def _persisted(doc: IssueManagerState, ctx: IssueManagerContext) -> Any:
    """The document as its store holds it (what the snapshot keeps), else as the model has it."""
    stored = ctx.stored_document()
    return stored if stored is not None else doc.model_dump(mode="json")


# -- hooks --------------------------------------------------------------------------------------

registry.hook(create_instance)
registry.hook(record_history)
registry.hook(record_error)
registry.hook(summarize)
registry.hook(judge_outcome)
registry.hook(requirements)
registry.hook(reopen_issues)
