"""Failed work is never silently dropped: `fsm retry` re-runs failed and blocked issues, a new
instance over a backlog with failed issues says so, and ``plan_tool = "none"`` runs what is
planned and reports the rest unplanned. All on the real engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fsm_machines.issue_manager.options import IssueManagerOptions
from fsm_machines.issue_manager.preflight import missing_requirements

from fsm.base.errors import InputError, RefusedError
from tests.machines.issue_manager.conftest import INSTANCE_ID, RETRY_HINT, command_task

OTHER_ID = "issue-manager-20260102T000000-0e0f0a0b"


def _counting(name: str) -> dict[str, Any]:
    return command_task("T1", f"echo {name} >> ran.txt", title=f"record {name}")


def _needs_fix(name: str) -> dict[str, Any]:
    """A task that fails until the file ``fixed`` exists (a cause a person fixes)."""
    return command_task("T1", f"test -e fixed && echo {name} >> ran.txt", title=f"fix {name}")


def _ran(sample: Any) -> list[str]:
    path = sample.root / "ran.txt"
    return path.read_text().split() if path.exists() else []


def _failed_run(sample: Any, launch: Any) -> Any:
    """ISS-1 fails until fixed, ISS-2 needs ISS-1 (so is blocked), ISS-3 fails until fixed,
    ISS-4 completes: the run ends failed."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_needs_fix("ISS-1")])
    sample.add_issue("ISS-2", depends_on=["ISS-1"])
    sample.add_solution("ISS-2", [_counting("ISS-2")])
    sample.add_issue("ISS-3")
    sample.add_solution("ISS-3", [_needs_fix("ISS-3")])
    sample.add_issue("ISS-4")
    sample.add_solution("ISS-4", [_counting("ISS-4")])
    im = launch()
    result = im.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert im.statuses() == {
        "ISS-1": "failed",
        "ISS-2": "blocked",
        "ISS-3": "failed",
        "ISS-4": "completed",
    }
    return im


def test_retry_reruns_failed_and_blocked_issues_to_completion(sample: Any, launch: Any) -> None:
    """Once the cause is fixed, a retry reopens every failed and blocked issue (journaled as a
    retry record naming them); the next run executes only those, in dependency order, and the
    instance completes (exit 0) with the issues file and report saying so."""
    im = _failed_run(sample, launch)
    (sample.root / "fixed").touch()

    report = im.retry(reason="fixed it")

    assert (report.source, report.state, report.status) == ("failed", "listing", "running")
    assert report.items == ["ISS-1", "ISS-2", "ISS-3"]
    state = im.data
    assert (state["status"], state["phase"], state["failure_reason"]) == (
        "running",
        "listing",
        None,
    )
    assert state["completed_at"] is None
    assert {k: v["status"] for k, v in state["issues"].items()} == {
        "ISS-1": "planning",
        "ISS-2": "planning",
        "ISS-3": "planning",
        "ISS-4": "completed",
    }
    assert all(state["issues"][i]["error"] is None for i in ("ISS-1", "ISS-2", "ISS-3"))
    assert (state["context"]["rounds"], state["context"]["retries"]) == (0, 1)
    [record] = [r for r in im.journal() if r["kind"] == "retry"]
    assert (record["items"], record["reason"], record["source"], record["dest"]) == (
        ["ISS-1", "ISS-2", "ISS-3"],
        "fixed it",
        "failed",
        "listing",
    )

    result = im.run()

    assert (result.outcome, result.state, result.exit_code) == ("completed", "complete", 0)
    assert result.message == "4 of 4 issues done"
    assert _ran(sample) == ["ISS-4", "ISS-1", "ISS-2", "ISS-3"]
    assert sample.statuses() == dict.fromkeys(["ISS-1", "ISS-2", "ISS-3", "ISS-4"], "completed")
    state = im.data
    assert (state["status"], state["failure_reason"]) == ("completed", None)
    assert [(q["item_id"], q["issue_id"], q["status"]) for q in state["queue"]] == [
        ("S-1", "ISS-1", "failed"),
        ("S-2", "ISS-2", "blocked"),
        ("S-3", "ISS-3", "failed"),
        ("S-4", "ISS-4", "completed"),
        ("S-5", "ISS-1", "completed"),
        ("S-6", "ISS-2", "completed"),
        ("S-7", "ISS-3", "completed"),
    ]
    text = im.report()
    assert "- Outcome: completed: 4 of 4 issues done" in text
    assert "- Retries: 1" in text
    assert "- Retry:" not in text
    im.assert_path(
        [
            *["init", "listing", "planning", "planning", "planning", "planning"],
            *["executing"] * 4,
            *["listing", "failed", "listing", "planning", "planning", "planning"],
            *["executing"] * 3,
            *["listing", "complete"],
        ]
    )
    assert im.audit() == []


