"""Executing queue items and writing the final report, called directly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from machines.issue_manager import functions
from machines.issue_manager.report import final_report

ACTIONS = functions.registry.actions
HOOKS = functions.registry.hooks
GUARDS = functions.registry.guards


def _task(task_id: str, command: str, *deps: str) -> dict[str, Any]:
    return {"id": task_id, "title": f"do {task_id}", "command": command, "depends_on": list(deps)}


# -- execute --------------------------------------------------------------------------------------


def test_execute_runs_tasks_in_dependency_order_and_completes(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """All tasks succeed in dependency order: issue and item completed, counters, files."""
    sample.add_issue("ISS-1")
    sample.add_solution(
        "ISS-1",
        [
            _task("T2", "echo T2 >> order.txt", "T1"),
            _task("T1", "echo T1 >> order.txt"),
        ],
    )
    ctx = make_ctx()
    doc = planned(ctx)
    doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx), phase="executing")
    assert (sample.root / "order.txt").read_text().split() == ["T1", "T2"]
    issue = doc.issues["ISS-1"]
    assert (issue.status, issue.error, doc.queue[0].status) == ("completed", None, "completed")
    assert issue.executed_at is not None
    assert (doc.context.completed_count, doc.context.failed_count) == (1, 0)
    assert sample.statuses() == {"ISS-1": "completed"}
    results = json.loads((ctx.instance_dir / "execution-results.json").read_text())
    assert (results["total"], results["completed"], results["failed"]) == (1, 1, 0)
    snapshot = json.loads(
        (ctx.instance_dir / "snapshots" / "snapshot-before-execute-1.json").read_text()
    )
    assert (snapshot["phase"], snapshot["item_id"]) == ("before-execute", "S-1")
    assert snapshot["state"]["queue"][0]["status"] == "pending"


def test_execute_fails_the_issue_with_the_first_error(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """A failing task fails the issue with that task's error; later tasks do not run."""
    sample.add_issue("ISS-1")
    sample.add_solution(
        "ISS-1",
        [
            _task("T1", "true"),
            _task("T2", "echo broken >&2; exit 3", "T1"),
            _task("T3", "touch t3-ran", "T2"),
        ],
    )
    ctx = make_ctx()
    doc = planned(ctx)
    doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx), phase="executing")
    issue = doc.issues["ISS-1"]
    assert issue.status == "failed"
    assert issue.error is not None
    assert issue.error.startswith("task T2 (do T2) failed: exited 3")
    assert "broken" in issue.error
    assert not (sample.root / "t3-ran").exists()
    assert (doc.queue[0].status, doc.context.failed_count) == ("failed", 1)
    assert sample.statuses() == {"ISS-1": "failed"}
    record = json.loads((ctx.instance_dir / "solutions" / "ISS-1-execution.json").read_text())
    assert [(t["id"], t["status"]) for t in record["execution_result"]["tasks"]] == [
        ("T1", "completed"),
        ("T2", "failed"),
    ]


def test_execute_hands_prompt_tasks_to_the_execution_agent(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """A task without a command runs the execution agent with its prompt and criteria."""
    sample.add_issue("ISS-1", "Add docs")
    task = {
        "id": "T1",
        "title": "Write README",
        "prompt": "Document the CLI.",
        "acceptance": {"criteria": ["README lists every command"]},
    }
    sample.add_solution("ISS-1", [task])
    sample.script_agent("doer", "print('done')\n")
    ctx = make_ctx(execute_tool="doer")
    doc = planned(ctx)
    doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx))
    assert doc.issues["ISS-1"].status == "completed"
    (prompt,) = sample.prompts("doer")
    assert "Issue ISS-1: Add docs" in prompt
    assert "Document the CLI." in prompt
    assert "- README lists every command" in prompt


