"""The actions of the skill-tuning machine: ``(doc, ctx) -> update``.

Each action reads the target skill afresh from disk (the diagnoses are pure functions of the
files), writes its side files under the work dir, and returns one update that also records
itself (``bookkeeping.finished``). Writes go only to the target skill folder (fixes, rollbacks)
and the work dir (backups, diagnosis files, reports); ``backup.ensure_inside`` checks each path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fsm.context import Context
from machines.skill_tuning.backup import ensure_inside, snapshot_tree
from machines.skill_tuning.bookkeeping import finished
from machines.skill_tuning.diagnosis.rule import AREAS, ISSUE_TYPES, Area
from machines.skill_tuning.diagnosis.run import diagnose, number_issues, skipped_result
from machines.skill_tuning.fixes.apply import (
    apply_by_agent,
    apply_mechanical,
    select_batch,
    verify_applied,
)
from machines.skill_tuning.fixes.proposal import propose
from machines.skill_tuning.model import DiagnosisResult, Issue, TuningState, count_by_severity
from machines.skill_tuning.options import TuningOptions
from machines.skill_tuning.paths import backup_root, shown, skill_root, work_root
from machines.skill_tuning.quality import issue_update, quality_gate, quality_score
from machines.skill_tuning.report import REPORT_NAME, render_report
from machines.skill_tuning.skill import Skill, TargetSkillError, read_skill, readable

__all__ = [
    "abort",
    "active_areas",
    "apply_fix",
    "complete",
    "diagnose_area",
    "init",
    "iterate",
    "stop",
    "touch",
    "verify",
]


def active_areas(doc: TuningState) -> list[Area]:
    """The areas to diagnose: those named in ``focus_areas``, or all four when it names none
    of them (empty, ``all``, or only areas this machine does not have)."""
    return [area for area in AREAS if area in doc.focus_areas] or list(AREAS)


def _options(ctx: Context) -> TuningOptions:
    options = ctx.options
    return options if isinstance(options, TuningOptions) else TuningOptions()


def _write_side_file(doc: TuningState, ctx: Context, name: str, text: str) -> str:
    """Write ``name`` under the work dir; return its path as the document shows it.

    Text quoted from a skill file that is not valid UTF-8 carries the undecodable bytes as lone
    surrogates (see :mod:`.skill`); they are written as ``\\udcXX`` escapes, which keeps a JSON
    side file valid and a report readable instead of failing the step."""
    target = ensure_inside(work_root(doc, ctx) / name, work_root(doc, ctx))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8", errors="backslashreplace")
    return shown(target, ctx)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def init(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Read the target skill folder and back it up whole under ``backup_dir``."""
    started = ctx.clock.iso()
    root = skill_root(doc, ctx)
    work, backups = work_root(doc, ctx), backup_root(doc, ctx)
    if work.is_relative_to(root):
        raise TargetSkillError(f"the work dir {work} lies inside the target skill {root}")
    ensure_inside(backups, work)
    skill = read_skill(root)
    original = backups / f"{skill.name}-backup"
    snapshot_tree(root, original)
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
    area: Area, skill: Skill, doc: TuningState, ctx: Context
) -> tuple[DiagnosisResult, list[Issue]]:
    began = ctx.clock.monotonic()
    result, drafts = diagnose(area, skill)
    elapsed = round((ctx.clock.monotonic() - began) * 1000, 3)
    result = DiagnosisResult.model_validate(
        readable({**result.model_dump(), "execution_time_ms": elapsed})
    )
    used = [i.id for i in doc.issues] + [i for f in doc.proposed_fixes for i in f.issue_ids]
    issues = number_issues(drafts, doc.issues, used)
    return result, [
        Issue.model_validate(readable(i.model_dump(mode="json", by_alias=True, exclude_unset=True)))
        for i in issues
    ]


