"""Hostile input files and configured secrets, on the real engine: ids from the issues and
solution files never become paths outside their folders, and tokens in fsm.toml agent commands
never reach the files the machine and the engine write."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fsm.process.executor import AgentCommand
from tests.machines.issue_manager.conftest import RETRY_HINT, command_task

SECRET = "s3cret-token-0123456789"
OTHER_SECRET = "other-s3cret-abcdef"


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def test_an_issue_id_that_climbs_out_never_touches_a_path(
    sample: Any, launch: Any, tmp_path: Path
) -> None:
    """An issue id ``../../../../<dir>/x`` whose solution file path leads outside the workspace
    is failed as unsafe: its solution there is not read or run, nothing is written outside the
    workspace, the other issue completes, and the run fails naming the id."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    issue_id = f"../../../../{outside.name}/x"
    escaped = (sample.solutions_dir / f"{issue_id}.jsonl").resolve()
    assert escaped.parent == outside.resolve()
    outside.mkdir()
    solution = {
        "id": f"SOL-{issue_id}-1",
        "tasks": [command_task("T1", f"touch {outside / 'ran'}")],
    }
    escaped.write_text(json.dumps(solution) + "\n")
    sample.add_issue(issue_id, "Climbs out")
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-2", [command_task("T1", "true")])
    before_outside = _files_under(outside)
    im = launch()

    result = im.run()

    assert _files_under(outside) == before_outside
    assert list(sample.root.rglob("x-*.json")) == []
    assert (result.outcome, result.exit_code) == ("failed", 4)
    state = im.data
    issue = state["issues"][issue_id]
    expected = (
        f"unsafe issue id '{issue_id}': use letters, digits, '.', '_' and '-', starting with a "
        "letter or digit, without '..'"
    )
    assert (issue["status"], issue["error"]) == ("failed", expected)
    assert result.message == f"1 of 2 issues done; {expected}; {RETRY_HINT}"
    assert state["issues"]["ISS-2"]["status"] == "completed"
    assert [(e["action"], e["issue_id"]) for e in state["errors"]] == [("action-list", issue_id)]
    assert f"action-list: {expected}" in im.report()
    assert im.listing("solutions") == ["ISS-2-execution.json", "ISS-2-plan.json"]
    assert im.audit() == []


def test_an_unsafe_task_id_in_a_solution_fails_its_planning(sample: Any, launch: Any) -> None:
    """Task ids of a solution file are checked like issue ids: an unsafe one fails the issue's
    planning with the reason, and none of that solution runs."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [command_task("../T1", "touch ran")])
    im = launch()

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    error = im.data["issues"]["ISS-1"]["error"]
    assert error.endswith(
        "tasks.0.id: unsafe task id '../T1': use letters, digits, '.', '_' and '-', starting "
        "with a letter or digit, without '..'"
    )
    assert not (sample.root / "ran").exists()


def _secret_agent(sample: Any, tool: str, body: str) -> None:
    """An agent whose fsm.toml command carries a token in an env assignment and an option."""
    script = sample.root / f"agent_{tool}.py"
    script.write_text("import os, sys\nprompt = sys.argv[-1]\n" + body, encoding="utf-8")
    sample.agents[tool] = AgentCommand(
        (
            "env",
            f"AGENT_TOKEN={SECRET}",
            sys.executable,
            str(script),
            f"--api-key={OTHER_SECRET}",
            "{prompt}",
        )
    )


def test_agent_secrets_never_reach_the_written_files(sample: Any, launch: Any) -> None:
    """Tokens in agent commands (and echoed back by a failing agent) are absent from state.json,
    state-history.json, the report, execution records, summaries, journal and log: the tool and
    a redacted command are recorded instead."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [{"id": "T1", "title": "edit", "prompt": "Edit it"}])
    sample.add_issue("ISS-2")
    _secret_agent(
        sample,
        "planner",
        "sys.stderr.write('token ' + os.environ['AGENT_TOKEN'] + ' was rejected\\n')\n"
        "sys.exit(3)\n",
    )
    _secret_agent(
        sample,
        "doer",
        "print('used', os.environ['AGENT_TOKEN'], sys.argv[1])\n"
        "sys.stderr.write('rejected ' + sys.argv[1] + '\\n')\n"
        "sys.exit(2)\n",
    )
    im = launch({"plan_tool": "planner", "execute_tool": "doer"})

    result = im.run()

    assert (result.outcome, result.exit_code) == ("failed", 4)
    leaks = [
        str(path.relative_to(sample.root))
        for path in _files_under(sample.root / ".workflow")
        if SECRET in path.read_text(errors="replace") or OTHER_SECRET in path.read_text()
    ]
    assert leaks == []
    assert SECRET not in result.message and OTHER_SECRET not in result.message
    issues = im.data["issues"]
    # only the secrets are masked: the program and its script are what a reader needs
    doer = f"env AGENT_TOKEN=*** {sys.executable} {sample.root / 'agent_doer.py'}"
    planner = f"env AGENT_TOKEN=*** {sys.executable} {sample.root / 'agent_planner.py'}"
    # descriptions show at most 120 characters of the command (the test's folder varies)
    assert issues["ISS-1"]["error"].startswith(
        f"task T1 (edit) failed: agent 'doer' exited 2: {doer[:60]}"
    )
    assert issues["ISS-1"]["error"].endswith(" (rejected --api-key=***)")
    assert issues["ISS-2"]["error"].startswith(f"planning agent 'planner' exited 3: {planner[:60]}")
    assert issues["ISS-2"]["error"].endswith(" (token *** was rejected)")
    (task,) = im.read("solutions/ISS-1-execution.json")["execution_result"]["tasks"]
    assert (task["via"], task["command"]) == ("agent:doer", f"{doer} --api-key=*** {{prompt}}")
