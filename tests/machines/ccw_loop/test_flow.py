"""Whole loops on sample workspaces, driven by the real engine: one scenario per path of the issue.

All tasks pass first time; a bug is debugged, fixed by the agent and validated; validation never
passes (iteration limit); actions keep failing (error limit); a flaky test is rejected and
re-validated; pause and resume; stop from created, running and paused; interactive mode with its
menu and exit. Every scenario checks each document version the engine wrote against ``LoopState``
and that the journal replays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from fsm_machines.ccw_loop.model import LoopState

from fsm.base.errors import EventNotAllowedError
from fsm.model.outcome import Choice
from tests.machines.ccw_loop.conftest import FILE_SYNC, LOOP_ID

ADD_MUL = {
    "task_id": "task-1",
    "description": "Add mul to calc",
    "tool": "bash",
    "mode": "write",
    "prompt_template": "",
    "order": 0,
    "command": "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py",
}
TEST_MUL = {
    "task_id": "task-2",
    "description": "Test mul",
    "tool": "bash",
    "mode": "write",
    "prompt_template": "",
    "order": 1,
    "command": "printf 'from calc import mul\\n\\n\\n"
    "def test_mul():\\n    assert mul(2, 3) == 6\\n'"
    " > tests/test_mul.py",
}
WITHOUT_DEBUG = ("develop.md", "validate.md", "changes.log", "summary.md")


@pytest.mark.parametrize("created_by", ["dashboard", "fsm-new"])
def test_all_tasks_pass_first_time(loop_ws: Any, created_by: str) -> None:
    """Tasks develop one per step, validation passes once, and the loop completes."""
    loop_ws.write_project()
    loop_ws.write_tasks([TEST_MUL, ADD_MUL])
    loop = loop_ws.open()
    if created_by == "dashboard":
        loop_ws.new_loop()
    else:
        loop.instance.create({"title": "Sample loop", "description": "Add mul"})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert loop.events() == ["init", "develop", "develop", "validate", "complete"]
    doc = loop.doc
    assert (doc.status, doc.current_iteration) == ("completed", 3)
    state = doc.skill_state
    assert state is not None
    assert [t.id for t in state.develop.tasks] == ["task-1", "task-2"]
    assert [t.files_changed for t in state.develop.tasks] == [["calc.py"], ["tests/test_mul.py"]]
    assert state.validate_.passed
    assert len(state.validate_.test_results) == 3
    assert state.summary is not None
    assert state.completed_actions == ["DEVELOP", "DEVELOP", "VALIDATE", "COMPLETE"]
    assert loop_ws.missing_progress(*WITHOUT_DEBUG) == []
    loop.assert_consistent()


def test_bug_is_debugged_fixed_and_validated(loop_ws: Any) -> None:
    """A failing test is confirmed by debug, the fix agent repairs it, and validation passes."""
    loop_ws.write_project(bug=True)
    agent = loop_ws.write_agent(loop_ws.fix_add)
    loop_ws.write_tasks([ADD_MUL])
    loop_ws.new_loop()
    loop = loop_ws.open(agents={"codex": agent})
    assert loop.run().outcome == "completed"
    assert loop.events() == ["init", "develop", "validate", "debug", "fix", "validate", "complete"]
    state = loop.doc.skill_state
    assert state is not None
    assert state.debug.confirmed_hypothesis == "H1"
    assert [h.status for h in state.debug.hypotheses] == ["confirmed"]
    fix = state.develop.tasks[-1]
    assert (fix.id, fix.tool, fix.status, fix.files_changed) == (
        "fix-H1",
        "codex",
        "completed",
        ["calc.py"],
    )
    assert fix.extra("fixes") == "H1"
    assert "test_calc.py::test_add" in loop_ws.agent_calls()[0].text
    assert loop.doc.status == "completed"
    assert loop_ws.progress("debug.log").read_text().count("\n") == 1
    assert loop_ws.missing_progress(*FILE_SYNC) == []
    loop.assert_consistent()


def test_validation_never_passing_ends_failed_at_the_limit(loop_ws: Any, started: Any) -> None:
    """Without a working fix the loop ends failed at max_iterations, with its summary written."""
    loop_ws.write_project(bug=True)
    # develops the description task (writes notes), then makes fixes that miss the bug
    agent = loop_ws.write_agent({"when": "Task task-001", "file": "notes.txt", "write": "plan\n"})
    loop = started(agents={"codex": agent}, fields={"max_iterations": 5})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop", "validate", "debug", "fix", "exhaust"]
    doc = loop.doc
    assert (doc.status, doc.current_iteration) == ("failed", 4)
    assert (doc.failure_reason or "").startswith(
        "Reached max_iterations (5) without a passing validation"
    )
    assert doc.completed_at is not None
    assert doc.skill_state is not None and doc.skill_state.summary is not None
    assert "Outcome: failed" in loop_ws.progress("summary.md").read_text()
    assert loop_ws.missing_progress(*FILE_SYNC) == []
    loop.assert_consistent()


def test_consecutive_action_failures_end_failed(loop_ws: Any, started: Any) -> None:
    """A test command that writes no report fails validate and debug in a row until
    max_errors."""
    loop_ws.write_tasks([{**ADD_MUL, "command": "true"}])
    loop = started(test_command="false {junit}", max_errors=3)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop", "validate", "debug", "validate", "give_up"]
    doc = loop.doc
    assert doc.status == "failed"
    assert doc.skill_state is not None
    assert (doc.skill_state.consecutive_errors, doc.skill_state.max_errors) == (3, 3)
    assert "3 consecutive action failures (max_errors 3)" in (doc.failure_reason or "")
    assert [e.action for e in doc.skill_state.errors] == ["VALIDATE", "DEBUG", "VALIDATE"]
    assert loop_ws.missing_progress("develop.md", "validate.md", "changes.log", "summary.md") == []
    loop.assert_consistent()


def test_raising_actions_end_failed_at_the_error_limit(loop_ws: Any, started: Any) -> None:
    """Actions that raise are recorded by on_error (the step changes nothing else) until the
    persisted max_errors ends the loop."""
    loop_ws.write_tasks([{**ADD_MUL, "command": "true"}])
    loop = started(max_errors=2)
    loop.fire("init")
    # a file where the progress folder should be makes every action that writes progress raise
    folder = loop_ws.progress("")
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()
    folder.write_text("not a folder")
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop!", "develop!", "give_up"]
    doc = loop.doc
    assert doc.current_iteration == 0
    assert doc.skill_state is not None
    assert [(e.action, e.message.split(":")[0]) for e in doc.skill_state.errors] == [
        ("DEVELOP", "NotADirectoryError"),
        ("DEVELOP", "NotADirectoryError"),
    ]
    assert "2 consecutive action failures (max_errors 2)" in (doc.failure_reason or "")
    loop.assert_consistent()


def test_flaky_failure_is_rejected_and_revalidated(loop_ws: Any, started: Any) -> None:
    """A test that fails once and then passes is rejected as flaky; the next validation passes."""
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
    loop = started()
    assert loop.run().outcome == "completed"
    assert loop.events() == ["init", "develop", "validate", "debug", "validate", "complete"]
    state = loop.doc.skill_state
    assert state is not None
    assert [h.status for h in state.debug.hypotheses] == ["rejected"]
    assert state.debug.confirmed_hypothesis is None
    assert loop_ws.missing_progress(*FILE_SYNC) == []
    loop.assert_consistent()


def test_pause_and_resume_in_the_middle(loop_ws: Any, started: Any) -> None:
    """A paused loop takes no step and refuses events; after resume it continues where it was."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL, TEST_MUL])
    loop = started()
    assert [loop.step().event, loop.step().event] == ["init", "develop"]
    loop.control("pause")
    assert (loop.doc.status, loop.state) == ("paused", "develop")
    assert loop.step().outcome == "blocked"
    with pytest.raises(EventNotAllowedError, match="paused"):
        loop.fire("develop")
    paused = loop.run()
    assert (paused.outcome, paused.exit_code, paused.steps) == ("paused", 5, [])
    loop.control("resume")
    assert loop.run().outcome == "completed"
    assert loop.events() == ["init", "develop", "develop", "validate", "complete"]
    controls = [
        (r["event"], r["status_to"])
        for r in loop.instance.journal.read().records
        if r["kind"] == "control"
    ]
    assert controls == [("start", "running"), ("pause", "paused"), ("resume", "running")]
    assert loop_ws.missing_progress(*WITHOUT_DEBUG) == []
    loop.assert_consistent()


