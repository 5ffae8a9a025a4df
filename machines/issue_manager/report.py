"""The numbers of a run, its verdict, and the files that report them.

``success_rate`` is completed issues over all issues, in percent, to one decimal (``"66.7"``;
``"0.0"`` when there are no issues), as the original skill's ``action-complete`` computes it. Failed
issues are those whose id was unsafe, whose planning failed or whose execution failed, and those an
earlier run failed (the issues file says ``failed``); blocked issues are those a dependency kept
from running; unplanned ones had no solution file while ``plan_tool`` is ``"none"``; pending issues
are the rest of the unfinished ones (left by a limit).

The verdict (:func:`run_verdict`) is what the run achieved, in one line: success only when every
listed issue is completed (``"4 of 4 issues done"``), or when there was nothing to do; otherwise
the count and each problem with its cause (``"2 of 4 issues done; ISS-3 failed: task T2 ...;
ISS-4 blocked: depends on ISS-3, which failed"``), then how to retry them (``"to retry: fsm
retry issue-manager <id>"``). The final report, ``summary.json``, ``failure_reason`` in the
document and the engine's outcome all say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ids import shown, unsafe_id_problem
from .model import UNDONE_STATUSES, ErrorEntry, IssueManagerState, IssueState, QueueItem

__all__ = [
    "NOTHING_TO_DO",
    "RunStats",
    "all_issues_done",
    "execution_results",
    "final_report",
    "issue_problem",
    "retry_hint",
    "run_stats",
    "run_verdict",
    "summary_file",
]

_MARKS = {"completed": "✓", "failed": "✗", "blocked": "⊘"}
_PROBLEMS_SHOWN = 3
_PROBLEM_ORDER = {"failed": 0, "blocked": 2}
_PROBLEM_LIMIT = 200

NOTHING_TO_DO = "nothing to do: the issues file lists no open issue (registered or planned)"


@dataclass(frozen=True)
class RunStats:
    """Issue totals of one instance."""

    total_issues: int
    completed: int
    failed: int
    blocked: int = 0
    unplanned: int = 0

    @property
    def pending(self) -> int:
        """Issues neither completed, failed, blocked nor unplanned."""
        return self.total_issues - self.completed - self.failed - self.blocked - self.unplanned

    @property
    def success_rate(self) -> str:
        """Completed over total, in percent, one decimal."""
        if self.total_issues == 0:
            return "0.0"
        return f"{self.completed / self.total_issues * 100:.1f}"


def run_stats(doc: IssueManagerState) -> RunStats:
    """Count the document's issues by outcome."""
    return issue_counts(doc.issues)


def issue_counts(issues: dict[str, IssueState]) -> RunStats:
    """Count ``issues`` by outcome."""
    statuses = [issue.status for issue in issues.values()]
    return RunStats(
        len(statuses),
        statuses.count("completed"),
        statuses.count("failed"),
        statuses.count("blocked"),
        statuses.count("unplanned"),
    )


def all_issues_done(doc: IssueManagerState) -> bool:
    """Every listed issue is completed (true of an empty backlog: there was nothing to do)."""
    return all(issue.status == "completed" for issue in doc.issues.values())


def failure_stage(issue: IssueState) -> str:
    """Where a failed issue failed: ``listing`` (unsafe id), ``earlier`` (before this instance),
    ``planning`` or ``execution``."""
    if unsafe_id_problem(issue.id) is not None:
        return "listing"
    if issue.failed_before:
        return "earlier"
    if issue.solution_id is None and issue.planned_at is None:
        return "planning"
    return "execution"


def issue_problem(issue: IssueState) -> str | None:
    """What went wrong with ``issue`` (id, stage and cause, one line), None when it is done."""
    if issue.status == "completed":
        return None
    cause = _one_line(issue.error or "")
    if issue.status in ("blocked", "unplanned"):
        return f"{shown(issue.id)} {issue.status}: {cause or 'no cause recorded'}"
    if issue.status != "failed":
        return f"{shown(issue.id)} not done ({issue.status})" + (f": {cause}" if cause else "")
    stage = failure_stage(issue)
    if stage == "listing":
        return cause or f"unsafe issue id '{shown(issue.id)}'"
    verb = {"planning": "planning failed", "earlier": "failed before this instance"}.get(
        stage, "failed"
    )
    return f"{shown(issue.id)} {verb}: {cause or 'no cause recorded'}"


def retry_hint(doc: IssueManagerState) -> str | None:
    """How to retry the issues this instance failed, blocked or left unplanned (None if none).

    The instance id is the name of its work_dir (``.workflow/.scratchpad/{id}``).
    """
    if not any(issue.status in UNDONE_STATUSES for issue in doc.issues.values()):
        return None
    instance_id = shown(Path(doc.work_dir).name)
    return f"to retry: fsm retry issue-manager {instance_id} [ISSUE...]"


