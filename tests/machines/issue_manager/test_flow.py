"""The flow of the seed, step by step: list -> plan -> execute -> list ... -> complete.

These drive the machine's transitions with the conftest's stand-in for the engine's step (first
enabled transition in the order written, actions applied, document saved, after_save called).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from machines.issue_manager.functions import registry
from machines.issue_manager.issues_file import IssuesFileError


def _counting(task_id: str, *deps: str) -> dict[str, Any]:
    """A task that appends its id to ran.txt, so a test can count how often it ran."""
    return {
        "id": task_id,
        "title": task_id,
        "command": f"echo {task_id} >> ran.txt",
        "depends_on": list(deps),
    }


def _failing_step(engine: Any, doc: Any, ctx: Any) -> Any:
    """A list step that raises, and the on_error update the engine writes instead."""
    with pytest.raises(IssuesFileError) as caught:
        engine.fire(doc, ctx)
    step_ctx = ctx.for_transition("list", doc.phase, "listing")
    return engine.apply(doc, registry.hooks["record_error"](doc, step_ctx, caught.value))


def _ran(sample: Any) -> list[str]:
    path = sample.root / "ran.txt"
    return path.read_text().split() if path.exists() else []


def test_all_issues_succeed(sample: Any, make_ctx: Any, new_doc: Any, engine: Any) -> None:
    """Two issues are listed, planned, executed in order, and the run completes at 100%."""
    for issue in ("ISS-1", "ISS-2"):
        sample.add_issue(issue)
        sample.add_solution(issue, [_counting(f"{issue}.a"), _counting(f"{issue}.b", f"{issue}.a")])
    ctx = make_ctx()
    events, doc = engine.run(new_doc(ctx), ctx)
    assert events == ["init", "plan", "plan", "execute", "execute", "list", "complete"]
    assert (doc.status, doc.phase, doc.context.success_rate) == ("completed", "complete", "100.0")
    assert _ran(sample) == ["ISS-1.a", "ISS-1.b", "ISS-2.a", "ISS-2.b"]
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "completed"}
    history = json.loads((ctx.instance_dir / "state-history.json").read_text())
    assert [h["phase"] for h in history] == [
        "listing",
        "planning",
        "planning",
        "executing",
        "executing",
        "listing",
        "complete",
    ]
    assert history[-1]["completed_actions"] == len(doc.completed_actions) == 8
    assert sorted(p.name for p in (ctx.instance_dir / "snapshots").iterdir()) == [
        "snapshot-before-execute-1.json",
        "snapshot-before-execute-2.json",
    ]


def test_one_failing_task_fails_only_its_issue(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """An issue whose task fails is failed; the others still run; counters and rate agree."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-2", [{"id": "T1", "title": "t", "command": "exit 7"}])
    sample.add_issue("ISS-3")
    sample.add_solution("ISS-3", [_counting("three")])
    ctx = make_ctx()
    _, doc = engine.run(new_doc(ctx), ctx)
    assert [(q.item_id, q.status) for q in doc.queue] == [
        ("S-1", "completed"),
        ("S-2", "failed"),
        ("S-3", "completed"),
    ]
    assert (doc.context.completed_count, doc.context.failed_count) == (2, 1)
    assert doc.context.success_rate == "66.7"
    assert _ran(sample) == ["one", "three"]
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "failed", "ISS-3": "completed"}


