"""Loops without a fix agent (``fix_tool`` none): bash tasks on a machine with no agent CLI."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.model import AGENT_TOOLS
from fsm_machines.ccw_loop.options import LoopOptions

from fsm.base.errors import MissingRequirementError
from fsm.model.outcome import Choice, Verdict
from fsm.view.inspect import status
from tests.machines.ccw_loop.conftest import IDLE_AGENT, LOOP_ID

ADD_MUL = {
    "task_id": "t1",
    "description": "Add mul to calc",
    "tool": "bash",
    "command": "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py",
}
TEST_MUL = {
    "task_id": "t2",
    "description": "Test mul",
    "tool": "bash",
    "command": "printf 'from calc import mul\\n\\n\\ndef test_mul():\\n"
    "    assert mul(2, 3) == {product}\\n' > tests/test_mul.py",
}
DEBUG_MD = f".workflow/.loop/{LOOP_ID}.progress/debug.md"


@pytest.fixture(autouse=True)
def _no_agent_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without any folder holding an agent CLI (codex, claude, gemini, qwen)."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    kept = [f for f in folders if not any(shutil.which(t, path=f) for t in AGENT_TOOLS)]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
    assert shutil.which("bash") is not None


def _test_mul(product: int) -> dict[str, str]:
    return {**TEST_MUL, "command": TEST_MUL["command"].format(product=product)}


def test_bash_loop_without_any_agent_completes(loop_ws: Any, started: Any) -> None:
    """With fix_tool none and no agent anywhere, the preflight asks for nothing, the bash tasks
    run and the passing validation completes the loop (exit 0)."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL, _test_mul(6)])
    loop = started(agents={}, fix_tool="none")
    assert functions.check_requirements(loop.doc, loop.context(LoopOptions)) == []
    result = loop.run()
    reason = "all 2 tasks done; validation passed: 3 tests passed"
    assert (result.outcome, result.exit_code, result.message) == ("completed", 0, reason)
    assert loop.events() == ["init", "develop", "develop", "validate", "complete"]
    assert loop.doc.status == "completed"
    loop.assert_consistent()


def test_failing_tests_without_fix_agent_end_failed_naming_them(loop_ws: Any, started: Any) -> None:
    """Tests that debug confirms end the loop failed at once, without a fix task: the reason
    names them, where debug's evidence is, and what to do; run, status, outcome hook and the
    document agree."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL, _test_mul(7)])
    loop = started(agents={}, fix_tool="none")
    result = loop.run()
    reason = (
        "validation failed: 2 tests fail (tests/test_calc.py::test_add, "
        "tests/test_mul.py::test_mul); debug confirmed 2 by running them alone (see "
        f"{DEBUG_MD}); no fix agent is configured (fix_tool none): fix them by hand or set "
        "fix_tool"
    )
    assert (result.outcome, result.exit_code, result.message) == ("failed", 4, reason)
    assert loop.events() == ["init", "develop", "develop", "validate", "debug", "hand_over"]
    doc = loop.doc
    assert (doc.status, doc.failure_reason) == ("failed", reason)
    assert functions.judge_outcome(doc) == Verdict(False, reason)
    shown = status(loop.instance)
    assert (shown.outcome, shown.reason) == ("failure", reason)
    state = doc.skill_state
    assert state is not None
    assert [t.id for t in state.develop.tasks] == ["t1", "t2"]
    assert [h.status for h in state.debug.hypotheses] == ["confirmed", "confirmed"]
    assert "test_add" in (loop_ws.root / DEBUG_MD).read_text()
    assert "tests fail, no fix agent" in loop_ws.progress("summary.md").read_text()
    loop.assert_consistent()


def test_one_failing_test_is_named_in_the_singular(loop_ws: Any, started: Any) -> None:
    """One confirmed failure: "1 test fails ... fix it by hand"."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL])
    result = started(agents={}, fix_tool="none").run()
    assert result.message == (
        "validation failed: 1 test fails (tests/test_calc.py::test_add); debug confirmed 1 by "
        f"running it alone (see {DEBUG_MD}); no fix agent is configured (fix_tool none): fix it "
        "by hand or set fix_tool"
    )


def test_flaky_failure_without_fix_agent_is_validated_again(loop_ws: Any, started: Any) -> None:
    """A failure that debug finds flaky (it passes alone) does not end the loop: the next
    validation passes and the loop completes."""
    loop_ws.write_project()
    (loop_ws.root / "tests" / "test_flaky.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_once():\n"
        "    marker = Path('flaky.marker')\n"
        "    if not marker.exists():\n"
        "        marker.write_text('x')\n"
        "        raise AssertionError('first run fails')\n"
    )
    loop_ws.write_tasks([{**ADD_MUL, "command": "true"}])
    loop = started(agents={}, fix_tool="none")
    assert loop.run().outcome == "completed"
    assert loop.events() == ["init", "develop", "validate", "debug", "validate", "complete"]


