"""Dependencies between issues, end to end on the real engine: they order execution, an issue
whose dependency failed (or is blocked, unplanned, unknown) is blocked and named, and a cycle is
reported, never waited on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fsm.view.inspect import status
from tests.machines.issue_manager.conftest import RETRY_HINT, command_task


def _counting(name: str) -> dict[str, Any]:
    """A task that appends ``name`` to ran.txt, so a test sees what ran, in which order."""
    return command_task("T1", f"echo {name} >> ran.txt", title=f"record {name}")


def _failing(code: int = 1) -> dict[str, Any]:
    return command_task("T1", f"exit {code}", title="break")


def _ran(sample: Any) -> list[str]:
    path = sample.root / "ran.txt"
    return path.read_text().split() if path.exists() else []


def _notes(*ids: str) -> dict[str, Any]:
    """Dependencies as CCW's issue exports write them."""
    return {"extended_context": {"notes": {"wave": 2, "depends_on_issues": list(ids)}}}


def test_dependencies_order_execution_whatever_the_file_order(sample: Any, launch: Any) -> None:
    """Issues listed before what they depend on still run after it: ISS-3 needs ISS-2
    (``depends_on``), ISS-2 needs ISS-1 (CCW's ``depends_on_issues``); all complete, in that
    order, and the document keeps each issue's dependencies."""
    sample.add_issue("ISS-3", depends_on=["ISS-2"])
    sample.add_issue("ISS-2", **_notes("ISS-1"))
    sample.add_issue("ISS-1")
    for n in (1, 2, 3):
        sample.add_solution(f"ISS-{n}", [_counting(f"ISS-{n}")])
    im = launch()

    result = im.run()

    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "3 of 3 issues done",
    )
    assert _ran(sample) == ["ISS-1", "ISS-2", "ISS-3"]
    state = im.data
    assert [q["issue_id"] for q in state["queue"]] == ["ISS-3", "ISS-2", "ISS-1"]
    assert {k: v["depends_on"] for k, v in state["issues"].items()} == {
        "ISS-3": ["ISS-2"],
        "ISS-2": ["ISS-1"],
        "ISS-1": [],
    }
    snapshots = [im.read(f"snapshots/{name}") for name in im.listing("snapshots")]
    assert sorted((s["item_id"], s["issue_id"]) for s in snapshots) == [
        ("S-1", "ISS-3"),
        ("S-2", "ISS-2"),
        ("S-3", "ISS-1"),
    ]
    assert im.audit() == []


def test_an_issue_whose_dependency_failed_is_blocked_and_named(sample: Any, launch: Any) -> None:
    """ISS-1 fails; ISS-2 (needs ISS-1) and ISS-3 (needs ISS-2) never run and are blocked,
    each naming its dependency, in the reason (the failure first), the report, status,
    summary.json and errors;
    the independent ISS-4 completes; the issues file keeps the blocked ones planned."""
    sample.add_issue("ISS-3", depends_on=["ISS-2"])
    sample.add_issue("ISS-2", depends_on=["ISS-1"])
    sample.add_issue("ISS-1")
    sample.add_issue("ISS-4")
    sample.add_solution("ISS-1", [_failing(7)])
    for n in (2, 3, 4):
        sample.add_solution(f"ISS-{n}", [_counting(f"ISS-{n}")])
    im = launch()

    result = im.run()

    assert (result.outcome, result.state, result.exit_code) == ("failed", "failed", 4)
    assert _ran(sample) == ["ISS-4"]
    state = im.data
    issues = state["issues"]
    assert {k: (v["status"], v["error"]) for k, v in issues.items() if k != "ISS-1"} == {
        "ISS-2": ("blocked", "depends on ISS-1, which failed"),
        "ISS-3": ("blocked", "depends on ISS-2, which is blocked"),
        "ISS-4": ("completed", None),
    }
    reason = (
        f"1 of 4 issues done; ISS-1 failed: {issues['ISS-1']['error']}; "
        "ISS-3 blocked: depends on ISS-2, which is blocked; "
        f"ISS-2 blocked: depends on ISS-1, which failed; {RETRY_HINT}"
    )
    assert (result.message, state["failure_reason"]) == (reason, reason)
    assert {q["issue_id"]: q["status"] for q in state["queue"]} == {
        "ISS-3": "blocked",
        "ISS-2": "blocked",
        "ISS-1": "failed",
        "ISS-4": "completed",
    }
    assert (state["context"]["blocked_count"], state["context"]["failed_count"]) == (2, 1)
    assert [(e["action"], e["issue_id"]) for e in state["errors"]] == [
        ("action-execute", "ISS-1"),
        ("action-execute", "ISS-2"),
        ("action-execute", "ISS-3"),
    ]
    report = im.report()
    for line in (
        f"- Outcome: failed: {reason}",
        "| Blocked | 2 |",
        "- ⊘ **ISS-2** Issue ISS-2 (SOL-ISS-2-1): blocked: depends on ISS-1, which failed",
        f"- Retry: `fsm retry issue-manager {im.id} [ISSUE...]`",
    ):
        assert line in report
    summary = im.read("summary.json")
    assert (summary["stats"]["blocked"], summary["reason"]) == (2, reason)
    shown = status(im.instance)
    assert shown.summary["issues"] == "4 (1 completed, 1 failed, 2 blocked, 0 pending)"
    assert shown.summary["queue"] == "4/4 items done"
    assert sample.statuses() == {
        "ISS-3": "planned",
        "ISS-2": "planned",
        "ISS-1": "failed",
        "ISS-4": "completed",
    }
    assert im.listing("snapshots") == [
        "snapshot-before-execute-3.json",
        "snapshot-before-execute-4.json",
    ]
    assert im.audit() == []