def test_execute_without_an_execution_agent_fails_the_issue_clearly(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """A prompt task with no execution agent fails its issue, saying the agent is missing."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [{"id": "T1", "title": "think", "prompt": "p"}])
    ctx = make_ctx(execute_tool="stand-in-doer")
    doc = planned(ctx)
    doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx))
    assert doc.issues["ISS-1"].error == (
        "task T1 (think) failed: agent 'stand-in-doer' is not configured: add "
        "[agent.stand-in-doer] command = [...] to fsm.toml or put 'stand-in-doer' on PATH"
    )


def test_interrupted_item_does_not_rerun_tasks_already_completed(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """An item left executing by a crash resumes after the tasks its record shows completed."""
    sample.add_issue("ISS-1")
    sample.add_solution(
        "ISS-1",
        [
            _task("T1", "echo T1 >> ran.txt"),
            _task("T2", "echo T2 >> ran.txt", "T1"),
        ],
    )
    ctx = make_ctx()
    doc = planned(ctx)
    record = ctx.instance_dir / "solutions" / "ISS-1-execution.json"
    record.write_text(
        json.dumps(
            {
                "solution_id": "SOL-ISS-1-1",
                "issue_id": "ISS-1",
                "status": "executing",
                "execution_result": {"tasks": [{"id": "T1", "status": "completed"}]},
            }
        )
    )
    crashed = apply(doc, {"queue": [doc.queue[0].model_dump() | {"status": "executing"}]})
    done = apply(crashed, ACTIONS["execute_next_item"](crashed, ctx))
    assert (sample.root / "ran.txt").read_text().split() == ["T2"]
    assert done.queue[0].status == "completed"


# -- complete -------------------------------------------------------------------------------------


def test_finalize_reports_totals_and_success_rate(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """The final report counts completed, failed and pending issues; 1 of 3 is 33.3%."""
    sample.add_issue("ISS-1", "Good")
    sample.add_issue("ISS-2", "Bad")
    sample.add_issue("ISS-3", "Unplanned")
    sample.add_solution("ISS-1", [_task("T1", "true")])
    sample.add_solution("ISS-2", [_task("T1", "false")])
    ctx = make_ctx(plan_tool="stand-in-planner")
    doc = planned(ctx)
    for _ in range(2):
        doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx))
    doc = apply(doc, ACTIONS["finalize"](doc, ctx), phase="complete")
    assert (doc.status, doc.context.success_rate) == ("completed", "33.3")
    assert (doc.context.completed_count, doc.context.failed_count) == (1, 1)
    assert doc.completed_at is not None
    report = (ctx.instance_dir / "final-report.md").read_text()
    for line in (
        "| Total issues | 3 |",
        "| Completed | 1 |",
        "| Failed | 1 |",
        "| Pending | 1 |",
        "| Success rate | 33.3% |",
        "- ✓ **ISS-1** Good (SOL-ISS-1-1): completed",
        "- ✗ **ISS-2** Bad (SOL-ISS-2-1): failed: task T1 (do T1) failed: exited 1",
    ):
        assert line in report
    assert "- ○ **ISS-3** Unplanned: registered: no solution file" in report
    summary = json.loads((ctx.instance_dir / "summary.json").read_text())
    assert summary["stats"] == {
        "total_issues": 3,
        "completed": 1,
        "failed": 1,
        "pending": 1,
        "success_rate": "33.3",
    }


def test_report_lists_an_untitled_issue_without_a_stray_space(
    make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """An issue without a title is listed as ``**ID**: status``, not ``**ID** : status``."""
    ctx = make_ctx()
    doc = apply(new_doc(ctx), {"issues": {"ISS-9": {"id": "ISS-9", "status": "registered"}}})
    text = final_report(doc, ctx.instance_id, "2026-01-01T00:00:00.000Z")
    assert "- ○ **ISS-9**: registered" in text.splitlines()


@pytest.mark.parametrize(
    ("completed", "total", "rate"),
    [
        pytest.param(0, 0, "0.0", id="no-issues"),
        pytest.param(2, 3, "66.7", id="two-of-three"),
        pytest.param(1, 8, "12.5", id="one-of-eight"),
        pytest.param(3, 3, "100.0", id="all"),
    ],
)
def test_success_rate_has_one_decimal(completed: int, total: int, rate: str) -> None:
    """The success rate is completed over total in percent, one decimal."""
    from machines.issue_manager.report import RunStats

    assert RunStats(total, completed, 0).success_rate == rate
