"""The numbers of a run and the files that report them: execution results and the final report.

``success_rate`` is completed issues over all issues, in percent, to one decimal (``"66.7"``;
``"0.0"`` when there are no issues), as the seed's ``action-complete`` computes it. Pending issues
are those neither completed nor failed (never planned, planning failed, or left by a limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machines.issue_manager.model import ErrorEntry, IssueManagerState, IssueState, QueueItem

__all__ = ["RunStats", "execution_results", "final_report", "run_stats"]

_MARKS = {"completed": "✓", "failed": "✗"}


@dataclass(frozen=True)
class RunStats:
    """Issue totals of one instance."""

    total_issues: int
    completed: int
    failed: int

    @property
    def pending(self) -> int:
        """Issues neither completed nor failed."""
        return self.total_issues - self.completed - self.failed

    @property
    def success_rate(self) -> str:
        """Completed over total, in percent, one decimal."""
        if self.total_issues == 0:
            return "0.0"
        return f"{self.completed / self.total_issues * 100:.1f}"


def run_stats(doc: IssueManagerState) -> RunStats:
    """Count the document's issues by outcome."""
    statuses = [issue.status for issue in doc.issues.values()]
    return RunStats(len(statuses), statuses.count("completed"), statuses.count("failed"))


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
    """``final-report.md``: summary, results by issue, errors, and the files written."""
    stats = run_stats(doc)
    lines = [
        "# Issue Manager Report",
        "",
        f"- Instance: `{instance_id}`",
        f"- Started: {doc.created_at}",
        f"- Completed: {completed_at}",
        f"- Rounds: {doc.context.rounds}",
        "",
        "## Summary",
        "",
        "| Metric | Value |",
        "| --- | --- |",
        f"| Total issues | {stats.total_issues} |",
        f"| Completed | {stats.completed} |",
        f"| Failed | {stats.failed} |",
        f"| Pending | {stats.pending} |",
        f"| Success rate | {stats.success_rate}% |",
        "",
        "## Results by Issue",
        "",
    ]
    if not doc.issues:
        lines.append("No issues were found.")
    for issue in doc.issues.values():
        mark = _MARKS.get(issue.status, "○")
        solution = f" ({issue.solution_id})" if issue.solution_id else ""
        title = f" {issue.title}" if issue.title else ""
        line = f"- {mark} **{issue.id}**{title}{solution}: {issue.status}"
        if issue.error:
            line += f": {issue.error}"
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
        return f"- {error}"
    when = f"{error.timestamp} " if error.timestamp else ""
    action = f"{error.action}: " if error.action else ""
    return f"- {when}{action}{error.message}"
