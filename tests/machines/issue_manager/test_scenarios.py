"""The scenarios of the issue, end to end on the real engine, read from the files a user reads.

Each test builds a sample workspace, creates an instance with the engine's API, runs it with
``Engine.run`` (what ``fsm run`` does) and checks the run's outcome and exit code, ``state.json``,
``state-history.json``, ``snapshots/``, ``solutions/``, ``execution-results.json``,
``final-report.md`` and the statuses written back to the issues file. Every scenario ends with
the audit: the journal replays to the document, which validates, and the history has one entry
per save.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from fsm_machines.issue_manager.model import IssueManagerState

from fsm.base.errors import MissingRequirementError
from fsm.engine.engine import Engine
from fsm.process.executor import AgentCommand
from fsm.view.inspect import status
from tests.machines.issue_manager.conftest import RETRY_HINT, agent_task, command_task


def _counting(task_id: str, *deps: str) -> dict[str, Any]:
    """A task that appends its id to ran.txt, so a test sees what ran, in which order."""
    return command_task(task_id, f"echo {task_id} >> ran.txt", *deps, title=f"record {task_id}")


def _ran(sample: Any) -> list[str]:
    path = sample.root / "ran.txt"
    return path.read_text().split() if path.exists() else []


def test_all_issues_succeed(sample: Any, launch: Any) -> None:
    """Issues planned from solution files and by the planning agent, with command tasks and an
    execution-agent task, all complete in dependency and queue order, at 100%."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("ISS-1.b", "ISS-1.a"), _counting("ISS-1.a")])
    sample.add_issue("ISS-2")
    sample.add_solution(
        "ISS-2", [_counting("ISS-2.a"), agent_task("ISS-2.b", "Edit it", "ISS-2.a")]
    )
    sample.add_issue("ISS-3", "Planned by the agent")
    sample.planning_agent("planner", [_counting("ISS-3.a")])
    sample.script_agent(
        "writer",
        "import re\n"
        "task = re.search(r'Task (\\S+):', prompt).group(1)\n"
        "open('ran.txt', 'a').write(task + '\\n')\n",
    )
    im = launch({"plan_tool": "planner", "execute_tool": "writer"})

    result = im.run()

    assert (result.outcome, result.state, result.exit_code) == ("completed", "complete", 0)
    assert [s.event for s in result.steps] == [
        *["init", "plan", "plan", "plan"],
        *["execute", "execute", "execute", "list", "complete"],
    ]
    assert _ran(sample) == ["ISS-1.a", "ISS-1.b", "ISS-2.a", "ISS-2.b", "ISS-3.a"]
    assert sample.prompts("writer")[0].startswith("Issue ISS-2: Issue ISS-2\n")
    assert sample.prompts("writer")[0].endswith("Task ISS-2.b: task ISS-2.b\n\nEdit it")
    state = im.data
    assert (state["status"], state["phase"]) == ("completed", "complete")
    context = state["context"]
    assert (context["rounds"], context["completed_count"], context["success_rate"]) == (
        2,
        3,
        "100.0",
    )
    assert [(q["item_id"], q["issue_id"], q["status"]) for q in state["queue"]] == [
        ("S-1", "ISS-1", "completed"),
        ("S-2", "ISS-2", "completed"),
        ("S-3", "ISS-3", "completed"),
    ]
    for issue in state["issues"].values():
        assert state["created_at"] < issue["planned_at"] < issue["executed_at"]
        assert issue["executed_at"] < state["completed_at"] == state["updated_at"]
    assert sample.statuses() == dict.fromkeys(["ISS-1", "ISS-2", "ISS-3"], "completed")
    history = im.history()
    assert [h["phase"] for h in history] == [
        *["init", "init", "listing", "planning", "planning", "planning"],
        *["executing", "executing", "executing", "listing", "complete"],
    ]
    assert (history[-1]["completed_actions"], history[-1]["issues_count"]) == (10, 3)
    assert im.listing("snapshots") == [f"snapshot-before-execute-{n}.json" for n in (1, 2, 3)]
    before_second = im.read("snapshots/snapshot-before-execute-2.json")
    assert (before_second["item_id"], before_second["issue_id"]) == ("S-2", "ISS-2")
    assert [q["status"] for q in before_second["state"]["queue"]] == [
        "completed",
        "pending",
        "pending",
    ]
    assert im.listing("solutions") == [
        f"{issue}-{kind}.json"
        for issue in ("ISS-1", "ISS-2", "ISS-3")
        for kind in ("execution", "plan")
    ]
    record = im.read("solutions/ISS-2-execution.json")
    assert [(t["id"], t["via"]) for t in record["execution_result"]["tasks"]] == [
        ("ISS-2.a", "command"),
        ("ISS-2.b", "agent:writer"),
    ]
    plan = im.read("solutions/ISS-3-plan.json")
    assert (plan["source"], plan["solution"]["id"]) == ("agent", "SOL-ISS-3-1")
    bound = json.loads((sample.solutions_dir / "ISS-3.jsonl").read_text())
    assert bound["is_bound"] is True
    results = im.read("execution-results.json")
    assert (results["total"], results["completed"], results["failed"]) == (3, 3, 0)
    assert "| Success rate | 100.0% |" in im.report()
    assert im.audit() == []


