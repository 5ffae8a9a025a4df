"""Fix proposals: one per current issue, with its strategy and, when mechanical, its changes.

Proposals are recomputed after every diagnosis round from the files as they are then, so the
changes of a proposal always apply to the current content. A proposal keeps its id across
rounds while it addresses the same issue; a fix that was applied once is never proposed again
(if it failed verification it was rolled back, and trying it again would fail the same way).

A proposal is *pending* (will be applied) when it has mechanical changes, or when it needs
judgement and an agent (option ``fix_tool``) is configured to exercise it. Mechanical fixes go
first, each group in issue priority order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..diagnosis.run import RULES
from ..model import FileChange, Fix, Issue
from ..quality import WEIGHTS
from ..skill import Skill
from .mechanical import mechanical_changes

__all__ = ["Proposals", "propose"]

_FIX_ID = re.compile(r"^FIX-(\d+)$")


@dataclass(frozen=True)
class Proposals:
    """The outcome of :func:`propose`: every fix to keep in the document, and the pending ids."""

    fixes: list[Fix]
    pending: list[str]


def propose(
    issues: Iterable[Issue],
    skill: Skill,
    previous: list[Fix],
    applied_ids: set[str],
    *,
    can_delegate: bool,
    window: int,
) -> Proposals:
    """Proposals for ``issues`` given the earlier proposals and the fixes already applied."""
    kept = [fix for fix in previous if fix.id in applied_ids]
    tried = {issue_id for fix in kept for issue_id in fix.issue_ids}
    reusable = {tuple(fix.issue_ids): fix.id for fix in previous if fix.id not in applied_ids}
    numbers = [int(m.group(1)) for m in (_FIX_ID.match(f.id) for f in previous) if m]
    next_number = max(numbers, default=0) + 1
    mechanical: list[str] = []
    delegated: list[str] = []
    fresh: list[Fix] = []
    for issue in sorted(issues, key=lambda i: (i.priority, i.id)):
        if issue.id in tried:
            continue
        fix_id = reusable.get((issue.id,))
        if fix_id is None:
            fix_id = f"FIX-{next_number:03d}"
            next_number += 1
        fix = _fix_for(fix_id, issue, skill, window)
        fresh.append(fix)
        if fix.changes:
            mechanical.append(fix.id)
        elif can_delegate:
            delegated.append(fix.id)
    return Proposals(kept + fresh, mechanical + delegated)


def _fix_for(fix_id: str, issue: Issue, skill: Skill, window: int) -> Fix:
    rule = RULES.get(issue.rule or "")
    changes = mechanical_changes(skill, issue, window) or []
    strategy = rule.strategy if rule is not None else "custom"
    area = rule.area if rule is not None else "every"
    how = "mechanical change" if changes else "needs judgement (agent or by hand)"
    if not all(_is_text(change) for change in changes):
        # the file is not valid UTF-8: its content cannot be carried in state.json, whose
        # readers expect text, so the fix is left to an agent or a person
        changes = []
        how = "the file is not valid UTF-8: fix it by hand"
    return Fix(
        id=fix_id,
        issue_ids=[issue.id],
        strategy=strategy,
        description=f"{issue.suggested_fix} [{issue.location.file}; {how}]",
        rationale=issue.root_cause,
        changes=changes,
        risk="low" if changes else "medium",
        estimated_impact=(
            f"removes {issue.id} ({issue.severity}): quality score +{WEIGHTS[issue.severity]}"
        ),
        verification_steps=[
            f"re-run the {area} diagnosis on the changed skill",
            f"{issue.id} ({issue.rule or issue.type}) is no longer reported for "
            f"{issue.location.file}",
        ],
    )


def _is_text(change: FileChange) -> bool:
    """Whether ``change`` holds only text (files that are not valid UTF-8 are read with their
    undecodable bytes as lone surrogates, which JSON documents cannot hold)."""
    for content in (change.old_content, change.new_content, change.diff):
        try:
            (content or "").encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True
