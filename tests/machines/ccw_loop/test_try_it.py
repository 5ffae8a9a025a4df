"""The README's "Try it", run with the CLI as a newcomer would, on a machine without any agent.

A project with a passing test suite and a standing task list of bash tasks: the loop completes
without an agent (``fix_tool = "none"``); a failing test then ends a loop failed, naming it; an
agent configured in fsm.toml (here a stand-in for codex) fixes it; without that agent the run
refuses, naming fix_tool and ``fix_tool=none``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop.model import AGENT_TOOLS

CALC = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add, mul\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)
TEST_DIV = "\n\ndef test_div():\n    from calc import div\n\n    assert div(6, 3) == 2\n"
TASKS = (
    '{"task_id": "mul", "description": "Add calc.mul", "tool": "bash", '
    "\"command\": \"grep -q 'def mul' calc.py || echo 'def mul(a, b): return a * b' >> calc.py\"}\n"
    '{"task_id": "check", "description": "Byte-compile calc.py", "tool": "bash", '
    '"command": "python -m py_compile calc.py"}\n'
)
CONFIG = """\
[machine.ccw-loop]
test_command = "python -m pytest -q"
task_list = "tasks.jsonl"
fix_tool = "none"     # no agent yet: a failing test ends the loop, for you to fix
"""
STAND_IN_CODEX = """\
import sys

if "test_div" in sys.argv[1]:
    with open("calc.py", "a") as handle:
        handle.write("\\n\\ndef div(a, b):\\n    return a / b\\n")
"""
AGENT = """
[agent.codex]
command = ["python", "codex_stand_in.py", "{prompt}"]
"""


@pytest.fixture
def newcomer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workspace: PATH has this Python first (as after ``source .venv/bin/activate``) and no
    agent CLI."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    kept = [f for f in folders if not any(shutil.which(t, path=f) for t in AGENT_TOOLS)]
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), *kept]))
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "test_calc.py").write_text(TESTS)
    (tmp_path / "tasks.jsonl").write_text(TASKS)
    (tmp_path / "fsm.toml").write_text(CONFIG)
    return tmp_path


def _run_new_loop(cli: Any, title: str, *options: str) -> tuple[str, Any]:
    created = cli("new", "ccw-loop", "--set", f"title={title}")
    assert created.code == 0, created.err
    loop_id = created.out.strip()
    return loop_id, cli(*options, "run", "ccw-loop", loop_id)


def test_bash_tasks_complete_without_an_agent(cli: Any, newcomer: Path) -> None:
    """fsm new, then fsm run: the bash tasks run, the tests pass, exit 0, and the last line says
    what was done."""
    loop_id, ran = _run_new_loop(cli, "Add mul")
    assert ran.code == 0, ran.err
    assert ran.out.strip().splitlines()[-1] == (
        f"{loop_id}: completed in state 'completed' after 5 steps: all 2 tasks done; "
        "validation passed: 2 tests passed"
    )
    assert "def mul" in (newcomer / "calc.py").read_text()


def test_options_on_the_command_line_do_the_same(cli: Any, newcomer: Path) -> None:
    """The same loop with task_list and fix_tool given as -o instead of in fsm.toml."""
    (newcomer / "fsm.toml").write_text('[machine.ccw-loop]\ntest_command = "python -m pytest -q"\n')
    _, ran = _run_new_loop(cli, "Add mul", "-o", "task_list=tasks.jsonl", "-o", "fix_tool=none")
    assert ran.code == 0, ran.err


def test_failing_test_then_an_agent_fixes_it(cli: Any, newcomer: Path) -> None:
    """A failing test ends a loop without agent failed (exit 4) naming it; with an agent table
    in fsm.toml and fix_tool back to its default, the next loop fixes it (exit 0); without the
    agent the run refuses (exit 2) naming the way out."""
    assert _run_new_loop(cli, "Add mul")[1].code == 0
    with (newcomer / "test_calc.py").open("a") as handle:
        handle.write(TEST_DIV)
    loop_id, ran = _run_new_loop(cli, "Add div")
    assert ran.code == 4, ran.err
    assert ran.out.strip().splitlines()[-1] == (
        f"{loop_id}: failed in state 'failed' after 6 steps: validation failed: 1 test fails "
        "(test_calc.py::test_div); debug confirmed 1 by running it alone (see "
        f".workflow/.loop/{loop_id}.progress/debug.md); no fix agent is configured (fix_tool "
        "none): fix it by hand or set fix_tool"
    )

    config = CONFIG.replace('fix_tool = "none"', 'fix_tool = "codex"')
    (newcomer / "fsm.toml").write_text(config)
    loop_id, refused = _run_new_loop(cli, "Add div")
    assert refused.code == 2
    assert refused.err.startswith(
        f"fsm: error: instance '{loop_id}' cannot run: agent 'codex' (option fix_tool, which "
        "implements fix tasks) cannot run: 'codex' is not on PATH and fsm.toml has no "
        "[agent.codex] table: install it (npm install -g @openai/codex) or add [agent.codex] "
        "command = [...] to fsm.toml"
    )
    assert "-o fix_tool=none" in refused.err

    (newcomer / "codex_stand_in.py").write_text(STAND_IN_CODEX)
    (newcomer / "fsm.toml").write_text(config + AGENT)
    loop_id, fixed = _run_new_loop(cli, "Add div")
    assert fixed.code == 0, fixed.err
    assert fixed.out.strip().splitlines()[-1] == (
        f"{loop_id}: completed in state 'completed' after 8 steps: all 2 tasks done, 1 fix "
        "attempt; validation passed: 3 tests passed"
    )
