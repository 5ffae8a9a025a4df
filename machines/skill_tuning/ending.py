"""How a run ends: the final report, the document's own verdict, and nothing else changed.

Every end writes ``tuning-report.md`` and sets ``status``, ``completed_at`` and ``final_report``;
every end but a passed gate also sets ``failure_reason`` to the same line the report's Outcome
and ``fsm run`` show (:mod:`.verdict`). A gate that did not pass is recorded in ``errors`` too
(action ``action-complete``, not recoverable), so a reader of the original skill's fields alone sees
why the run failed; an abort already has its errors there and also writes ``errors.json``.
"""

from __future__ import annotations

import shlex
from typing import Any

from .bookkeeping import KEPT_ERRORS, finished
from .model import ErrorEntry, TuningState
from .options import TuningContext
from .report import REPORT_NAME, render_report
from .verdict import (
    abort_reason,
    gate_failure_reason,
    gate_line,
    success_reason,
)
from .workfiles import to_json, write_side_file

__all__ = ["abort", "complete", "give_up", "restore_hint", "stop"]


def restore_hint(doc: TuningState) -> str:
    """How to put the original skill back, with commands every machine has (``mv``, ``cp -a``):
    the tuned skill is moved aside, not deleted."""
    if not doc.target_skill.name or not doc.backup_dir or not doc.target_skill.path:
        return "No backup was taken (the target skill was never read)."
    backup = f"{doc.backup_dir}/{doc.target_skill.name}-backup"
    skill = doc.target_skill.path.rstrip("/")
    command = (
        f"mv {shlex.quote(skill)} {shlex.quote(skill + '.tuned')} && "
        f"cp -a {shlex.quote(backup)} {shlex.quote(skill)}"
    )
    return (
        f"The skill as it was before tuning is in `{backup}/`. To restore it, from the "
        f"workspace folder: `{command}` (the tuned skill is kept beside it as `{skill}.tuned`)."
    )


def _end(
    doc: TuningState,
    ctx: TuningContext,
    name: str,
    status: str,
    reason: str,
    *,
    success: bool = False,
) -> dict[str, Any]:
    started = ctx.clock.iso()
    report = render_report(doc, reason, restore_hint(doc))
    written = write_side_file(doc, ctx, REPORT_NAME, report)
    files = [written]
    update: dict[str, Any] = {
        "status": status,
        "completed_at": started,
        "final_report": written,
        "failure_reason": None if success else reason,
    }
    if name == "give_up":  # the gate failed: the original skill's own error list says so too
        entry = ErrorEntry(
            action="action-complete", message=reason, timestamp=started, recoverable=False
        )
        update["errors"] = [e.model_dump(mode="json") for e in [*doc.errors, entry]][-KEPT_ERRORS:]
    if status == "failed":
        errors = update.get("errors", [e.model_dump(mode="json") for e in doc.errors])
        files.append(write_side_file(doc, ctx, "errors.json", to_json(errors)))
    return finished(doc, ctx, name, started, update, output_files=files)


def complete(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Write the final report and end the run ``completed``: the quality gate passed."""
    return _end(doc, ctx, "complete", "completed", success_reason(doc), success=True)


def give_up(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Write the final report and end the run ``failed``: the quality gate did not pass and
    either the iterations are used up or no fix is left to apply."""
    reason = gate_failure_reason(
        doc,
        limit_reached=doc.iteration_count >= doc.max_iterations,
        can_delegate=ctx.options.fix_tool is not None,
    )
    return _end(doc, ctx, "give_up", "failed", reason)


def abort(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Write the final report and ``errors.json`` and end the run ``failed``."""
    return _end(doc, ctx, "abort", "failed", abort_reason(doc))


def stop(doc: TuningState, ctx: TuningContext) -> dict[str, Any]:
    """Write the final report when a person stops the run (status ``user_exit``)."""
    if doc.iteration_count == 0:
        reason = "stopped by the user before the skill was scored"
    else:
        reason = f"stopped by the user after {doc.iteration_count} iteration(s); {gate_line(doc)}"
    return _end(doc, ctx, "stop", "user_exit", reason)
