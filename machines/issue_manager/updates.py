"""Document updates shared by the actions: the bookkeeping of a successful step, the issue map
with its counters, and the ``errors`` entries of failed issues."""

from __future__ import annotations

from typing import Any

from .model import IssueManagerState, IssueState
from .options import IssueManagerContext
from .report import issue_counts, issue_problem

__all__ = ["done_update", "failure_entries", "issues_update"]


def done_update(doc: IssueManagerState, ctx: IssueManagerContext, action_id: str) -> dict[str, Any]:
    """The bookkeeping of every successful action: its id, the time, the error streak reset."""
    return {
        "completed_actions": [*doc.completed_actions, action_id],
        "updated_at": ctx.clock.iso(),
        "context.consecutive_errors": 0,
    }


def issues_update(issues: dict[str, IssueState]) -> dict[str, Any]:
    """Replace the issue map, with the counters that follow from it.

    The whole map is replaced rather than one dotted key: an issue id with a dot cannot be a
    dotted-path segment.
    """
    counts = issue_counts(issues)
    return {
        "issues": {k: v.model_dump(mode="json") for k, v in issues.items()},
        "context.total_issues": counts.total_issues,
        "context.completed_count": counts.completed,
        "context.failed_count": counts.failed,
        "context.blocked_count": counts.blocked,
        "context.unplanned_count": counts.unplanned,
    }


def failure_entries(
    doc: IssueManagerState, action_id: str, failed: list[IssueState], ctx: IssueManagerContext
) -> dict[str, Any]:
    """``errors`` with one entry per issue in ``failed``: the issue, and what went wrong."""
    entries = [
        {
            "action": action_id,
            "message": issue_problem(issue) or f"{issue.id} failed",
            "timestamp": ctx.clock.iso(),
            "issue_id": issue.id,
        }
        for issue in failed
    ]
    errors = [e if isinstance(e, str) else e.model_dump(mode="json") for e in doc.errors]
    return {"errors": [*errors, *entries]} if entries else {}
