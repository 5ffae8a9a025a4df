"""Hooks (after_save, on_error, summary) and the loop-bounding guards, called directly."""

from __future__ import annotations

import json
from typing import Any

from fsm_machines.issue_manager import functions
from fsm_machines.issue_manager.issues_file import IssuesFileError

ACTIONS = functions.registry.actions
HOOKS = functions.registry.hooks
GUARDS = functions.registry.guards


def _task(task_id: str, command: str, *deps: str) -> dict[str, Any]:
    return {"id": task_id, "title": f"do {task_id}", "command": command, "depends_on": list(deps)}


# -- hooks and guards -----------------------------------------------------------------------------


def test_after_save_appends_one_history_entry_per_save(make_ctx: Any, new_doc: Any) -> None:
    """Each save adds {timestamp, phase, completed_actions, issues_count} to the history."""
    ctx = make_ctx()
    doc = new_doc(ctx)
    HOOKS["record_history"](doc, ctx)
    HOOKS["record_history"](doc, ctx)
    history = json.loads((ctx.instance_dir / "state-history.json").read_text())
    assert [set(h) for h in history] == [
        {"timestamp", "phase", "completed_actions", "issues_count"}
    ] * 2
    assert history[0] | {"timestamp": None} == {
        "timestamp": None,
        "phase": "init",
        "completed_actions": 0,
        "issues_count": 0,
    }


def test_after_save_keeps_a_corrupt_history_aside(make_ctx: Any, new_doc: Any) -> None:
    """A history file that does not parse is moved aside, not silently dropped."""
    ctx = make_ctx()
    ctx.instance_dir.mkdir(parents=True)
    (ctx.instance_dir / "state-history.json").write_text("[{broken")
    HOOKS["record_history"](new_doc(ctx), ctx)
    assert (ctx.instance_dir / "state-history.json.corrupt").read_text() == "[{broken"
    assert len(json.loads((ctx.instance_dir / "state-history.json").read_text())) == 1


def test_on_error_records_the_error_and_counts_the_streak(
    make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """A failed step appends {action, message, timestamp}; at max_errors in a row the instance
    pauses; a successful step resets the streak."""
    ctx = make_ctx().for_transition("list", "executing", "listing")
    doc = new_doc(ctx)
    for _ in range(3):
        doc = apply(doc, HOOKS["record_error"](doc, ctx, IssuesFileError("issues.jsonl:2: bad")))
    assert [(e.action, e.message) for e in doc.errors] == [
        ("action-list", "issues.jsonl:2: bad")
    ] * 3
    assert (doc.context.consecutive_errors, doc.status) == (3, "paused")
    assert not GUARDS["below_error_limit"].func(doc, ctx)
    doc = apply(doc, ACTIONS["initialize"](doc, ctx))
    assert doc.context.consecutive_errors == 0


def test_summary_lines(sample: Any, make_ctx: Any, planned: Any, apply: Any) -> None:
    """fsm status shows issue totals, queue progress, round and error streak."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_task("T1", "true")])
    ctx = make_ctx()
    doc = planned(ctx)
    assert HOOKS["summarize"](doc) == {
        "issues": "1 (0 completed, 0 failed, 1 pending)",
        "queue": "0/1 items done",
        "round": "1 of at most 10",
        "errors": "0 recorded; 0 failed steps in a row (limit 3)",
    }


def test_round_budget_guard(make_ctx: Any, new_doc: Any, apply: Any) -> None:
    """Listing again is allowed only below context.max_rounds."""
    ctx = make_ctx()
    doc = new_doc(ctx, context={"max_rounds": 2})
    assert GUARDS["within_round_budget"].func(apply(doc, {"context.rounds": 1}), ctx)
    assert not GUARDS["within_round_budget"].func(apply(doc, {"context.rounds": 2}), ctx)


def test_error_streak_pauses_only_at_the_limit(make_ctx: Any, new_doc: Any, apply: Any) -> None:
    """Below max_errors a failed step leaves the status running."""
    ctx = make_ctx()
    doc = new_doc(ctx)
    for _ in range(2):
        doc = apply(doc, HOOKS["record_error"](doc, ctx, OSError("disk full")))
    assert (doc.status, doc.errors[-1].action) == ("running", "action-step")  # type: ignore[union-attr]


def test_resume_resets_the_error_streak(make_ctx: Any, new_doc: Any, apply: Any) -> None:
    """The resume command's action starts the failed-step count over."""
    ctx = make_ctx()
    doc = apply(new_doc(ctx), {"context.consecutive_errors": 3, "status": "paused"})
    assert ACTIONS["reset_error_streak"](doc, ctx)["context.consecutive_errors"] == 0


def test_touch_stamps_updated_at(make_ctx: Any, new_doc: Any) -> None:
    """Control commands stamp updated_at."""
    ctx = make_ctx()
    doc = new_doc(ctx)
    assert ACTIONS["touch"](doc, ctx)["updated_at"] > doc.updated_at
