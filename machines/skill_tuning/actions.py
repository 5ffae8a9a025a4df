"""The actions of the skill-tuning machine: ``(doc, ctx) -> update``.

Each action reads the target skill afresh from disk (the diagnoses are pure functions of the
files), writes its side files under the work dir, and returns one update that also records
itself (``bookkeeping.finished``). Writes go only to the target skill folder (fixes, rollbacks)
and the work dir (backups, diagnosis files, reports); ``backup.ensure_inside`` checks each path.
"""

from __future__ import annotations

from typing import Any

from .backup import ensure_inside, snapshot_tree
from .bookkeeping import finished
from .diagnosis import trust
from .diagnosis.rule import AREAS, ISSUE_TYPES, Area
from .diagnosis.run import diagnose, number_issues, skipped_result
from .fixes.apply import apply_by_agent, apply_mechanical, select_batch, settle
from .fixes.proposal import propose
from .fixes.verify import verification
from .model import (
    AppliedFix,
    DiagnosisResult,
    Fix,
    Issue,
    TuningState,
    count_by_severity,
)
from .options import TuningContext
from .paths import backup_root, shown, skill_root, work_root
from .quality import issue_update, quality_gate, quality_score
from .skill import Skill, TargetSkillError, read_skill, readable
from .workfiles import to_json, write_side_file

__all__ = [
    "active_areas",
    "apply_fix",
    "diagnose_area",
    "init",
    "iterate",
    "touch",
    "verify",
]


def active_areas(doc: TuningState) -> list[Area]:
    """The areas to diagnose: those named in ``focus_areas``, or all four when it names none
    of them (empty, ``all``, or only areas this machine does not have)."""
    return [area for area in AREAS if area in doc.focus_areas] or list(AREAS)