def run_verdict(doc: IssueManagerState) -> tuple[bool, str]:
    """Whether the run reached its goal (every issue done), and the one-line reason."""
    stats = run_stats(doc)
    if stats.total_issues == 0:
        return True, NOTHING_TO_DO
    # Causes before their consequences: failures first, then what they blocked.
    ordered = sorted(doc.issues.values(), key=lambda i: _PROBLEM_ORDER.get(i.status, 1))
    problems = [p for p in map(issue_problem, ordered) if p is not None]
    done = f"{stats.completed} of {stats.total_issues} issues done"
    if doc.context.round_limit_reached:
        done += (
            f" (round limit {doc.context.max_rounds} reached: issues added to the file after "
            "the last listing were not read)"
        )
    if not problems:
        return True, done
    parts = [done, *(_clipped(p) for p in problems[:_PROBLEMS_SHOWN])]
    more = len(problems) - _PROBLEMS_SHOWN
    if more > 0:
        parts.append(f"and {more} more (see final-report.md)")
    hint = retry_hint(doc)
    if hint is not None:
        parts.append(hint)
    return False, "; ".join(parts)


def _one_line(text: str) -> str:
    return shown(" ".join(text.split()))


def _clipped(text: str) -> str:
    return text if len(text) <= _PROBLEM_LIMIT else text[: _PROBLEM_LIMIT - 3] + "..."


def summary_file(
    doc: IssueManagerState, report_path: Path, reason: str, completed_at: str
) -> dict[str, Any]:
    """``summary.json``: the original skill's ``{status, stats, report_file, work_dir,
    completed_at}``, with the verdict's reason and the number of errors."""
    stats = run_stats(doc)
    success = all_issues_done(doc)
    return {
        "status": "completed" if success else "failed",
        "reason": reason,
        "stats": {
            "total_issues": stats.total_issues,
            "completed": stats.completed,
            "failed": stats.failed,
            "blocked": stats.blocked,
            "unplanned": stats.unplanned,
            "pending": stats.pending,
            "success_rate": stats.success_rate,
        },
        "errors": len(doc.errors),
        "report_file": str(report_path),
        "work_dir": doc.work_dir,
        "completed_at": completed_at,
    }


def execution_results(
    queue: list[QueueItem], issues: dict[str, IssueState], timestamp: str
) -> dict[str, Any]:
    """``execution-results.json``: one result per finished queue item, with the totals."""
    results: list[dict[str, Any]] = []
    for item in queue:
        if item.status not in ("completed", "failed"):
            continue
        issue = issues[item.issue_id]
        result: dict[str, Any] = {
            "item_id": item.item_id,
            "issue_id": item.issue_id,
            "solution_id": item.solution_id,
            "status": item.status,
            "executed_at": issue.executed_at,
        }
        if item.status == "failed":
            result["error"] = issue.error
        results.append(result)
    return {
        "total": len(results),
        "completed": sum(r["status"] == "completed" for r in results),
        "failed": sum(r["status"] == "failed" for r in results),
        "results": results,
        "timestamp": timestamp,
    }


def final_report(doc: IssueManagerState, instance_id: str, completed_at: str) -> str:
    """``final-report.md``: outcome, summary, results by issue, errors, and the files written."""
    stats = run_stats(doc)
    success, reason = run_verdict(doc)
    hint = retry_hint(doc)
    lines = [
        "# Issue Manager Report",
        "",
        f"- Instance: `{instance_id}`",
        f"- Outcome: {'completed' if success else 'failed'}: {reason}",
        f"- Started: {doc.created_at}",
        f"- Completed: {completed_at}",
        f"- Rounds: {doc.context.rounds}",
        *([f"- Retries: {doc.context.retries}"] if doc.context.retries else []),
        *([f"- Retry: `{hint.removeprefix('to retry: ')}`"] if hint else []),
        "",
        "## Summary",
        "",
        "| Metric | Value |",
        "| --- | --- |",
        f"| Total issues | {stats.total_issues} |",
        f"| Completed | {stats.completed} |",
        f"| Failed | {stats.failed} |",
        f"| Blocked | {stats.blocked} |",
        f"| Unplanned | {stats.unplanned} |",
        f"| Pending | {stats.pending} |",
        f"| Success rate | {stats.success_rate}% |",
        f"| Errors | {len(doc.errors)} |",
        "",
        "## Results by Issue",
        "",
    ]
    if not doc.issues:
        lines.append("No issues were found.")
    for issue in doc.issues.values():
        mark = _MARKS.get(issue.status, "○")
        solution = f" ({issue.solution_id})" if issue.solution_id else ""
        title = f" {_one_line(issue.title)}" if issue.title else ""
        line = f"- {mark} **{shown(issue.id)}**{title}{solution}: {issue.status}"
        if issue.status == "failed":
            line += {"planning": " in planning", "earlier": " before this instance"}.get(
                failure_stage(issue), ""
            )
        if issue.error:
            line += f": {_one_line(issue.error)}"
        lines.append(line)
    lines += ["", "## Errors", ""]
    errors = [_error_line(e) for e in doc.errors]
    lines += errors or ["None."]
    lines += [
        "",
        "## Files",
        "",
        "- `state.json`: the state document",
        "- `state-history.json`: one entry per save",
        "- `execution-results.json`: the result of every executed queue item",
        "- `snapshots/`: the state document before each queue item",
        "- `solutions/`: the solution used for each issue and its execution record",
        "- `summary.json`: these totals as JSON",
        "",
    ]
    return "\n".join(lines)


def _error_line(error: ErrorEntry | str) -> str:
    if isinstance(error, str):
        return f"- {_one_line(error)}"
    when = f"{error.timestamp} " if error.timestamp else ""
    action = f"{error.action}: " if error.action else ""
    return f"- {when}{action}{_one_line(error.message)}"