def test_new_issues_appended_between_rounds_are_picked_up(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """After the queue drains the machine lists again and plans issues added meanwhile."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("first")])
    ctx = make_ctx()
    doc = new_doc(ctx)
    for expected in ("init", "plan", "execute"):
        event, doc = engine.fire(doc, ctx)
        assert event == expected
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-2", [_counting("second")])
    events, doc = engine.run(doc, ctx)
    assert events == ["list", "plan", "execute", "list", "complete"]
    assert doc.context.rounds == 3
    assert [q.issue_id for q in doc.queue] == ["ISS-1", "ISS-2"]
    assert _ran(sample) == ["first", "second"]


def test_resume_after_a_stop_mid_queue_does_not_rerun_completed_items(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """Stopped after the first item, resumed: the remaining items run, the first not again."""
    for issue in ("ISS-1", "ISS-2", "ISS-3"):
        sample.add_issue(issue)
        sample.add_solution(issue, [_counting(issue)])
    ctx = make_ctx()
    doc = new_doc(ctx)
    while doc.phase != "executing":
        _, doc = engine.fire(doc, ctx)
    doc = engine.apply(doc, {"status": "stopped"})  # what `fsm stop` writes
    events, doc = engine.run(doc, ctx)
    assert events == []
    assert [q.status for q in doc.queue] == ["completed", "pending", "pending"]
    doc = engine.apply(doc, {"status": "running"})  # what `fsm resume` writes
    events, doc = engine.run(doc, ctx)
    assert events == ["execute", "execute", "list", "complete"]
    assert _ran(sample) == ["ISS-1", "ISS-2", "ISS-3"]


def test_a_crash_after_the_tasks_ran_does_not_run_them_again(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """If the step's result was never saved, the item runs again but skips completed tasks."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("a"), _counting("b", "a")])
    ctx = make_ctx()
    doc = new_doc(ctx)
    while registry.guards["has_planning_issue"].func(doc, ctx) or doc.phase == "init":
        _, doc = engine.fire(doc, ctx)
    registry.actions["execute_next_item"](doc, ctx)  # ran, then "crashed" before saving
    assert doc.queue[0].status == "pending"
    events, doc = engine.run(doc, ctx)
    assert events == ["execute", "list", "complete"]
    assert _ran(sample) == ["a", "b"]
    assert doc.issues["ISS-1"].status == "completed"


def test_malformed_issues_line_between_rounds_is_reported_and_recoverable(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """A bad line fails the list step (error recorded, nothing lost); fixed, the run goes on."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    ctx = make_ctx()
    doc = new_doc(ctx)
    for _ in range(3):
        _, doc = engine.fire(doc, ctx)
    sample.append_line('{"id": "ISS-2", oops}')
    before = sample.issues_path.read_bytes()
    doc = _failing_step(engine, doc, ctx)
    assert sample.issues_path.read_bytes() == before
    assert doc.phase == "executing"
    assert doc.issues["ISS-1"].status == "completed"
    assert "issues.jsonl:2: not valid JSON" in doc.errors[-1].message  # type: ignore[union-attr]
    lines = sample.issues_path.read_text().splitlines()
    sample.issues_path.write_text(lines[0] + '\n{"id": "ISS-2", "status": "registered"}\n')
    sample.add_solution("ISS-2", [_counting("two")])
    events, doc = engine.run(doc, ctx)
    assert events == ["list", "plan", "execute", "list", "complete"]
    assert doc.context.consecutive_errors == 0
    assert _ran(sample) == ["one", "two"]


def test_error_limit_pauses_the_run_until_a_person_resumes(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """max_errors failed steps in a row pause the instance; resumed after a fix, it goes on."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    ctx = make_ctx()
    doc = new_doc(ctx, context={"max_errors": 2})
    for _ in range(3):
        _, doc = engine.fire(doc, ctx)
    good = sample.issues_path.read_text()
    sample.append_line("not json")
    doc = _failing_step(engine, doc, ctx)
    assert doc.status == "running"
    doc = _failing_step(engine, doc, ctx)
    assert (doc.status, doc.context.consecutive_errors, len(doc.errors)) == ("paused", 2, 2)
    assert engine.run(doc, ctx)[0] == []
    sample.issues_path.write_text(good)
    resumed = registry.actions["reset_error_streak"](doc, ctx)  # what `fsm resume` runs
    doc = engine.apply(doc, {**resumed, "status": "running"})
    events, doc = engine.run(doc, ctx)
    assert events == ["list", "complete"]
    assert (doc.status, doc.context.consecutive_errors) == ("completed", 0)
    assert "not valid JSON" in (ctx.instance_dir / "final-report.md").read_text()


def test_round_limit_ends_the_run_even_while_issues_arrive(
    sample: Any, make_ctx: Any, new_doc: Any, engine: Any
) -> None:
    """With max_rounds list passes done, the machine completes instead of listing again."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    ctx = make_ctx()
    doc = new_doc(ctx, context={"max_rounds": 1})
    for _ in range(3):
        _, doc = engine.fire(doc, ctx)
    sample.add_issue("ISS-2")
    events, doc = engine.run(doc, ctx)
    assert events == ["complete"]
    assert list(doc.issues) == ["ISS-1"]


def test_no_issues_completes_at_once(sample: Any, make_ctx: Any, new_doc: Any, engine: Any) -> None:
    """A workspace without issues lists nothing and completes with a 0.0% report."""
    ctx = make_ctx()
    events, doc = engine.run(new_doc(ctx), ctx)
    assert events == ["init", "complete"]
    assert doc.context.success_rate == "0.0"
    assert "No issues were found." in (ctx.instance_dir / "final-report.md").read_text()
