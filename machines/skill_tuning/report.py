"""The tuning report (``tuning-report.md`` in the work dir), written when an instance ends.

It says how the run ended (the same line ``fsm run`` and ``fsm status`` print), the score and
gate with the thresholds that produced them, each area's diagnosis, the remaining issues (each
with its evidence: the lines quoted and why nothing excuses them) and the issues to review
(findings of rules measured under the precision threshold, outside the gate), every fix
(kept, rolled back and why, not applied, pending, or left for judgement), the errors, and how
to restore the original skill from its backup. Its issue and fix counts are the ``issues``
and ``fixes`` lines of ``fsm status`` (:mod:`.verdict` makes both).
"""

from __future__ import annotations

from .diagnosis import trust
from .diagnosis.rule import AREAS
from .model import AppliedFix, Fix, Issue, TuningState
from .verdict import fix_tally, issue_counts

__all__ = ["REPORT_NAME", "render_report"]

REPORT_NAME = "tuning-report.md"


def render_report(doc: TuningState, outcome: str, restore_hint: str) -> str:
    """The markdown report of ``doc``; ``outcome`` says how the run ended."""
    lines = [
        f"# Skill tuning report: {doc.target_skill.name or '(no target read)'}",
        "",
        f"- Outcome: {outcome}",
        f"- Target: `{doc.target_skill.path}` ({doc.target_skill.execution_mode or 'unknown'})",
        f"- Iterations: {doc.iteration_count} of {doc.max_iterations}",
        f"- Quality score: {doc.quality_score:g} / 100, gate **{doc.quality_gate}**",
        f"- Issues: {issue_counts(doc)}",
        f"- Fixes: {fix_tally(doc)}",
        f"- Errors: {doc.error_count} (limit {doc.max_errors})",
        "",
        "Gate: fail with any critical issue, more than 5 high ones or a score under 60; review",
        "with more than 2 high ones or a score under 80; else pass. Score: 100 - 25 per",
        "critical, 15 per high, 5 per medium, 1 per low issue.",
        "",
        "## Diagnoses",
        "",
        "| area | status | issues | severity | rules matched |",
        "| --- | --- | --- | --- | --- |",
    ]
    for area in AREAS:
        result = getattr(doc.diagnosis, area)
        if result is None:
            lines.append(f"| {area} | not run | | | |")
        else:
            matched = ", ".join(result.details.patterns_matched) or "none"
            lines.append(
                f"| {area} | {result.status} | {result.issues_found} | {result.severity} | "
                f"{matched} |"
            )
    lines += ["", "## Remaining issues", ""]
    lines += [line for issue in doc.issues for line in _issue_lines(issue)] or ["None."]
    if doc.issues_to_review:
        lines += [
            "",
            "## To review (not counted by the gate)",
            "",
            f"Findings of rules whose precision, measured on CCW skills they were not tuned on, "
            f"is under {trust.current().threshold:g}: read the evidence and judge each one; no "
            "fix is proposed for them.",
            "",
        ]
        lines += [line for issue in doc.issues_to_review for line in _issue_lines(issue)]
    lines += ["", "## Fixes", ""]
    applied = {record.fix_id: record for record in doc.applied_fixes}
    lines += [
        _fix_line(fix, applied.get(fix.id), fix.id in doc.pending_fixes)
        for fix in doc.proposed_fixes
    ]
    if not doc.proposed_fixes:
        lines.append("None.")
    if doc.errors:
        lines += ["", "## Errors (last ones kept)", ""]
        lines += [f"- {e.timestamp} {e.action}: {e.message}" for e in doc.errors]
    lines += ["", "## Restoring the original skill", "", restore_hint, ""]
    return "\n".join(lines)


def _issue_lines(issue: Issue) -> list[str]:
    """An issue and, under it, the evidence it rests on: each finding with the lines quoted and
    why nothing in the skill excuses it."""
    head = f"- **{issue.id}** [{issue.severity}] {issue.description}. "
    return [
        head + f"Fix: {issue.suggested_fix}",
        *(f"  - {item}" for item in issue.evidence),
    ]


def _fix_line(fix: Fix, record: AppliedFix | None, pending: bool) -> str:
    if record is None:
        fate = "pending" if pending else "needs judgement (an agent via fix_tool, or by hand)"
    elif record.verification_result == "pass":
        fate = "kept: applied and verified"
    elif record.verification_result == "rolled_back":
        fate = f"rolled back: {record.failure_reason}"
    elif not record.success:
        fate = record.failure_reason or "not applied"
    else:
        fate = f"verification {record.verification_result}"
    return f"- **{fix.id}** ({fix.strategy}, {', '.join(fix.issue_ids)}): {fate}. {fix.description}"
