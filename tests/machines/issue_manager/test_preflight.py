"""The preflight check on the real engine: a run refuses, with nothing changed, when something
it will need is missing, and names only what it will need."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fsm_machines.issue_manager.model import IssueManagerState

from fsm.base.errors import MissingRequirementError
from fsm.engine.instance import Workspace
from tests.machines.issue_manager.conftest import Launched, agent_task, command_task


def _refused(im: Any) -> list[str]:
    """The missing requirements a run of ``im`` refuses with; the instance must be untouched."""
    before = im.data
    with pytest.raises(MissingRequirementError) as caught:
        im.run()
    assert im.data == before
    return list(caught.value.missing)


def test_a_missing_execution_agent_refuses_the_run(sample: Any, launch: Any) -> None:
    """A solution task without a command needs the execution agent: not configured, the run
    refuses naming the agent, the option, the issue and how to configure it."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [command_task("T1", "true"), agent_task("T2", "Edit", "T1")])
    im = launch({"execute_tool": "no-such-doer"})

    assert _refused(im) == [
        "agent 'no-such-doer' (option execute_tool), needed to run the tasks without a command "
        "of ISS-1, cannot run: fsm.toml has no [agent.no-such-doer] table and 'no-such-doer' "
        "is not an agent CLI fsm knows (claude, codex, gemini, qwen): add "
        "[agent.no-such-doer] command = [...] to fsm.toml; or set execute_tool to another agent"
    ]
    assert not (sample.root / "ran.txt").exists()


def test_missing_bash_refuses_a_run_with_task_commands(
    sample: Any, launch: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task commands run through bash: with no bash on PATH the run refuses, saying so."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [command_task("T1", "true")])
    im = launch()
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    assert _refused(im) == [
        "program 'bash' is not available: the task commands of ISS-1 run through bash; install "
        "bash or put it on PATH"
    ]


def test_every_missing_requirement_is_one_line(sample: Any, launch: Any) -> None:
    """Planning and execution agents both missing: one line each, planned issues named."""
    for issue in ("ISS-1", "ISS-2"):
        sample.add_issue(issue)
    sample.add_solution("ISS-2", [agent_task("T1", "Edit")])
    im = launch({"plan_tool": "planner-x", "execute_tool": "doer-x"})

    missing = _refused(im)

    assert [line.split(", needed")[0] for line in missing] == [
        "agent 'planner-x' (option plan_tool)",
        "agent 'doer-x' (option execute_tool)",
    ]
    assert "to plan ISS-1 (no solution file in .workflow/issues/solutions)" in missing[0]
    assert "without a command of ISS-2, cannot run:" in missing[1]


def test_agents_that_will_not_be_needed_are_not_required(sample: Any, launch: Any) -> None:
    """Every issue has a solution file of command tasks: the unconfigured agents are not needed,
    so the run goes ahead."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [command_task("T1", "true")])
    im = launch({"plan_tool": "planner-x", "execute_tool": "doer-x"})

    result = im.run()

    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "1 of 1 issues done",
    )


def test_a_queued_item_needing_a_removed_agent_refuses_the_next_run(
    sample: Any, launch: Any
) -> None:
    """The check covers the work left in the queue: an agent removed from fsm.toml between two
    runs refuses the second one instead of failing the item."""
    sample.add_issue("ISS-1")
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-1", [command_task("T1", "true")])
    sample.add_solution("ISS-2", [agent_task("T1", "Edit")])
    sample.script_agent("doer", "print('edited')\n")
    im = launch({"execute_tool": "doer"})
    first = im.run(max_steps=4)
    assert [s.event for s in first.steps] == ["init", "plan", "plan", "execute"]
    sample.agents.clear()
    sample.write_fsm_toml(execute_tool="doer")
    workspace = Workspace(sample.root)
    reopened = Launched(workspace.instance(im.instance.machine, im.id), IssueManagerState)

    (line,) = _refused(reopened)

    assert line.startswith("agent 'doer' (option execute_tool), needed")
    assert "ISS-2" in line