def diagnose_area(area: Area, doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Run the rules of ``area`` on the skill; replace that area's issues with what they find."""
    started = ctx.clock.iso()
    issue_type = ISSUE_TYPES[area]
    others = [issue for issue in doc.issues if issue.type != issue_type]
    if area not in active_areas(doc):
        update = {f"diagnosis.{area}": skipped_result(area).model_dump(), **issue_update(others)}
        return finished(doc, ctx, f"diagnose_{area}", started, update, result="skipped")
    skill = read_skill(skill_root(doc, ctx))
    result, found = _diagnosed(area, skill, doc, ctx)
    record = {"diagnosis": result.model_dump(mode="json"), "issues": issue_update(found)["issues"]}
    written = _write_side_file(doc, ctx, f"diagnosis/{area}-diagnosis.json", _json(record))
    update = {f"diagnosis.{area}": result.model_dump(mode="json"), **issue_update(others + found)}
    return finished(doc, ctx, f"diagnose_{area}", started, update, output_files=[written])


def verify(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Settle pending fix verifications (rolling failures back), score the skill against the
    gate, count the iteration, and propose fixes for the issues that remain."""
    started = ctx.clock.iso()
    root = skill_root(doc, ctx)
    fixes = {fix.id: fix for fix in doc.proposed_fixes}
    records, rolled_back = verify_applied(
        doc.applied_fixes,
        fixes,
        {issue.id for issue in doc.issues},
        root,
        lambda raw: Path(raw) if Path(raw).is_absolute() else ctx.workspace / raw,
    )
    update: dict[str, Any] = {}
    issues = list(doc.issues)
    skill = read_skill(root)
    if rolled_back:  # the files changed back: diagnose them again so issues match the files
        issues = []
        for area in active_areas(doc):
            result, found = _diagnosed(area, skill, doc, ctx)
            update[f"diagnosis.{area}"] = result.model_dump(mode="json")
            issues += found
    counts = count_by_severity(issues)
    options = _options(ctx)
    proposals = propose(
        issues,
        skill,
        doc.proposed_fixes,
        {record.fix_id for record in records},
        can_delegate=options.fix_tool is not None,
        window=options.history_window,
    )
    fixes_dump = [fix.model_dump(mode="json", exclude_none=True) for fix in proposals.fixes]
    written = _write_side_file(doc, ctx, "fixes/fix-proposals.json", _json(fixes_dump))
    update |= {
        **issue_update(issues),
        "applied_fixes": [r.model_dump(mode="json", exclude_none=True) for r in records],
        "quality_score": quality_score(counts),
        "quality_gate": quality_gate(counts),
        "iteration_count": doc.iteration_count + 1,
        "proposed_fixes": fixes_dump,
        "pending_fixes": proposals.pending,
    }
    return finished(doc, ctx, "verify", started, update, output_files=[written])


def apply_fix(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Apply the next batch of pending fixes, each after backing up what it may change."""
    started = ctx.clock.iso()
    root, work = skill_root(doc, ctx), work_root(doc, ctx)
    fixes = {fix.id: fix for fix in doc.proposed_fixes}
    batch = select_batch(doc.pending_fixes, fixes)
    options = _options(ctx)
    records = list(doc.applied_fixes)
    notes: dict[str, str] = {}
    for fix in batch:
        backup = ensure_inside(backup_root(doc, ctx) / f"before-{fix.id}", work)
        stamp = (ctx.clock.iso(), shown(backup, ctx))
        if fix.changes:
            record, note = apply_mechanical(fix, root, backup, *stamp)
        elif options.fix_tool is not None:
            addressed = [issue for issue in doc.issues if issue.id in fix.issue_ids]
            record, note = apply_by_agent(
                fix,
                addressed,
                root,
                backup,
                stamp=stamp,
                executor=ctx.executor,
                tool=options.fix_tool,
                timeout=options.fix_timeout,
            )
        else:
            continue
        ctx.log.info("fix_applied", fix=fix.id, success=record.success, note=note)
        records.append(record)
        notes[fix.id] = note
    done = {fix.id for fix in batch}
    dumped = [r.model_dump(mode="json", exclude_none=True) for r in records]
    summary = _json({"applied": dumped, "notes": notes})
    written = _write_side_file(doc, ctx, "fixes/applied-fixes.json", summary)
    update = {
        "applied_fixes": dumped,
        "pending_fixes": [fix_id for fix_id in doc.pending_fixes if fix_id not in done],
    }
    return finished(doc, ctx, "apply_fix", started, update, output_files=[written])


def iterate(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Start a new round: clear the four diagnoses so each runs again on the changed skill."""
    started = ctx.clock.iso()
    update = {f"diagnosis.{area}": None for area in AREAS}
    return finished(doc, ctx, "iterate", started, update)


def _restore_hint(doc: TuningState, ctx: Context) -> str:
    if not doc.target_skill.name or not doc.backup_dir:
        return "No backup was taken (the target skill was never read)."
    backup = f"{doc.backup_dir}/{doc.target_skill.name}-backup"
    return (
        f"The skill as it was before tuning is in `{backup}/`. To restore it: "
        f"`rsync -a --delete {backup}/ {doc.target_skill.path}/` "
        f"(or `machines.skill_tuning.backup.restore_original`)."
    )


def _end(doc: TuningState, ctx: Context, name: str, outcome: str, status: str) -> dict[str, Any]:
    started = ctx.clock.iso()
    report = render_report(doc, outcome, _restore_hint(doc, ctx))
    written = _write_side_file(doc, ctx, REPORT_NAME, report)
    files = [written]
    if status == "failed":
        errors = [e.model_dump(mode="json") for e in doc.errors]
        files.append(_write_side_file(doc, ctx, "errors.json", _json(errors)))
    update = {"status": status, "completed_at": started, "final_report": written}
    return finished(doc, ctx, name, started, update, output_files=files)


_OUTCOMES = {
    "complete": "completed: the quality gate passed",
    "finish": "completed: the iteration limit was reached",
    "settle": "completed: no fix is left to apply",
}


def complete(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Write the final report and end the run ``completed``."""
    event = ctx.transition.event if ctx.transition is not None else "complete"
    outcome = f"{_OUTCOMES.get(event, 'completed')} (gate {doc.quality_gate})"
    return _end(doc, ctx, "complete", outcome, "completed")


def abort(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Write the final report and ``errors.json`` and end the run ``failed``."""
    outcome = f"failed: {doc.error_count} errors reached the limit of {doc.max_errors}"
    return _end(doc, ctx, "abort", outcome, "failed")


def stop(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Write the final report when a person stops the run (status ``user_exit``)."""
    return _end(doc, ctx, "stop", "stopped by the user", "user_exit")


def touch(doc: TuningState, ctx: Context) -> dict[str, Any]:
    """Stamp ``updated_at`` when a control command changes the status."""
    return {"updated_at": ctx.clock.iso()}
