"""The machine driven through the in-process command line (``fsm new``, ``run``, ``stop``,
``resume``); the scenarios with every file checked are in test_scenarios.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from machines.issue_manager import functions

MACHINE = str(Path(functions.__file__).with_name("machine.yaml"))


def test_cli_runs_a_backlog_to_its_report(sample: Any, cli: Any) -> None:
    """fsm new + fsm run: planned by the agent or from files, executed, reported, written back."""
    sample.add_issue("ISS-1", "From a file")
    sample.add_solution("ISS-1", [{"id": "T1", "title": "t", "command": "echo 1 >> ran.txt"}])
    sample.add_issue("ISS-2", "From the agent")
    sample.planning_agent("planner", [{"id": "T1", "title": "t", "command": "exit 5"}])
    sample.write_fsm_toml(plan_tool="planner", execute_tool="planner")
    created = cli("new", MACHINE, "--set", "context.max_rounds=2")
    assert created.code == 0, created.err
    instance_id = created.out.strip()
    assert instance_id.startswith("issue-manager-")
    ran = cli("run", MACHINE, instance_id)
    assert ran.code == 0, ran.err
    work_dir = sample.root / ".workflow" / ".scratchpad" / instance_id
    state = json.loads((work_dir / "state.json").read_text())
    assert (state["status"], state["phase"], state["context"]["success_rate"]) == (
        "completed",
        "complete",
        "50.0",
    )
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "failed"}
    history = json.loads((work_dir / "state-history.json").read_text())
    assert history[0]["phase"] == "init"
    assert history[-1] == history[-1] | {"phase": "complete", "issues_count": 2}
    assert "| Success rate | 50.0% |" in (work_dir / "final-report.md").read_text()


def test_cli_stop_then_resume_continues(sample: Any, cli: Any) -> None:
    """A stopped instance is not restarted by run; resume lets run finish it."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [{"id": "T1", "title": "t", "command": "echo 1 >> ran.txt"}])
    instance_id = cli("new", MACHINE).out.strip()
    assert cli("run", MACHINE, instance_id, "--max-steps", "2").code == 5
    assert cli("stop", MACHINE, instance_id).code == 0
    assert cli("run", MACHINE, instance_id).code == 5
    assert cli("resume", MACHINE, instance_id).code == 0
    assert cli("run", MACHINE, instance_id).code == 0
    assert (sample.root / "ran.txt").read_text().split() == ["1"]
