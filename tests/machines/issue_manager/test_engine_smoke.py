"""The machine driven through the in-process command line (``fsm new``, ``run``, ``stop``,
``resume``); the scenarios with every file checked are in test_scenarios.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fsm_machines.issue_manager import functions

MACHINE = str(Path(functions.__file__).with_name("machine.yaml"))


def test_cli_runs_a_backlog_to_its_report(sample: Any, cli: Any) -> None:
    """fsm new + fsm run: planned by the agent or from files, executed, reported, written back;
    one issue fails, so the run fails (exit 4) and its last line says what was done and why."""
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
    assert ran.code == 4, ran.err
    last = ran.out.strip().splitlines()[-1]
    assert last.startswith(
        f"{instance_id}: failed in state 'failed' after 7 steps: "
        "1 of 2 issues done; ISS-2 failed: task T1 (t) failed: exited 5: "
    )
    assert last.endswith(
        f"exited 5: exit 5; to retry: fsm retry issue-manager {instance_id} [ISSUE...]"
    )
    work_dir = sample.root / ".workflow" / ".scratchpad" / instance_id
    state = json.loads((work_dir / "state.json").read_text())
    assert (state["status"], state["phase"], state["context"]["success_rate"]) == (
        "failed",
        "failed",
        "50.0",
    )
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "failed"}
    history = json.loads((work_dir / "state-history.json").read_text())
    assert history[0]["phase"] == "init"
    assert history[-1] == history[-1] | {"phase": "failed", "issues_count": 2}
    assert "| Success rate | 50.0% |" in (work_dir / "final-report.md").read_text()


def test_the_report_and_fsm_status_agree(sample: Any, cli: Any) -> None:
    """fsm status (human and --json) and fsm ls --json show the outcome and reason the report
    states, and the status summary counts what the report's Summary table counts."""
    for issue, command in (("ISS-1", "true"), ("ISS-2", "exit 3"), ("ISS-3", "true")):
        sample.add_issue(issue)
        sample.add_solution(issue, [{"id": "T1", "title": "t", "command": command}])
    sample.add_issue("ISS-4")
    sample.add_solution("ISS-4", [{"id": "A", "depends_on": ["A"]}])
    sample.write_fsm_toml()
    instance_id = cli("new", MACHINE).out.strip()
    assert cli("run", MACHINE, instance_id).code == 4
    work_dir = sample.root / ".workflow" / ".scratchpad" / instance_id
    report = (work_dir / "final-report.md").read_text()
    table = dict(re.findall(r"^\| ([A-Za-z ]+) \| ([0-9.]+)%? \|$", report, re.MULTILINE))
    assert table == {
        "Total issues": "4",
        "Completed": "2",
        "Failed": "2",
        "Blocked": "0",
        "Unplanned": "0",
        "Pending": "0",
        "Success rate": "50.0",
        "Errors": "2",
    }
    shown = cli("status", MACHINE, instance_id, "--json")
    assert shown.code == 0, shown.err
    status = json.loads(shown.out)
    outcome = re.search(r"^- Outcome: failed: (.*)$", report, re.MULTILINE)
    assert outcome is not None
    assert (status["outcome"], status["reason"]) == ("failure", outcome.group(1))
    assert status["reason"].startswith("2 of 4 issues done; ISS-2 failed: task T1 (t) failed: ")
    assert "; ISS-4 planning failed: " in status["reason"]
    summary = status["summary"]
    assert summary["issues"] == (
        f"{table['Total issues']} ({table['Completed']} completed, {table['Failed']} failed, "
        f"{table['Pending']} pending)"
    )
    assert summary["errors"].startswith(f"{table['Errors']} recorded;")
    human = cli("status", MACHINE, instance_id)
    assert outcome.group(1) in human.out
    (listed,) = json.loads(cli("ls", "--json").out)
    assert (listed["outcome"], listed["reason"]) == ("failure", outcome.group(1))


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
