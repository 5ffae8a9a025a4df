"""The tuning report (``tuning-report.md`` in the work dir), written when an instance ends.

It says how the run ended, the score and gate with the thresholds that produced them, each
area's diagnosis, the remaining issues, every fix (applied, verified, rolled back, or left for
judgement), the errors, and how to restore the original skill from its backup.
"""

from __future__ import annotations

from machines.skill_tuning.diagnosis.rule import AREAS
from machines.skill_tuning.model import TuningState
from machines.skill_tuning.quality import quality_gate, quality_score

__all__ = ["REPORT_NAME", "render_report"]

REPORT_NAME = "tuning-report.md"


def render_report(doc: TuningState, outcome: str, restore_hint: str) -> str:
    """The markdown report of ``doc``; ``outcome`` says how the run ended."""
    counts = doc.issues_by_severity
    lines = [
        f"# Skill tuning report: {doc.target_skill.name or '(no target read)'}",
        "",
        f"- Outcome: {outcome}",
        f"- Target: `{doc.target_skill.path}` ({doc.target_skill.execution_mode or 'unknown'})",
        f"- Iterations: {doc.iteration_count} of {doc.max_iterations}",
        f"- Quality score: {quality_score(counts)} / 100, gate **{quality_gate(counts)}**",
        f"- Issues: {counts.critical} critical, {counts.high} high, {counts.medium} medium, "
        f"{counts.low} low",
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
    lines += [
        f"- **{i.id}** [{i.severity}] {i.description}. Fix: {i.suggested_fix}" for i in doc.issues
    ] or ["None."]
    lines += ["", "## Fixes", ""]
    applied = {record.fix_id: record for record in doc.applied_fixes}
    for fix in doc.proposed_fixes:
        record = applied.get(fix.id)
        if record is None:
            state = "pending" if fix.id in doc.pending_fixes else "proposed (needs judgement)"
        elif not record.success:
            state = "could not be applied"
        else:
            state = f"applied, verification {record.verification_result}"
        lines.append(
            f"- **{fix.id}** ({fix.strategy}, {', '.join(fix.issue_ids)}): {state}. "
            f"{fix.description}"
        )
    if not doc.proposed_fixes:
        lines.append("None.")
    if doc.errors:
        lines += ["", "## Errors (last ones kept)", ""]
        lines += [f"- {e.timestamp} {e.action}: {e.message}" for e in doc.errors]
    lines += ["", "## Restoring the original skill", "", restore_hint, ""]
    return "\n".join(lines)