def test_a_dependency_that_failed_planning_blocks_before_planning(sample: Any, launch: Any) -> None:
    """When ISS-1's planning fails, ISS-2 (planned after it, needing it) is blocked at once:
    its solution is neither planned nor queued."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("a"), _counting("b")])  # two tasks named T1
    sample.add_issue("ISS-2", depends_on=["ISS-1"])
    sample.add_solution("ISS-2", [_counting("ISS-2")])
    im = launch()

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    issue = im.data["issues"]["ISS-2"]
    assert (issue["status"], issue["error"], issue["solution_id"]) == (
        "blocked",
        "depends on ISS-1, which failed",
        None,
    )
    assert im.data["queue"] == []
    assert im.listing("solutions") == []
    assert [(e["action"], e["issue_id"]) for e in im.data["errors"]] == [
        ("action-plan", "ISS-1"),
        ("action-plan", "ISS-2"),
    ]
    assert _ran(sample) == []
    assert sample.statuses() == {"ISS-1": "registered", "ISS-2": "registered"}
    assert im.audit() == []


@pytest.mark.parametrize(
    ("elsewhere", "runs", "blocker"),
    [
        pytest.param(
            None,
            False,
            "depends on ISS-0, which is in no issues file this instance read",
            id="unknown",
        ),
        pytest.param(
            ("issues", "queued"),
            False,
            "depends on ISS-0, which is queued in the issues file, not completed",
            id="not-completed-in-the-issues-file",
        ),
        pytest.param(("issues", "completed"), True, None, id="completed-in-the-issues-file"),
        pytest.param(("history", "completed"), True, None, id="archived-as-completed"),
        pytest.param(
            ("history", "failed"),
            False,
            "depends on ISS-0, which is failed in the issues file, not completed",
            id="archived-as-failed",
        ),
    ],
)
def test_a_dependency_outside_the_instance_must_be_completed(
    sample: Any, launch: Any, elsewhere: tuple[str, str] | None, runs: bool, blocker: str | None
) -> None:
    """A dependency this instance did not list counts as done only when the issues file (or
    issue-history.jsonl beside it, where ccw archives completed issues) says completed; else
    the dependent is blocked, saying what is known of the dependency."""
    if elsewhere is not None:
        where, dep_status = elsewhere
        line = json.dumps({"id": "ISS-0", "title": "earlier", "status": dep_status})
        if where == "issues":
            sample.append_line(line)
        else:
            (sample.issues_path.parent / "issue-history.jsonl").write_text(line + "\n")
    sample.add_issue("ISS-1", depends_on=["ISS-0"])
    sample.add_solution("ISS-1", [_counting("ISS-1")])
    im = launch()

    result = im.run()

    assert _ran(sample) == (["ISS-1"] if runs else [])
    issue = im.data["issues"]["ISS-1"]
    assert issue["depends_on"] == ["ISS-0"]
    if runs:
        assert (result.outcome, result.exit_code, issue["status"]) == ("completed", 0, "completed")
    else:
        assert (result.outcome, result.exit_code) == ("failed", 4)
        assert (issue["status"], issue["error"]) == ("blocked", blocker)
        assert f"ISS-1 blocked: {blocker}" in result.message
    assert im.audit() == []


def test_a_dependency_cycle_is_reported_not_waited_on(sample: Any, launch: Any) -> None:
    """ISS-1 and ISS-2 need each other, ISS-3 needs itself: each is blocked naming its cycle,
    ISS-4 (needing ISS-1) is blocked by it, ISS-5 runs; the run ends in a few steps."""
    sample.add_issue("ISS-1", depends_on=["ISS-2"])
    sample.add_issue("ISS-2", **_notes("ISS-1"))
    sample.add_issue("ISS-3", depends_on=["ISS-3"])
    sample.add_issue("ISS-4", depends_on=["ISS-1"])
    sample.add_issue("ISS-5")
    for n in range(1, 6):
        sample.add_solution(f"ISS-{n}", [_counting(f"ISS-{n}")])
    im = launch()

    result = im.run(max_steps=30)

    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert _ran(sample) == ["ISS-5"]
    assert {k: (v["status"], v["error"]) for k, v in im.data["issues"].items()} == {
        "ISS-1": ("blocked", "dependency cycle ISS-1 -> ISS-2 -> ISS-1"),
        "ISS-2": ("blocked", "dependency cycle ISS-2 -> ISS-1 -> ISS-2"),
        "ISS-3": ("blocked", "dependency cycle ISS-3 -> ISS-3"),
        "ISS-4": ("blocked", "depends on ISS-1, which is blocked"),
        "ISS-5": ("completed", None),
    }
    assert result.message.startswith(
        "1 of 5 issues done; ISS-1 blocked: dependency cycle ISS-1 -> ISS-2 -> ISS-1; "
    )
    assert [s.event for s in result.steps] == [
        *["init", "plan", "plan", "plan", "plan", "plan"],
        *["execute", "list", "fail"],
    ]
    assert im.audit() == []