def test_retry_of_a_named_issue_reopens_it_and_what_it_blocked(sample: Any, launch: Any) -> None:
    """Retrying ISS-1 alone reopens ISS-2, which it blocked, and leaves ISS-3 failed: the next
    run does ISS-1 and ISS-2 and ends failed again, naming ISS-3 only."""
    im = _failed_run(sample, launch)
    (sample.root / "fixed").touch()

    assert im.retry("ISS-1").items == ["ISS-1", "ISS-2"]
    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert _ran(sample) == ["ISS-4", "ISS-1", "ISS-2"]
    assert im.statuses()["ISS-3"] == "failed"
    assert result.message.startswith("3 of 4 issues done; ISS-3 failed: task T1 (fix ISS-3) ")
    assert result.message.endswith(RETRY_HINT)
    assert im.audit() == []


@pytest.mark.parametrize(
    ("items", "error", "message"),
    [
        pytest.param(
            ("ISS-4",), RefusedError, "issue ISS-4 is completed: nothing to retry", id="completed"
        ),
        pytest.param(
            ("ISS-9",),
            InputError,
            "no issue ISS-9 in this instance (issues not done: ISS-1, ISS-2, ISS-3)",
            id="unknown",
        ),
    ],
)
def test_retry_of_an_issue_that_cannot_be_retried_is_refused(
    sample: Any, launch: Any, items: tuple[str, ...], error: type[Exception], message: str
) -> None:
    """Naming a completed issue is refused (exit 3), an unknown one is bad input (exit 2); the
    document and journal do not change."""
    im = _failed_run(sample, launch)
    before = (im.instance.store.read_bytes(im.instance.id), len(im.journal()))

    with pytest.raises(error) as caught:
        im.retry(*items)

    assert str(caught.value) == message
    assert caught.value.exit_code == (3 if error is RefusedError else 2)  # type: ignore[attr-defined]
    assert (im.instance.store.read_bytes(im.instance.id), len(im.journal())) == before


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(
            "created",
            f"cannot retry instance '{INSTANCE_ID}': it has not ended (state 'init', status "
            "pending); retry is for an instance that ended failed ('fsm run' continues this one)",
            id="not-started",
        ),
        pytest.param(
            "completed",
            f"cannot retry instance '{INSTANCE_ID}': it ended in 'complete' reaching its goal "
            "(1 of 1 issues done): nothing failed",
            id="completed",
        ),
    ],
)
def test_retry_of_an_instance_that_did_not_fail_is_refused(
    sample: Any, launch: Any, setup: str, message: str
) -> None:
    """An instance that has not ended, or ended with every issue done, is not retried: exit 3,
    nothing changed."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("ISS-1")])
    im = launch()
    if setup == "completed":
        assert im.run().exit_code == 0
    before = (im.instance.store.read_bytes(im.instance.id), len(im.journal()))

    with pytest.raises(RefusedError) as caught:
        im.retry()

    assert (str(caught.value), caught.value.exit_code) == (message, 3)
    assert (im.instance.store.read_bytes(im.instance.id), len(im.journal())) == before


def test_a_new_instance_over_a_failed_backlog_says_so_and_fails(sample: Any, launch: Any) -> None:
    """After a run left ISS-1 failed in the issues file, a new instance does not report
    "nothing to do": it lists ISS-1 as failed before it (not run), blocks ISS-2 that needs it,
    runs the new ISS-3, ends failed (exit 4) saying how to retry; its retry then completes."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_needs_fix("ISS-1")])
    first = launch()
    assert first.run().exit_code == 4
    assert sample.statuses() == {"ISS-1": "failed"}
    sample.add_issue("ISS-2", depends_on=["ISS-1"])
    sample.add_solution("ISS-2", [_counting("ISS-2")])
    sample.add_issue("ISS-3")
    sample.add_solution("ISS-3", [_counting("ISS-3")])

    second = launch(instance_id=OTHER_ID)
    result = second.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert result.message == (
        "1 of 3 issues done; ISS-1 failed before this instance: .workflow/issues/issues.jsonl "
        "says failed (an earlier run failed it); ISS-2 blocked: depends on ISS-1, which failed; "
        f"to retry: fsm retry issue-manager {OTHER_ID} [ISSUE...]"
    )
    assert "nothing to do" not in result.message
    assert _ran(sample) == ["ISS-3"]
    issue = second.data["issues"]["ISS-1"]
    assert (issue["status"], issue["failed_before"], issue["solution_id"]) == (
        "failed",
        True,
        None,
    )
    assert "- ✗ **ISS-1** Issue ISS-1: failed before this instance: " in second.report()

    (sample.root / "fixed").touch()
    assert second.retry().items == ["ISS-1", "ISS-2"]
    result = second.run()
    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "3 of 3 issues done",
    )
    assert sample.statuses() == dict.fromkeys(["ISS-1", "ISS-2", "ISS-3"], "completed")
    assert second.audit() == []


