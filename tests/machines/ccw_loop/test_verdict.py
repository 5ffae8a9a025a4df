"""The outcome hook (what an ended loop achieved) and the preflight (what a run needs first)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.model import LoopState
from fsm_machines.ccw_loop.options import LoopOptions
from fsm_machines.ccw_loop.verdict import program_of

from fsm.base.errors import MissingRequirementError
from fsm.view.inspect import status
from tests.machines.ccw_loop.conftest import LOOP_ID

BASH = {"task_id": "t1", "description": "run it", "tool": "bash", "mode": "write", "order": 0}
ADD_MUL = {**BASH, "command": "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py"}


def _path_without(tool: str) -> str:
    """PATH without any folder that holds ``tool``."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if shutil.which(tool, path=f) is None)


def test_readme_block_refuses_without_codex(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's "Try it on your own project", on a machine without codex and without
    fsm.toml: fsm run refuses (exit 2) before doing anything, naming codex and how to configure
    it; the loop stays created, with no progress files."""
    monkeypatch.setenv("PATH", _path_without("codex"))
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    created = cli(
        "new", "ccw-loop", "--set", "title=Fix the parser", "--set", "description=Make it pass"
    )
    assert created.code == 0, created.err
    loop_id = created.out.strip()
    ran = cli("run", "ccw-loop", loop_id)
    assert ran.code == 2
    assert "agent 'codex' (option fix_tool, which implements fix tasks; task task-001)" in ran.err
    assert "'codex' is not on PATH and fsm.toml has no [agent.codex] table" in ran.err
    assert "npm install -g @openai/codex" in ran.err
    assert "-o fix_tool=NAME" in ran.err
    assert "-o fix_tool=none" in ran.err
    raw = json.loads((tmp_path / ".workflow" / ".loop" / f"{loop_id}.json").read_text())
    assert (raw["status"], raw.get("skill_state")) == ("created", None)
    assert not (tmp_path / ".workflow" / ".loop" / f"{loop_id}.progress").exists()


def test_preflight_names_every_missing_requirement(loop_ws: Any, started: Any) -> None:
    """Each missing agent (with the tasks or option that need it), a bash task without command
    and a test runner that is not installed is one line saying how to provide it."""
    loop_ws.write_project()
    path = loop_ws.write_tasks(
        [
            {**ADD_MUL, "tool": "qwen"},
            {**BASH, "task_id": "t2"},
            {**ADD_MUL, "task_id": "t3"},
        ]
    )
    loop = started(fix_tool="gemini", test_command="no-such-runner-xyz -q")
    missing = functions.check_requirements(loop.doc, loop.context(LoopOptions))
    source = path.relative_to(loop_ws.root).as_posix()
    assert missing == [
        f'task t2 (tool bash) has no command: add "command" to its line in {source}',
        "agent 'gemini' (option fix_tool, which implements fix tasks) cannot run: 'gemini' is "
        "not on PATH and fsm.toml has no [agent.gemini] table: install it (npm install -g "
        "@google/gemini-cli) or add [agent.gemini] command = [...] to fsm.toml; or choose "
        "another agent with -o fix_tool=NAME (qwen, codex, claude), or run without a fix agent "
        "with -o fix_tool=none (when every task is a bash command; a failing test then ends the "
        "loop for you to fix)",
        "agent 'qwen' (task t1) cannot run: 'qwen' is not on PATH and fsm.toml has no "
        "[agent.qwen] table: install it (npm install -g @qwen-code/qwen-code) or add "
        "[agent.qwen] command = [...] to fsm.toml",
        "program 'no-such-runner-xyz' of test_command 'no-such-runner-xyz -q' is not available: "
        "install it, put it on PATH, or set test_command in [machine.ccw-loop] of fsm.toml or "
        "give -o test_command=...",
    ]


def test_refused_run_changes_nothing(loop_ws: Any, started: Any) -> None:
    """A run that lacks an agent raises MissingRequirementError before the first step: the
    document and the journal are as they were."""
    loop_ws.write_project()
    loop_ws.write_tasks([{**ADD_MUL, "tool": "claude"}])
    loop = started()
    before = loop.data
    records = len(loop.instance.journal.read().records)
    with pytest.raises(MissingRequirementError, match="agent 'claude' \\(task t1\\)"):
        loop.run()
    assert loop.data == before
    assert len(loop.instance.journal.read().records) == records


def test_tasks_still_in_the_file_are_checked_on_resume(loop_ws: Any, started: Any) -> None:
    """A task added to the task list after init is checked before the run that would develop
    it; tasks already done are not."""
    loop_ws.write_project()
    path = loop_ws.write_tasks([ADD_MUL])
    loop = started()
    loop.step()
    assert functions.check_requirements(loop.doc, loop.context(LoopOptions)) == []
    with path.open("a") as handle:
        handle.write(json.dumps({**BASH, "task_id": "t9", "tool": "qwen"}) + "\n")
    assert [
        line.split(" cannot run")[0]
        for line in functions.check_requirements(loop.doc, loop.context(LoopOptions))
    ] == ["agent 'qwen' (task t9)"]


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("python -m pytest", "python"),
        ("FOO=1 BAR=2 pytest -q", "pytest"),
        ("cd sub && pytest", None),
        ("~/bin/run-tests --fast", str(Path.home() / "bin" / "run-tests")),
        ("$HOME/x/y {junit}", os.environ["HOME"] + "/x/y"),
        ("./run-tests.sh", "./run-tests.sh"),
    ],
    ids=["python", "env-assignments", "shell-builtin", "tilde", "variable", "relative"],
)
def test_program_of_the_test_command(command: str, program: str | None) -> None:
    """The program is the first word bash would run, expanded as bash expands it."""
    assert program_of(command) == program


def test_unsplittable_test_command_is_reported(loop_ws: Any, started: Any) -> None:
    """A test_command with an unbalanced quote is a missing requirement, not a crash."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    loop = started(test_command="pytest 'unbalanced")
    (line,) = functions.check_requirements(loop.doc, loop.context(LoopOptions))
    assert line.startswith('test_command "pytest \'unbalanced" cannot be split into words')


def _ended(loop_ws: Any, **changes: Any) -> LoopState:
    raw = json.loads((loop_ws.state_dir / f"{LOOP_ID}.json").read_text())
    raw.update(changes)
    return LoopState.model_validate(raw)


def test_completed_loop_has_a_specific_success_reason(loop_ws: Any, started: Any) -> None:
    """A completed loop's verdict is a success saying what was done; run, status and the
    document agree."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL, {**ADD_MUL, "task_id": "t2", "command": "true"}])
    loop = started()
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    reason = "all 2 tasks done; validation passed: 2 tests passed"
    assert result.message == reason
    shown = status(loop.instance)
    assert (shown.outcome, shown.reason) == ("success", reason)
    assert functions.judge_outcome(loop.doc).reason == reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda raw: raw["skill_state"]["develop"]["tasks"][0].update(status="failed"),
            "status says completed, but task t1 (failed) failed; a failed task is not retried",
        ),
        (
            lambda raw: raw["skill_state"]["develop"]["tasks"][0].update(status="pending"),
            "status says completed, but task t1 was never developed",
        ),
        (
            lambda raw: raw["skill_state"]["validate"].update(passed=False),
            "status says completed, but the last validation did not pass",
        ),
        (
            lambda raw: raw["skill_state"]["completed_actions"].append("DEVELOP"),
            "status says completed, but the last changes were never validated",
        ),
        (lambda raw: raw.update(skill_state=None), "status says completed, but the loop never ran"),
    ],
    ids=["failed-task", "pending-task", "failed-validation", "unvalidated-change", "never-ran"],
)
def test_completed_status_without_the_goal_is_a_failure(
    loop_ws: Any, started: Any, change: Any, reason: str
) -> None:
    """A document whose status says completed (the dashboard's PATCH /status can write it) but
    whose tasks or validation say otherwise is judged a failure naming what is missing."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    loop = started()
    assert loop.run().outcome == "completed"
    raw = loop.data
    change(raw)
    verdict = functions.judge_outcome(LoopState.model_validate(raw))
    assert (verdict.success, verdict.reason) == (False, reason)


def test_stopped_and_exited_loops_are_failures(loop_ws: Any, started: Any) -> None:
    """A stop is a failure with the dashboard's reason; a user exit says how far the loop got."""
    loop_ws.write_tasks([ADD_MUL])
    loop = started()
    loop.control("stop")
    assert functions.judge_outcome(loop.doc).reason == "Manually stopped by user"
    exited = functions.judge_outcome(_ended(loop_ws, status="user_exit", failure_reason=None))
    assert (exited.success, exited.reason) == (False, "exited from the menu: nothing was done")