def test_one_failing_task_fails_its_issue_and_the_run(sample: Any, launch: Any) -> None:
    """A failing task fails its issue at that task; the other issues still run; the run ends
    failed (exit 4) saying 2 of 3 done and why; document, report and summary.json agree."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    sample.add_issue("ISS-2")
    failing = command_task("T2", "exit 7", "T1", title="break")
    sample.add_solution("ISS-2", [_counting("T1"), failing, _counting("T3", "T2")])
    sample.add_issue("ISS-3")
    sample.add_solution("ISS-3", [_counting("three")])
    im = launch()

    result = im.run()

    assert (result.outcome, result.state, result.exit_code) == ("failed", "failed", 4)
    assert _ran(sample) == ["one", "T1", "three"]
    state = im.data
    assert [q["status"] for q in state["queue"]] == ["completed", "failed", "completed"]
    assert im.statuses() == {"ISS-1": "completed", "ISS-2": "failed", "ISS-3": "completed"}
    error = state["issues"]["ISS-2"]["error"]
    assert error.startswith("task T2 (break) failed: exited 7")
    context = state["context"]
    assert (context["completed_count"], context["failed_count"]) == (2, 1)
    assert (context["total_issues"], context["success_rate"]) == (3, "66.7")
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "failed", "ISS-3": "completed"}
    record = im.read("solutions/ISS-2-execution.json")
    assert record["status"] == "failed"
    assert [(t["id"], t["status"]) for t in record["execution_result"]["tasks"]] == [
        ("T1", "completed"),
        ("T2", "failed"),
    ]
    results = im.read("execution-results.json")
    assert (results["total"], results["completed"], results["failed"]) == (3, 2, 1)
    assert [r.get("error") for r in results["results"]] == [None, error, None]
    report = im.report()
    for row in (
        "| Completed | 2 |",
        "| Failed | 1 |",
        "| Pending | 0 |",
        "| Success rate | 66.7% |",
    ):
        assert row in report
    assert f"- ✗ **ISS-2** Issue ISS-2 (SOL-ISS-2-1): failed: {error}" in report
    reason = f"2 of 3 issues done; ISS-2 failed: {error}; {RETRY_HINT}"
    assert result.message == reason
    assert (state["status"], state["phase"], state["failure_reason"]) == (
        "failed",
        "failed",
        reason,
    )
    assert f"- Outcome: failed: {reason}" in report
    assert f"action-execute: ISS-2 failed: {error}" in report
    assert [(e["action"], e["issue_id"]) for e in state["errors"]] == [("action-execute", "ISS-2")]
    assert im.read("summary.json")["status"] == "failed"
    assert im.audit() == []


def test_an_execution_agent_that_changes_nothing_fails_its_issue(sample: Any, launch: Any) -> None:
    """A task given to the execution agent that ends without changing any file (it says it did
    the work) fails its issue, naming that, and the issues that depend on it are blocked; the run
    ends failed, exit 4, instead of "2 of 2 issues done" over an untouched workspace."""
    sample.add_issue("ISS-1", "Swap the bases back")
    sample.add_solution("ISS-1", [agent_task("T1", "Swap the bases back in size.py")])
    sample.add_issue("ISS-2", "Note it", depends_on=["ISS-1"])
    sample.add_solution("ISS-2", [_counting("news")])
    said = "print('Done: I swapped the bases back.')"
    sample.agents["doer"] = AgentCommand((sys.executable, "-c", said, "{prompt}"))
    im = launch({"plan_tool": "none", "execute_tool": "doer"})

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    error = im.data["issues"]["ISS-1"]["error"]
    assert error == (
        "task T1 (task T1) failed: the task changed no file (agent doer exited 0 without an "
        "edit); Done: I swapped the bases back."
    )
    assert sample.statuses()["ISS-1"] == "failed"
    assert _ran(sample) == []
    assert "ISS-2 blocked: depends on ISS-1, which failed" in result.message


def test_a_failed_planning_is_a_failed_issue_with_its_cause(sample: Any, launch: Any) -> None:
    """A planning agent that fails leaves its issue failed (not pending) with the agent's exit
    and last line; the report's Errors section holds that cause, the run fails (exit 4) with
    it, and the issues file keeps the issue registered for a later instance."""
    sample.add_issue("ISS-1", "Nobody could plan this")
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-2", [_counting("two")])
    sample.script_agent("planner", "sys.stderr.write('quota exceeded\\n')\nsys.exit(3)\n")
    im = launch({"plan_tool": "planner"})

    result = im.run()

    assert (result.outcome, result.state, result.exit_code) == ("failed", "failed", 4)
    state = im.data
    issue = state["issues"]["ISS-1"]
    assert (issue["status"], issue["solution_id"], issue["planned_at"]) == ("failed", None, None)
    assert issue["error"].startswith("planning agent 'planner' exited 3: ")
    assert issue["error"].endswith("(quota exceeded)")
    reason = f"1 of 2 issues done; ISS-1 planning failed: {issue['error']}; {RETRY_HINT}"
    assert result.message == reason
    assert state["failure_reason"] == reason
    assert [q["issue_id"] for q in state["queue"]] == ["ISS-2"]
    assert im.listing("solutions") == ["ISS-2-execution.json", "ISS-2-plan.json"]
    assert sample.statuses() == {"ISS-1": "registered", "ISS-2": "completed"}
    assert (state["context"]["failed_count"], state["context"]["success_rate"]) == (1, "50.0")
    report = im.report()
    assert "| Failed | 1 |" in report
    assert "| Pending | 0 |" in report
    assert f"**ISS-1** Nobody could plan this: failed in planning: {issue['error']}" in report
    errors = report.split("## Errors\n\n")[1].split("\n\n")[0]
    assert errors != "None."
    assert f"action-plan: ISS-1 planning failed: {issue['error']}" in errors
    assert im.audit() == []


def test_a_planning_agent_that_is_missing_refuses_the_run(sample: Any, launch: Any) -> None:
    """An issue without a solution file needs the planning agent: when it is not configured the
    run refuses before anything changes, naming the agent, the option and how to configure it."""
    sample.add_issue("ISS-1", "Nobody planned this")
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-2", [_counting("two")])
    im = launch({"plan_tool": "no-such-planner"})

    with pytest.raises(MissingRequirementError) as caught:
        im.run()

    assert caught.value.exit_code == 2
    assert caught.value.missing == [
        "agent 'no-such-planner' (option plan_tool), needed to plan ISS-1 (no solution file in "
        ".workflow/issues/solutions), cannot run: fsm.toml has no [agent.no-such-planner] table "
        "and 'no-such-planner' is not an agent CLI fsm knows (claude, codex, gemini, qwen): add "
        "[agent.no-such-planner] command = [...] to fsm.toml; or set plan_tool to another agent "
        "or write the solution files"
    ]
    assert (im.data["status"], im.data["phase"]) == ("pending", "init")
    assert _ran(sample) == []
    assert [r["kind"] for r in im.journal()] == ["create"]


def test_cyclic_solution_is_rejected_naming_the_cycle(sample: Any, launch: Any) -> None:
    """A solution whose tasks depend on each other in a circle is not queued; the error names
    the cycle and the solution file line; nothing of it runs."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("T1", "T2"), _counting("T2", "T1")])
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-2", [_counting("fine")])
    im = launch()

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    issue = im.data["issues"]["ISS-1"]
    assert issue["status"] == "failed"
    assert issue["error"].endswith("ISS-1.jsonl:1: circular dependency: T1 -> T2 -> T1")
    assert result.message == (
        f"1 of 2 issues done; ISS-1 planning failed: {issue['error']}; {RETRY_HINT}"
    )
    assert [q["issue_id"] for q in im.data["queue"]] == ["ISS-2"]
    assert _ran(sample) == ["fine"]
    assert sample.statuses() == {"ISS-1": "registered", "ISS-2": "completed"}
    assert im.listing("snapshots") == ["snapshot-before-execute-1.json"]
    assert im.listing("solutions") == ["ISS-2-execution.json", "ISS-2-plan.json"]
    assert [r["issue_id"] for r in im.read("execution-results.json")["results"]] == ["ISS-2"]
    assert "| Failed | 1 |" in im.report()
    assert "circular dependency: T1 -> T2 -> T1" in im.report()
    assert im.audit() == []