def test_failure_debug_cannot_judge_ends_failed(
    loop_ws: Any, started: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing test debug cannot re-run alone (inconclusive) is not flaky either: without a
    fix agent the loop ends failed after that debug round instead of validating again."""
    loop_ws.write_project(bug=True)
    runner = loop_ws.root / "run-tests"
    runner.write_text(
        f'#!/bin/sh\nexec {sys.executable} -m pytest -q -p no:cacheprovider --junitxml="$1"\n'
    )
    runner.chmod(0o755)
    # the python that would re-run a test of this script alone cannot run pytest here
    loop_ws.bin_dir.mkdir()
    (loop_ws.bin_dir / "python").write_text(
        "#!/bin/sh\necho 'No module named pytest' >&2\nexit 1\n"
    )
    (loop_ws.bin_dir / "python").chmod(0o755)
    monkeypatch.setenv("PATH", f"{loop_ws.bin_dir}{os.pathsep}{os.environ['PATH']}")
    loop_ws.write_tasks([{**ADD_MUL, "command": "true"}])
    loop = started(agents={}, fix_tool="none", test_command="./run-tests {junit}")
    result = loop.run()
    assert loop.events() == ["init", "develop", "validate", "debug", "hand_over"]
    state = loop.doc.skill_state
    assert state is not None
    assert [h.status for h in state.debug.hypotheses] == ["inconclusive"]
    assert result.message == (
        "validation failed: 1 test fails (tests/test_calc.py::test_add); no fix agent is "
        "configured (fix_tool none): fix it by hand or set fix_tool"
    )


@pytest.mark.parametrize(
    ("max_iterations", "last", "ending"),
    [
        (4, "hand_over", "validation failed: 1 test fails"),
        (
            3,
            "exhaust",
            "Reached max_iterations (3) without a passing validation (still failing: "
            "tests/test_calc.py::test_add): a debug round and the validation after it need 2 "
            "iterations, 1 left",
        ),
    ],
    ids=["debug-fits", "debug-does-not-fit"],
)
def test_debug_without_fix_agent_reserves_no_fix(
    loop_ws: Any, started: Any, max_iterations: int, last: str, ending: str
) -> None:
    """Without a fix agent a debug round needs 2 iterations (itself and a validation), not 3: it
    runs with 2 left; with 1 left the limit's reason says what did not fit."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL])
    loop = started(agents={}, fix_tool="none", fields={"max_iterations": max_iterations})
    result = loop.run()
    assert (result.outcome, loop.events()[-1]) == ("failed", last)
    assert (result.message or "").startswith(ending)


def test_preflight_names_a_task_without_tool(loop_ws: Any, started: Any) -> None:
    """With fix_tool none a task that names no tool cannot run: the preflight says so (and asks
    for no agent), and the run refuses with the loop unchanged."""
    loop_ws.write_project()
    path = loop_ws.write_tasks([ADD_MUL, {"task_id": "t2", "description": "Refactor calc"}])
    loop = started(agents={}, fix_tool="none")
    source = path.relative_to(loop_ws.root).as_posix()
    assert functions.check_requirements(loop.doc, loop.context(LoopOptions)) == [
        f"task t2 in {source} names no tool and fix_tool is none: give the task a tool "
        '("tool": "bash" with a "command", or an agent) or set fix_tool'
    ]
    before = loop.data
    with pytest.raises(MissingRequirementError, match=r"task t2 in .* names no tool"):
        loop.run()
    assert loop.data == before


def test_preflight_names_a_loop_without_task_list(loop_ws: Any, started: Any) -> None:
    """A loop without task list develops its description with fix_tool: with none, the
    preflight says to give it a task list or set fix_tool."""
    loop_ws.write_project()
    loop = started(agents={}, fix_tool="none")
    assert functions.check_requirements(loop.doc, loop.context(LoopOptions)) == [
        "the loop has no task list, so its description is its one task (task-001), for "
        "fix_tool, and fix_tool is none: give the loop a task list (option task_list, or "
        f".workflow/.loop/{LOOP_ID}.tasks.jsonl) or set fix_tool"
    ]


def test_task_without_tool_stepped_past_the_preflight_fails(loop_ws: Any, started: Any) -> None:
    """fsm step does not run the preflight: the tool-less task is a failed task saying why, and
    the loop ends failed naming it."""
    loop_ws.write_project()
    loop_ws.write_tasks([{"task_id": "t2", "description": "Refactor calc"}])
    loop = started(agents={}, fix_tool="none")
    assert [loop.step().event, loop.step().event] == ["init", "develop"]
    state = loop.doc.skill_state
    assert state is not None
    (task,) = state.develop.tasks
    error = "the task names no tool and fix_tool is none: give it a tool or set fix_tool"
    assert (task.status, task.extra("error")) == ("failed", error)
    result = loop.run()
    assert (result.outcome, result.message) == (
        "failed",
        f"Task t2 ({error}) failed; a failed task is not retried",
    )


@pytest.mark.parametrize(("fix_tool", "offered"), [("none", False), ("codex", True)])
def test_menu_offers_a_fix_only_with_a_fix_agent(
    loop_ws: Any, fix_tool: str, offered: bool
) -> None:
    """In interactive mode a confirmed failing test is offered a fix only when fix_tool is an
    agent."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL])
    loop_ws.new_loop()
    loop = loop_ws.open(interactive=True, agents={"codex": IDLE_AGENT}, fix_tool=fix_tool)
    menus: list[list[str]] = []
    script = ["develop", "validate", "debug"]

    def choose(state: str, choices: Sequence[Choice]) -> str | None:
        menus.append([c.event for c in choices])
        return script.pop(0) if script else None

    assert loop.run(chooser=choose).outcome == "waiting"
    assert ("fix" in menus[-1]) is offered
    assert "validate" in menus[-1]


def test_default_fix_tool_is_codex(loop_ws: Any, started: Any) -> None:
    """Without the option the loop needs codex and says how to run without it."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    loop = started(agents={})
    (line,) = functions.check_requirements(loop.doc, loop.context(LoopOptions))
    assert line.startswith("agent 'codex' (option fix_tool, which implements fix tasks)")
    assert "-o fix_tool=none" in line