def init(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Read the target skill folder and back it up whole under ``backup_dir``."""
    started = ctx.clock.iso()
    root = skill_root(doc, ctx)
    work, backups = work_root(doc, ctx), backup_root(doc, ctx)
    if work.is_relative_to(root):
        raise TargetSkillError(f"the work dir {work} lies inside the target skill {root}")
    ensure_inside(backups, work)
    skill = read_skill(root)
    original = backups / f"{skill.name}-backup"
    snapshot_tree(root, original, manifest_mode=ctx.side_file_mode())
    update = {
        "status": "running",
        "started_at": doc.started_at or started,
        "target_skill": {
            "name": skill.name,
            "path": doc.target_skill.path,
            "execution_mode": skill.execution_mode,
            "phases": skill.phases,
            "specs": skill.specs,
        },
        "work_dir": shown(work, ctx),
        "backup_dir": shown(backups, ctx),
    }
    return finished(doc, ctx, "init", started, update, output_files=[shown(original, ctx)])


def _diagnosed(
    area: Area, skill: Skill, doc: TuningState, ctx: TuningContext
) -> tuple[DiagnosisResult, list[Issue], list[Issue], list[dict[str, Any]]]:
    """The area's result, its issues, its issues to review (:mod:`.diagnosis.trust`), and its
    findings as the claims the side file keeps."""
    table = trust.current()
    began = ctx.clock.monotonic()
    result, drafts = diagnose(area, skill, review=table.to_review)
    elapsed = round((ctx.clock.monotonic() - began) * 1000, 3)
    result = DiagnosisResult.model_validate(
        readable({**result.model_dump(), "execution_time_ms": elapsed})
    )
    known = doc.issues + doc.issues_to_review
    used = [i.id for i in known] + [i for f in doc.proposed_fixes for i in f.issue_ids]
    issues = number_issues(drafts, known, used)
    findings = [
        {
            "issue": issue.id,
            "rule": draft.rule.name,
            "file": finding.file,
            "line": finding.line,
            "end": finding.end,
            "severity": finding.severity,
            "quote": finding.context,
            "not_excused_because": finding.reason,
            "to_review": draft.to_review,
        }
        for draft, issue in zip(drafts, issues, strict=True)
        for finding in draft.findings
    ]
    counted: list[Issue] = []
    review: list[Issue] = []
    for draft, numbered in zip(drafts, issues, strict=True):
        issue = numbered
        if draft.to_review:
            note = f" (to review, not counted by the gate: {table.note(issue.rule)})"
            issue = issue.model_copy(update={"description": issue.description + note})
        dumped = readable(issue.model_dump(mode="json", by_alias=True, exclude_unset=True))
        (review if draft.to_review else counted).append(Issue.model_validate(dumped))
    return result, counted, review, readable(findings)


def diagnose_area(area: Area, doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Run the rules of ``area`` on the skill; replace that area's issues (and issues to review)
    with what they find."""
    started = ctx.clock.iso()
    issue_type = ISSUE_TYPES[area]
    others = [issue for issue in doc.issues if issue.type != issue_type]
    others_review = [issue for issue in doc.issues_to_review if issue.type != issue_type]
    if area not in active_areas(doc):
        update = {
            f"diagnosis.{area}": skipped_result(area).model_dump(),
            **issue_update(others, others_review),
        }
        return finished(doc, ctx, f"diagnose_{area}", started, update, result="skipped")
    skill = read_skill(skill_root(doc, ctx))
    result, found, review, claims = _diagnosed(area, skill, doc, ctx)
    record = {
        "diagnosis": result.model_dump(mode="json"),
        "issues": issue_update(found)["issues"],
        "issues_to_review": issue_update(review)["issues"],
        "findings": claims,
    }
    written = write_side_file(doc, ctx, f"diagnosis/{area}-diagnosis.json", to_json(record))
    update = {
        f"diagnosis.{area}": result.model_dump(mode="json"),
        **issue_update(others + found, others_review + review),
    }
    return finished(doc, ctx, f"diagnose_{area}", started, update, output_files=[written])


def verify(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Score the skill against the quality gate, count the iteration, and propose fixes for the
    issues that remain (the fixes of the last batch were verified when they were applied)."""
    started = ctx.clock.iso()
    skill = read_skill(skill_root(doc, ctx))
    counts = count_by_severity(doc.issues)
    options = ctx.options
    proposals = propose(
        doc.issues,
        skill,
        doc.proposed_fixes,
        {record.fix_id for record in doc.applied_fixes},
        can_delegate=options.fix_tool is not None,
        window=options.history_window,
    )
    fixes_dump = [fix.model_dump(mode="json", exclude_none=True) for fix in proposals.fixes]
    written = write_side_file(doc, ctx, "fixes/fix-proposals.json", to_json(fixes_dump))
    update = {
        "quality_score": quality_score(counts),
        "quality_gate": quality_gate(counts),
        "iteration_count": doc.iteration_count + 1,
        "proposed_fixes": fixes_dump,
        "pending_fixes": proposals.pending,
    }
    return finished(doc, ctx, "verify", started, update, output_files=[written])


def _apply_one(fix: Fix, doc: TuningState, ctx: TuningContext) -> tuple[AppliedFix, str] | None:
    """Back up, apply and verify one fix; None when it needs an agent and none is set."""
    root, work = skill_root(doc, ctx), work_root(doc, ctx)
    options = ctx.options
    backup = ensure_inside(backup_root(doc, ctx) / f"before-{fix.id}", work)
    stamp = (ctx.clock.iso(), shown(backup, ctx))
    addressed = [issue for issue in doc.issues if issue.id in fix.issue_ids]
    before = read_skill(root)
    mode = ctx.side_file_mode()
    if fix.changes:
        record, note = apply_mechanical(fix, root, backup, *stamp, manifest_mode=mode)
    elif options.fix_tool is not None:
        record, note = apply_by_agent(
            fix,
            addressed,
            root,
            backup,
            stamp=stamp,
            executor=ctx.executor,
            tool=options.fix_tool,
            timeout=options.fix_timeout,
            manifest_mode=mode,
        )
    else:
        return None
    if record.success:
        problems, checked = verification(before, read_skill(root), addressed)
        record = settle(record, problems, addressed, root, backup, checked)
        note = "verified" if not problems else f"rolled back: {record.failure_reason}"
    return record, note


def apply_fix(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Apply the next batch of pending fixes, each after a backup, each verified at once by a
    full re-diagnosis and the consistency checks; a fix that fails is rolled back."""
    started = ctx.clock.iso()
    fixes = {fix.id: fix for fix in doc.proposed_fixes}
    batch = select_batch(doc.pending_fixes, fixes)
    records = list(doc.applied_fixes)
    notes: dict[str, str] = {}
    for fix in batch:
        applied = _apply_one(fix, doc, ctx)
        if applied is None:
            continue
        record, notes[fix.id] = applied
        ctx.log.info(
            "fix_applied", fix=fix.id, result=record.verification_result, note=notes[fix.id]
        )
        records.append(record)
    done = {fix.id for fix in batch}
    dumped = [r.model_dump(mode="json", exclude_none=True) for r in records]
    summary = to_json({"applied": dumped, "notes": notes})
    written = write_side_file(doc, ctx, "fixes/applied-fixes.json", summary)
    update = {
        "applied_fixes": dumped,
        "pending_fixes": [fix_id for fix_id in doc.pending_fixes if fix_id not in done],
    }
    return finished(doc, ctx, "apply_fix", started, update, output_files=[written])


def iterate(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Start a new round: clear the four diagnoses so each runs again on the changed skill."""
    started = ctx.clock.iso()
    update = {f"diagnosis.{area}": None for area in AREAS}
    return finished(doc, ctx, "iterate", started, update)


def touch(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Stamp ``updated_at`` when a control command changes the status."""
    return {"updated_at": ctx.clock.iso()}
