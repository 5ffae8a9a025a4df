"""Applying fixes (with a backup first), verifying them, and rolling back the ones that fail.

A mechanical fix writes exactly the proposal's changes, after checking that every file still
has the content the proposal was computed from. A fix that needs judgement is handed to the
``fix_tool`` agent, working in the skill folder; what it changed is read back by comparing the
folder with the backup taken just before. Each applied fix is verified at once (see
:mod:`.verify`), and :func:`settle` keeps it or restores its backup, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fsm.executor import Executor

from ..backup import (
    ensure_inside,
    restore,
    snapshot_files,
    snapshot_tree,
    tree_bytes,
)
from ..model import AppliedFix, FileChange, Fix, Issue
from ..skill import decode, encode
from .edit import modification

__all__ = [
    "agent_prompt",
    "apply_by_agent",
    "apply_mechanical",
    "changes_between",
    "select_batch",
    "settle",
]


def select_batch(pending: list[str], fixes: Mapping[str, Fix]) -> list[Fix]:
    """The fixes to apply in one step: every pending mechanical fix whose files no earlier one
    in the batch touches (so each can be rolled back alone), or else the first agent fix."""
    candidates = [fixes[fix_id] for fix_id in pending if fix_id in fixes]
    batch: list[Fix] = []
    used: set[str] = set()
    for fix in candidates:
        files = {change.file for change in fix.changes}
        if files and not files & used:
            batch.append(fix)
            used |= files
    if batch:
        return batch
    return candidates[:1]


def _record(
    fix: Fix, applied_at: str, backup: str, *, success: bool, note: str = "", **extra: Any
) -> AppliedFix:
    return AppliedFix.model_validate(
        {
            "fix_id": fix.id,
            "applied_at": applied_at,
            "success": success,
            "backup_path": backup,
            "verification_result": "pending" if success else "fail",
            "rollback_available": success,
            "failure_reason": None if success else note,
            **extra,
        }
    )


def apply_mechanical(
    fix: Fix,
    skill_root: Path,
    backup: Path,
    applied_at: str,
    shown: str,
    *,
    manifest_mode: int | None = None,
) -> tuple[AppliedFix, str]:
    """Back up the fix's files, write its changes; the record and a note on what happened."""
    targets = {
        change.file: ensure_inside(skill_root / change.file, skill_root) for change in fix.changes
    }
    for change in fix.changes:
        target = targets[change.file]
        current = decode(target.read_bytes()) if target.is_file() else None
        expected = change.old_content if change.action != "create" else None
        if change.action != "create" and current != expected:
            note = f"not applied: {change.file} changed since the proposal"
            return _record(fix, applied_at, shown, success=False, note=note), note
    snapshot_files(skill_root, targets, backup, manifest_mode=manifest_mode)
    try:
        for change in fix.changes:
            _write(targets[change.file], change)
    except OSError as exc:
        restore(skill_root, backup)
        note = f"not applied: cannot write: {exc}"
        return _record(fix, applied_at, shown, success=False, note=note), note
    return _record(fix, applied_at, shown, success=True), f"changed {', '.join(sorted(targets))}"


def _write(target: Path, change: FileChange) -> None:
    if change.action == "delete":
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(encode(change.new_content or ""))


def agent_prompt(fix: Fix, issues: list[Issue], skill_root: Path) -> str:
    """What the fix agent is asked to do."""
    lines = [
        f"Fix an agent skill (markdown instructions with embedded code) in {skill_root}.",
        "Edit only files inside that folder; do not create or change files anywhere else.",
        "",
        f"Fix {fix.id}, strategy {fix.strategy}: {fix.description}",
        f"Rationale: {fix.rationale}",
        "",
        "Issues to remove:",
    ]
    for issue in issues:
        lines += [
            f"- {issue.id} [{issue.severity}] {issue.description}",
            f"  Root cause: {issue.root_cause}",
            f"  Suggested fix: {issue.suggested_fix}",
            *(f"  Evidence: {item}" for item in issue.evidence[:10]),
        ]
    lines += [
        "",
        "The fix is verified by re-running the static diagnosis: these issues must be gone.",
    ]
    return "\n".join(lines)


def apply_by_agent(
    fix: Fix,
    issues: list[Issue],
    skill_root: Path,
    backup: Path,
    *,
    stamp: tuple[str, str],
    executor: Executor,
    tool: str,
    timeout: float,
    manifest_mode: int | None = None,
) -> tuple[AppliedFix, str]:
    """Back up the whole skill, let agent ``tool`` make the fix, record what it changed.

    ``stamp`` is (applied_at, backup path as shown in the document). A failed agent run, or one
    that changes nothing, is a failed fix and the skill is restored at once.
    """
    applied_at, shown = stamp
    snapshot_tree(skill_root, backup, manifest_mode=manifest_mode)
    before = tree_bytes(skill_root)
    prompt = agent_prompt(fix, issues, skill_root)
    result = executor.agent(tool, prompt, mode="write", cwd=skill_root, timeout=timeout)
    changes = changes_between(before, tree_bytes(skill_root))
    if not result.ok or not changes:
        restore(skill_root, backup)
        reason = result.describe() if not result.ok else "it changed nothing"
        note = f"not applied: agent {tool} failed: {reason}"
        return _record(fix, applied_at, shown, success=False, note=note), note
    made = [change.model_dump(exclude_none=True) for change in changes]
    record = _record(fix, applied_at, shown, success=True, changes_made=made)
    return record, f"agent {tool} changed {', '.join(c.file for c in changes)}"


def changes_between(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[FileChange]:
    """What changed in a folder, as file changes (paths relative to the folder)."""
    changes = []
    for file in sorted(set(before) | set(after)):
        old, new = before.get(file), after.get(file)
        if old == new:
            continue
        if old is None:
            changes.append(FileChange(file=file, action="create", new_content=decode(new or b"")))
        elif new is None:
            changes.append(FileChange(file=file, action="delete", old_content=decode(old)))
        else:
            changes.append(modification(file, decode(old), decode(new)))
    return changes


def settle(
    record: AppliedFix,
    problems: list[str],
    issues: list[Issue],
    skill_root: Path,
    backup: Path,
    notes: list[str] | None = None,
) -> AppliedFix:
    """The verified record of an applied fix: ``pass`` when ``problems`` is empty, else the
    skill is restored from ``backup`` byte for byte and the record says ``rolled_back`` and
    why. ``notes`` (what was checked and how) go into ``verification_notes``."""
    checked = {"verification_notes": notes} if notes else {}
    if not problems:
        resolved = [issue.id for issue in issues]
        return _with(record, verification_result="pass", issues_resolved=resolved, **checked)
    restore(skill_root, backup)
    return _with(
        record,
        verification_result="rolled_back",
        rollback_available=False,
        failure_reason="; ".join(problems),
        **checked,
    )


def _with(record: AppliedFix, **changes: Any) -> AppliedFix:
    return AppliedFix.model_validate({**record.model_dump(), **changes})