def _stopped_in(loop_ws: Any, started: Any, status: str) -> Any:
    if status == "created":
        return started(start=False)
    loop = started()
    assert loop.step().event == "init"
    if status == "paused":
        loop.control("pause")
    return loop


@pytest.mark.parametrize("status", ["created", "running", "paused"])
def test_stop_ends_failed_manually(loop_ws: Any, started: Any, status: str) -> None:
    """stop from created, running or paused ends failed, "Manually stopped by user"."""
    loop_ws.write_tasks([{**ADD_MUL, "command": "true"}])
    loop = _stopped_in(loop_ws, started, status)
    assert loop.doc.status == status
    loop.control("stop")
    doc = loop.doc
    assert (doc.status, loop.state, doc.failure_reason) == (
        "failed",
        "failed",
        "Manually stopped by user",
    )
    assert doc.completed_at == doc.updated_at
    result = loop.run()
    assert (result.outcome, result.exit_code, result.steps) == ("failed", 4, [])
    initialised = [] if status == "created" else ["develop.md"]
    assert [name for name in FILE_SYNC if loop_ws.progress(name).exists()] == initialised
    loop.assert_consistent()


def test_interactive_mode_offers_the_legal_actions(loop_ws: Any) -> None:
    """fsm run --interactive initialises into the menu, runs what the person chooses from the
    legal actions, waits when they choose nothing, and exit ends the loop user_exit."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    loop_ws.new_loop()
    loop = loop_ws.open(interactive=True)
    menus: list[list[str]] = []
    script = ["develop", "validate"]

    def choose(state: str, choices: Sequence[Choice]) -> str | None:
        assert state == "menu"
        menus.append([c.event for c in choices])
        return script.pop(0) if script else None

    result = loop.run(chooser=choose)
    assert (result.outcome, result.exit_code, result.state) == ("waiting", 5, "menu")
    assert menus == [
        ["develop", "validate", "exit"],
        ["validate", "exit"],
        ["validate", "complete", "exit"],
    ]
    state = loop.doc.skill_state
    assert state is not None and state.mode == "interactive" and state.validate_.passed
    assert loop.fire("exit").state == "user_exit"
    assert loop.events() == ["init", "develop", "validate", "exit"]
    doc = loop.doc
    assert (doc.status, doc.failure_reason) == ("user_exit", None)
    assert doc.completed_at is not None
    assert "Outcome: user_exit" in loop_ws.progress("summary.md").read_text()
    assert loop_ws.missing_progress(*WITHOUT_DEBUG) == []
    loop.assert_consistent()


def test_master_file_stays_valid_at_every_step(loop_ws: Any, started: Any) -> None:
    """Driven step by step, the master file on disk validates against the seed model after
    every step, and every step is applied (none fails)."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    loop = started()
    path = loop_ws.state_dir / f"{LOOP_ID}.json"
    outcomes = []
    while not loop.instance.machine.is_final(loop.state):
        outcomes.append(loop.step().outcome)
        LoopState.model_validate(json.loads(path.read_text()))
        assert len(outcomes) < 20
    assert outcomes == ["applied"] * 4
    assert loop.doc.status == "completed"
    loop.assert_consistent()


def test_control_characters_of_task_output_are_escaped_in_the_markdown(loop_ws: Any) -> None:
    """A task that prints ESC and BEL (a colour, a bell) leaves them escaped in develop.md,
    as on the terminal: shown with cat, the file makes the terminal obey nothing."""
    loop_ws.write_project()
    loop_ws.write_tasks(
        [
            {
                **ADD_MUL,
                "command": "printf '\\033[31mred\\007\\r\\n'; " + ADD_MUL["command"],
            }
        ]
    )
    loop_ws.new_loop()
    loop = loop_ws.open()
    loop.run()
    develop = loop_ws.progress("develop.md").read_text()
    assert "red" in develop
    assert "\x1b" not in develop and "\x07" not in develop and "\r" not in develop
    assert "\\x1b[31mred\\x07" in develop