def test_malformed_issues_line_pauses_naming_the_line_and_loses_nothing(
    sample: Any, launch: Any
) -> None:
    """A line that is not JSON fails the list step, naming file and line; after max_errors
    tries the instance pauses with the issues file untouched; fixed and resumed, it finishes."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    sample.append_line('{"id": "ISS-2", "status": registered}')
    sample.add_issue("ISS-3")
    sample.add_solution("ISS-3", [_counting("three")])
    before = sample.issues_path.read_bytes()
    im = launch()

    result = im.run()

    assert (result.outcome, result.status, result.exit_code) == ("paused", "paused", 5)
    assert [s.outcome for s in result.steps] == ["failed"] * 3
    assert "issues.jsonl:2: not valid JSON" in (result.steps[-1].error or "")
    assert sample.issues_path.read_bytes() == before
    state = im.data
    assert (state["phase"], state["issues"], state["queue"]) == ("init", {}, [])
    where = f"{sample.issues_path}:2: not valid JSON (Expecting value at column 27)"
    assert [(e["action"], e["message"]) for e in state["errors"]] == [("action-init", where)] * 3
    shown = status(im.instance)
    assert shown.control == ["resume", "stop"]
    assert shown.summary["errors"] == "3 recorded; 3 failed steps in a row (limit 3)"
    assert [r["kind"] for r in im.journal()][-3:] == ["error"] * 3

    lines = sample.issues_path.read_text().splitlines()
    lines[1] = '{"id": "ISS-2", "status": "registered"}'
    sample.issues_path.write_text("\n".join(lines) + "\n")
    sample.add_solution("ISS-2", [_counting("two")])
    im.control("resume")
    result = im.run()

    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "3 of 3 issues done",
    )
    assert _ran(sample) == ["one", "two", "three"]
    assert sample.statuses() == dict.fromkeys(["ISS-1", "ISS-2", "ISS-3"], "completed")
    assert im.data["context"]["consecutive_errors"] == 0
    assert len(im.listing("snapshots")) == 3
    assert im.read("execution-results.json")["completed"] == 3
    assert where in im.report()
    assert "| Success rate | 100.0% |" in im.report()
    assert im.audit() == []


def test_new_issues_appended_between_rounds_are_picked_up(sample: Any, launch: Any) -> None:
    """After the queue drains the machine lists again and plans issues added meanwhile."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("first")])
    im = launch()

    first = im.run(max_steps=3)
    assert (first.outcome, first.exit_code) == ("limit", 5)
    assert [s.event for s in first.steps] == ["init", "plan", "execute"]
    sample.add_issue("ISS-2", "Arrived later")
    sample.add_solution("ISS-2", [_counting("second")])
    result = im.run()

    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert [s.event for s in result.steps] == ["list", "plan", "execute", "list", "complete"]
    state = im.data
    assert state["context"]["rounds"] == 3
    assert [(q["item_id"], q["issue_id"]) for q in state["queue"]] == [
        ("S-1", "ISS-1"),
        ("S-2", "ISS-2"),
    ]
    assert _ran(sample) == ["first", "second"]
    assert [h["issues_count"] for h in im.history() if h["phase"] == "listing"] == [1, 2, 2]
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "completed"}
    assert "| Total issues | 2 |" in im.report()
    assert im.audit() == []


