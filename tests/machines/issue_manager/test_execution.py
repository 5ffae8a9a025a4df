"""Executing queue items and writing the final report, called directly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fsm_machines.issue_manager import functions
from fsm_machines.issue_manager.report import final_report, run_verdict

from tests.machines.issue_manager.conftest import INSTANCE_ID

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
        "task T1 (think) failed: agent 'stand-in-doer' cannot run: fsm.toml has no "
        "[agent.stand-in-doer] table and 'stand-in-doer' is not an agent CLI fsm knows "
        "(claude, codex, gemini, qwen): add [agent.stand-in-doer] command = [...] to fsm.toml"
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


def test_finalize_reports_totals_success_rate_and_each_failure(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """1 of 3 issues done is 33.3% and a failure: the document says failed with the reason, the
    report's Errors section names each failed issue with its cause, summary.json agrees."""
    sample.add_issue("ISS-1", "Good")
    sample.add_issue("ISS-2", "Bad")
    sample.add_issue("ISS-3", "Unplanned")
    sample.add_solution("ISS-1", [_task("T1", "true")])
    sample.add_solution("ISS-2", [_task("T1", "false")])
    ctx = make_ctx(plan_tool="stand-in-planner")
    doc = planned(ctx)
    for _ in range(2):
        doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx))
    doc = apply(doc, ACTIONS["finalize"](doc, ctx), phase="failed")
    assert (doc.status, doc.context.success_rate) == ("failed", "33.3")
    assert (doc.context.completed_count, doc.context.failed_count) == (1, 2)
    assert doc.completed_at is not None
    reason = doc.model_dump()["failure_reason"]
    assert reason.startswith("1 of 3 issues done; ISS-2 failed: task T1 (do T1) failed: exited 1: ")
    assert "; ISS-3 planning failed: no solution file .workflow/issues/solutions/ISS-3.jsonl" in (
        reason
    )
    report = (ctx.instance_dir / "final-report.md").read_text()
    for line in (
        f"- Outcome: failed: {reason}",
        "| Total issues | 3 |",
        "| Completed | 1 |",
        "| Failed | 2 |",
        "| Blocked | 0 |",
        "| Unplanned | 0 |",
        "| Pending | 0 |",
        "| Success rate | 33.3% |",
        "| Errors | 2 |",
        "- ✓ **ISS-1** Good (SOL-ISS-1-1): completed",
        "- ✗ **ISS-2** Bad (SOL-ISS-2-1): failed: task T1 (do T1) failed: exited 1",
        "- ✗ **ISS-3** Unplanned: failed in planning: no solution file",
    ):
        assert line in report
    errors = report.split("## Errors\n\n")[1].split("\n\n")[0].splitlines()
    assert [line.split(" ")[2] for line in errors] == ["action-plan:", "action-execute:"]
    assert "ISS-3 planning failed: no solution file" in errors[0]
    assert "ISS-2 failed: task T1 (do T1) failed: exited 1" in errors[1]
    summary = json.loads((ctx.instance_dir / "summary.json").read_text())
    assert (summary["status"], summary["reason"], summary["errors"]) == ("failed", reason, 2)
    assert summary["stats"] == {
        "total_issues": 3,
        "completed": 1,
        "failed": 2,
        "blocked": 0,
        "unplanned": 0,
        "pending": 0,
        "success_rate": "33.3",
    }


def test_finalize_with_every_issue_done_completes_with_the_count(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """Every issue done: status completed, no failure_reason, the reason says how many."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_task("T1", "true")])
    ctx = make_ctx()
    doc = planned(ctx)
    doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx))
    doc = apply(doc, ACTIONS["finalize"](doc, ctx), phase="complete")
    assert (doc.status, doc.model_dump()["failure_reason"]) == ("completed", None)
    report = (ctx.instance_dir / "final-report.md").read_text()
    assert "- Outcome: completed: 1 of 1 issues done" in report
    assert "## Errors\n\nNone.\n" in report


def test_the_reason_names_three_problems_then_counts_the_rest(
    make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """With many failures the one-line reason names the first three and counts the others;
    a long cause is cut, and a multi-line cause is kept on one line."""
    issues = {
        f"ISS-{n}": {"id": f"ISS-{n}", "status": "failed", "error": f"cause {n}\nsecond line"}
        for n in range(1, 6)
    }
    issues["ISS-1"]["error"] = "x" * 500
    doc = apply(new_doc(make_ctx()), {"issues": issues})
    success, reason = run_verdict(doc)
    assert not success
    assert "\n" not in reason
    parts = reason.split("; ")
    assert parts[0] == "0 of 5 issues done"
    assert parts[1].startswith("ISS-1 planning failed: xxx") and parts[1].endswith("...")
    assert len(parts[1]) == 200
    assert parts[2:] == [
        "ISS-2 planning failed: cause 2 second line",
        "ISS-3 planning failed: cause 3 second line",
        "and 2 more (see final-report.md)",
        f"to retry: fsm retry issue-manager {INSTANCE_ID} [ISSUE...]",
    ]


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
    from fsm_machines.issue_manager.report import RunStats

    assert RunStats(total, completed, 0).success_rate == rate


def test_an_unsafe_issue_id_written_into_the_document_is_never_a_path(
    sample: Any, make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """A document edited by another tool to queue an issue ``../../x``: executing it fails the
    issue as unsafe, and no plan or execution record is read or written outside solutions/."""
    ctx = make_ctx()
    issue_id = "../../x"
    doc = apply(
        new_doc(ctx),
        {
            "issues": {issue_id: {"id": issue_id, "status": "planned", "solution_id": "SOL-1"}},
            "queue": [{"item_id": "S-1", "issue_id": issue_id, "solution_id": "SOL-1"}],
        },
    )
    doc = apply(doc, ACTIONS["execute_next_item"](doc, ctx))
    issue = doc.issues[issue_id]
    assert issue.status == "failed"
    assert (issue.error or "").startswith("unsafe issue id '../../x'")
    assert [p.name for p in sample.root.rglob("x-*.json")] == []
    assert [e.issue_id for e in doc.errors] == [issue_id]  # type: ignore[union-attr]
