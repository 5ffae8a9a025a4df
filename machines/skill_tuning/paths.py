"""Where an instance's files are: the target skill, the work dir, the backups.

Paths in the document are written relative to the workspace when they lie inside it (as CCW
writes ``.workflow/.scratchpad/...`` and ``.claude/skills/...``), absolute otherwise; these
helpers turn them back into absolute paths.
"""

from __future__ import annotations

from pathlib import Path

from .backup import ensure_inside
from .model import TuningState
from .options import TuningContext
from .skill import resolve_target

__all__ = ["backup_root", "shown", "skill_root", "work_root"]


def shown(path: Path, ctx: TuningContext) -> str:
    """``path`` as written into the document: relative to the workspace when inside it."""
    resolved = path.resolve()
    workspace = ctx.workspace.resolve()
    if resolved.is_relative_to(workspace):
        return resolved.relative_to(workspace).as_posix()
    return resolved.as_posix()


def _absolute(raw: str, ctx: TuningContext) -> Path:
    path = Path(raw)
    return (path if path.is_absolute() else ctx.workspace / path).resolve()


def skill_root(doc: TuningState, ctx: TuningContext) -> Path:
    """The target skill folder (raises TargetSkillError when it is unusable)."""
    return resolve_target(ctx.workspace, doc.target_skill.path, ctx.options.allow_outside)


def work_root(doc: TuningState, ctx: TuningContext) -> Path:
    """The instance's work dir: the document's ``work_dir``, else the instance folder; a
    ``work_dir`` edited to lead out of the workspace (and of every ``allow_outside`` folder) is
    refused, since backups and reports are written there."""
    if not doc.work_dir:
        return ctx.instance_dir.resolve()
    allowed = (Path(folder) for folder in ctx.options.allow_outside)
    return ensure_inside(_absolute(doc.work_dir, ctx), ctx.workspace, *allowed)


def backup_root(doc: TuningState, ctx: TuningContext) -> Path:
    """The backup dir: the document's ``backup_dir``, else ``backups/`` in the work dir."""
    return _absolute(doc.backup_dir, ctx) if doc.backup_dir else work_root(doc, ctx) / "backups"