def test_a_backlog_with_only_failed_issues_is_not_nothing_to_do(sample: Any, launch: Any) -> None:
    """An issues file whose only issue an earlier run failed ends failed (exit 4) naming it,
    where "nothing to do" (exit 0) would hide it."""
    sample.add_issue("ISS-1", status="failed")
    im = launch()

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert result.message.startswith("0 of 1 issues done; ISS-1 failed before this instance: ")
    assert result.message.endswith(RETRY_HINT)
    assert [s.event for s in result.steps] == ["init", "fail"]
    assert im.read("summary.json")["stats"]["failed"] == 1


def test_plan_tool_none_runs_what_is_planned_and_reports_the_rest_unplanned(
    sample: Any, launch: Any
) -> None:
    """With plan_tool = "none" and no agent at all, the preflight asks for none; the issue with
    a solution file runs, the other is unplanned (named in the reason and the report, left
    registered in the issues file) and the run fails (exit 4); with its solution file
    written, a retry completes it."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("ISS-1")])
    sample.add_issue("ISS-2", "Nobody planned this")
    im = launch({"plan_tool": "none", "execute_tool": "none"})
    assert missing_requirements(im.doc, im.context(IssueManagerOptions)) == []

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    cause = (
        "no solution file .workflow/issues/solutions/ISS-2.jsonl and plan_tool is 'none' "
        "(write the solution file, or set plan_tool to a planning agent)"
    )
    assert result.message == f"1 of 2 issues done; ISS-2 unplanned: {cause}; {RETRY_HINT}"
    assert _ran(sample) == ["ISS-1"]
    assert im.statuses() == {"ISS-1": "completed", "ISS-2": "unplanned"}
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "registered"}
    assert im.data["errors"] == []
    report = im.report()
    assert "| Unplanned | 1 |" in report
    assert f"- ○ **ISS-2** Nobody planned this: unplanned: {cause}" in report
    assert im.read("summary.json")["stats"]["unplanned"] == 1

    sample.add_solution("ISS-2", [_counting("ISS-2")])
    assert im.retry().items == ["ISS-2"]
    result = im.run()
    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "2 of 2 issues done",
    )
    assert im.audit() == []


def test_the_cli_retries_and_runs_to_completion(sample: Any, cli: Any) -> None:
    """`fsm retry issue-manager ID` reopens the failed issue and says how to go on; `fsm run`
    then exits 0; a second retry is refused with exit 3."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_needs_fix("ISS-1")])
    instance_id = cli("new", "issue-manager").out.strip()
    ran = cli("run", "issue-manager", instance_id)
    assert ran.code == 4
    assert ran.out.strip().endswith(f"to retry: fsm retry issue-manager {instance_id} [ISSUE...]")
    (sample.root / "fixed").touch()

    retried = cli("retry", "issue-manager", instance_id)

    assert retried.code == 0, retried.err
    assert retried.out.strip() == (
        f"{instance_id}: reopened ISS-1 (state 'listing', status running); "
        f"'fsm run issue-manager {instance_id}' runs them"
    )
    assert cli("run", "issue-manager", instance_id).code == 0
    refused = cli("retry", "issue-manager", instance_id)
    assert refused.code == 3
    assert refused.err.startswith(f"fsm: error: cannot retry instance '{instance_id}': it ended")
    history = [
        json.loads(line)
        for line in cli("history", "issue-manager", instance_id, "--json").out.splitlines()
    ]
    assert [r["kind"] for r in history].count("retry") == 1