def test_every_step_saves_a_valid_document(sample: Any, launch: Any) -> None:
    """Driven one Engine.step at a time, each save validates and adds one history entry."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("a"), command_task("b", "false")])
    sample.add_issue("ISS-2")
    sample.add_issue("ISS-3")
    sample.add_solution("ISS-3", [_counting("c")])
    sample.script_agent("planner", "sys.exit(1)\n")
    im = launch({"plan_tool": "planner"})
    im.control("start")
    engine = Engine(im.instance)
    events: list[str | None] = []
    while (step := engine.step()).outcome != "final":
        assert step.outcome == "applied", step
        events.append(step.event)
        state = im.data
        IssueManagerState.model_validate(state)
        assert state["phase"] == step.state
        assert len(im.history()) == len(im.journal())
        assert im.history()[-1]["phase"] == step.state
        assert len(events) < 20
    assert events == [
        *["init", "plan", "plan", "plan"],
        *["execute", "execute", "list", "fail"],
    ]
    assert im.statuses() == {"ISS-1": "failed", "ISS-2": "failed", "ISS-3": "completed"}
    assert im.audit() == []


@pytest.mark.parametrize(
    "options",
    [pytest.param({}, id="default-path"), pytest.param({"issues_file": "typo.jsonl"}, id="option")],
)
def test_a_missing_issues_file_refuses_the_run_naming_the_path(
    sample: Any, launch: Any, options: dict[str, Any]
) -> None:
    """No issues file where the run looks (by default or by option): the run refuses before
    anything changes, naming the path it looked for and how to give one; never a completion."""
    im = launch(options)
    path = sample.root / options.get("issues_file", ".workflow/issues/issues.jsonl")

    with pytest.raises(MissingRequirementError) as caught:
        im.run()

    (line,) = caught.value.missing
    assert line.startswith(f"no issues file at {path}: create it (")
    assert (im.data["status"], im.data["phase"]) == ("pending", "init")


def test_an_issues_file_removed_mid_run_fails_the_list_step(sample: Any, launch: Any) -> None:
    """The file gone between rounds: the list step fails naming the path (recorded in errors)
    rather than completing as if the backlog were empty."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    im = launch()
    im.run(max_steps=3)
    sample.issues_path.unlink()

    step = Engine(im.instance).step()

    assert (step.outcome, step.event) == ("failed", "list")
    assert f"no issues file at {sample.issues_path}" in (step.error or "")
    assert im.data["errors"][-1]["action"] == "action-list"
    assert im.data["phase"] == "executing"


def test_an_empty_issues_file_is_nothing_to_do(sample: Any, launch: Any) -> None:
    """An issues file with no open issue is a success that says there was nothing to do."""
    sample.issues_path.write_text("")
    sample.add_issue("ISS-9", status="completed")
    im = launch()

    result = im.run()

    assert [s.event for s in result.steps] == ["init", "complete"]
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert result.message == (
        "nothing to do: the issues file lists no open issue (registered or planned)"
    )
    assert im.data["context"]["success_rate"] == "0.0"
    assert "No issues were found." in im.report()
    assert f"- Outcome: completed: {result.message}" in im.report()
    assert im.audit() == []
