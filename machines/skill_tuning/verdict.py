"""How a run ended, in one line, and the counts that line, the report and ``fsm status`` share.

A run succeeds only when the quality gate passed. Every other end is a failure with a reason
naming the gate, the score, what is left and why it was left:

    quality gate pass: 95/100, 1 medium left; 4 fixes kept, 1 rolled back; 2 iterations
    quality gate review: 70/100, 2 high; 2 issues left unfixed after 1 iteration
        (2 need judgement: set fix_tool to hand them to an agent, or fix them by hand)
    aborted after 3 action failures (max_errors 3); last: action-diagnose-context: ...

The failure reason is written into the document (``failure_reason``) when the run ends, so a
dashboard reading ``state.json`` sees it as ``fsm status`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import TuningState

__all__ = [
    "FixTally",
    "abort_reason",
    "fix_tally",
    "gate_failure_reason",
    "gate_line",
    "issue_counts",
    "success_reason",
    "verdict",
]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 'es' if word.endswith('x') else 's'}"


def issue_counts(doc: TuningState) -> str:
    """``1 critical, 2 high`` (the non-zero severities), or ``no issues``; then ``; 2 to
    review`` when rules measured under the precision threshold found something (those are
    not counted by the gate)."""
    return (_severities(doc) or "no issues") + _to_review(doc)


def _severities(doc: TuningState) -> str:
    counts = doc.issues_by_severity.model_dump()
    return ", ".join(f"{count} {severity}" for severity, count in counts.items() if count)


def _to_review(doc: TuningState) -> str:
    return f"; {len(doc.issues_to_review)} to review" if doc.issues_to_review else ""


def gate_line(doc: TuningState) -> str:
    """``quality gate review: 70/100, 2 high``."""
    return f"quality gate {doc.quality_gate}: {doc.quality_score:g}/100, {issue_counts(doc)}"


@dataclass(frozen=True)
class FixTally:
    """What became of the proposed fixes."""

    kept: int
    rolled_back: int
    not_applied: int
    pending: int
    judgement: int

    def __str__(self) -> str:
        return (
            f"{self.kept} kept (verified), {self.rolled_back} rolled back, "
            f"{self.not_applied} not applied, {self.pending} pending, "
            f"{self.judgement} need judgement"
        )


def fix_tally(doc: TuningState) -> FixTally:
    """The fixes of ``doc`` by fate: kept, rolled back, not applied, pending, left to judgement."""
    results = {record.fix_id: record for record in doc.applied_fixes}
    kept = sum(1 for r in results.values() if r.verification_result == "pass")
    rolled = sum(1 for r in results.values() if r.verification_result == "rolled_back")
    not_applied = sum(1 for r in results.values() if not r.success)
    waiting = [fix.id for fix in doc.proposed_fixes if fix.id not in results]
    pending = sum(1 for fix_id in waiting if fix_id in doc.pending_fixes)
    return FixTally(kept, rolled, not_applied, pending, len(waiting) - pending)


def success_reason(doc: TuningState) -> str:
    """The one line of a run that passed the gate."""
    tally = fix_tally(doc)
    left = ("no issue left" if not doc.issues else f"{_severities(doc)} left") + _to_review(doc)
    if not doc.applied_fixes:
        fixes = "no fix applied"
    else:
        fixes = f"{_plural(tally.kept, 'fix')} kept"
        if tally.rolled_back:
            fixes += f", {tally.rolled_back} rolled back"
    iterations = _plural(doc.iteration_count, "iteration")
    return f"quality gate pass: {doc.quality_score:g}/100, {left}; {fixes}; {iterations}"


def gate_failure_reason(doc: TuningState, *, limit_reached: bool, can_delegate: bool) -> str:
    """The one line of a run that ended without passing the gate."""
    unfixed = _plural(len(doc.issues), "issue")
    after = _plural(doc.iteration_count, "iteration")
    line = f"{gate_line(doc)}; {unfixed} left unfixed after {after}"
    tally = fix_tally(doc)
    causes = []
    if limit_reached:
        causes.append(f"iteration limit {doc.max_iterations} reached")
        if tally.pending:
            causes.append(f"{_plural(tally.pending, 'fix')} not tried")
    if tally.judgement:
        hint = "" if can_delegate else ": set fix_tool to give them to an agent, or fix by hand"
        causes.append(f"{tally.judgement} need judgement{hint}")
    if tally.rolled_back:
        causes.append(f"{_plural(tally.rolled_back, 'fix')} rolled back")
    if tally.not_applied:
        causes.append(f"{_plural(tally.not_applied, 'fix')} could not be applied")
    return f"{line} ({'; '.join(causes)})" if causes else line


def abort_reason(doc: TuningState) -> str:
    """The one line of a run aborted by its error limit."""
    line = f"aborted after {doc.error_count} action failures (max_errors {doc.max_errors})"
    if doc.errors:
        last = doc.errors[-1]
        line += f"; last: {last.action}: {last.message}"
    return line


def verdict(doc: TuningState) -> tuple[bool, str]:
    """Whether the finished run ``doc`` succeeded, and the one line saying so."""
    if doc.status == "completed" and doc.quality_gate == "pass":
        return True, success_reason(doc)
    if doc.failure_reason:
        return False, doc.failure_reason
    if doc.status == "completed":  # a document written before a failed gate was a failure
        return False, gate_failure_reason(doc, limit_reached=False, can_delegate=True)
    if doc.status == "user_exit":
        return False, f"stopped by the user; {gate_line(doc)}"
    return False, abort_reason(doc)
