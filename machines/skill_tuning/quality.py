"""The quality score and gate, and the one way to write a new list of issues.

Score: ``max(0, 100 - 25*critical - 15*high - 5*medium - 1*low)``. Gate: ``fail`` with any
critical issue, more than 5 high ones, or a score under 60; ``review`` with more than 2 high
ones or a score under 80; else ``pass``. (CCW's actions used a different, laxer rule; this
stricter one is fsm's.) Issues to review (rules measured under 0.9 precision) are not counted.
"""

from __future__ import annotations

from typing import Any, Literal

from .model import Issue, IssuesBySeverity, count_by_severity

__all__ = ["WEIGHTS", "Gate", "issue_update", "quality_gate", "quality_score"]

Gate = Literal["pass", "review", "fail"]
WEIGHTS = {"critical": 25, "high": 15, "medium": 5, "low": 1}


def quality_score(counts: IssuesBySeverity) -> int:
    """100 minus the weighted issue counts, never below 0."""
    penalty = sum(weight * int(getattr(counts, severity)) for severity, weight in WEIGHTS.items())
    return max(0, 100 - penalty)


def quality_gate(counts: IssuesBySeverity) -> Gate:
    """The gate verdict for these counts."""
    score = quality_score(counts)
    if counts.critical > 0 or counts.high > 5 or score < 60:
        return "fail"
    if counts.high > 2 or score < 80:
        return "review"
    return "pass"


def issue_update(issues: list[Issue], to_review: list[Issue] | None = None) -> dict[str, Any]:
    """The update that replaces the issue list, with the severity counts that must match it
    (and the list of issues to review, outside the counts, when given)."""
    update = {
        "issues": [issue.model_dump(mode="json", exclude_none=True) for issue in issues],
        "issues_by_severity": count_by_severity(issues).model_dump(),
    }
    if to_review is not None:
        update["issues_to_review"] = [
            issue.model_dump(mode="json", exclude_none=True) for issue in to_review
        ]
    return update
