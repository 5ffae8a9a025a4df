"""Whole loops on sample workspaces, driven step by step through the machine's ordered rules.

Every path of the issue: all tasks pass first time; a bug is debugged, fixed by the agent and
validated; validation never passes (iteration limit); actions keep failing (error limit); a
flaky test is rejected and re-validated; interactive mode with its menu and exit.
"""

from __future__ import annotations

import json
from typing import Any

from machines.ccw_loop.model import LoopState

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


def test_all_tasks_pass_first_time(loop_ws: Any, started: Any) -> None:
    """Tasks develop one per step, validation passes once, and the loop completes."""
    loop_ws.write_project()
    loop_ws.write_tasks([TEST_MUL, ADD_MUL])
    driver = started()
    events = driver.run()
    assert events == ["init", "develop", "develop", "validate", "complete"]
    doc = driver.doc
    assert doc.status == "completed"
    assert doc.current_iteration == 3
    state = doc.skill_state
    assert state is not None
    assert [t.id for t in state.develop.tasks] == ["task-1", "task-2"]
    assert [t.files_changed for t in state.develop.tasks] == [["calc.py"], ["tests/test_mul.py"]]
    assert state.validate_.passed
    assert len(state.validate_.test_results) == 3
    assert state.summary is not None
    assert state.completed_actions == ["DEVELOP", "DEVELOP", "VALIDATE", "COMPLETE"]
    for name in ("develop.md", "validate.md", "changes.log", "summary.md", "test-results.json"):
        assert loop_ws.progress(name).is_file(), name


def test_bug_is_debugged_fixed_and_validated(loop_ws: Any, started: Any) -> None:
    """A failing test is confirmed by debug, the fix agent repairs it, and validation passes."""
    loop_ws.write_project(bug=True)
    agent = loop_ws.write_agent(loop_ws.fix_add)
    loop_ws.write_tasks([{**ADD_MUL, "order": 0}])
    driver = started(agents={"codex": agent})
    events = driver.run()
    assert events == ["init", "develop", "validate", "debug", "fix", "validate", "complete"]
    state = driver.doc.skill_state
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
    assert "test_calc.py::test_add" in loop_ws.agent_calls()[0]["prompt"]
    assert driver.doc.status == "completed"
    assert loop_ws.progress("debug.log").read_text().count("\n") == 1


def test_validation_never_passing_ends_failed_at_the_limit(loop_ws: Any, started: Any) -> None:
    """Without a working fix the loop ends failed at max_iterations, with its summary written."""
    loop_ws.write_project(bug=True)
    agent = loop_ws.write_agent()  # edits nothing
    driver = started(agents={"codex": agent}, fields={"max_iterations": 5})
    events = driver.run()
    assert events[-1] == "exhaust"
    doc = driver.doc
    assert (doc.status, doc.current_iteration) == ("failed", 5)
    assert doc.failure_reason == "Reached max_iterations (5) without a passing validation"
    assert doc.completed_at is not None
    assert doc.skill_state is not None and doc.skill_state.summary is not None
    assert "Outcome: failed" in loop_ws.progress("summary.md").read_text()


def test_consecutive_action_failures_end_failed(loop_ws: Any, started: Any) -> None:
    """A test command that cannot run fails validate and debug in a row until max_errors."""
    loop_ws.write_tasks([{**ADD_MUL, "command": "true"}])
    driver = started(test_command="no-such-test-runner {junit}", max_errors=3)
    events = driver.run()
    doc = driver.doc
    assert doc.status == "failed"
    assert events[-1] == "give_up"
    assert doc.skill_state is not None
    assert doc.skill_state.consecutive_errors == 3
    assert "3 consecutive action failures" in (doc.failure_reason or "")
    assert [e.action for e in doc.skill_state.errors][-3:] == ["VALIDATE", "DEBUG", "VALIDATE"]


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
    driver = started()
    events = driver.run()
    state = driver.doc.skill_state
    assert state is not None
    assert "debug" in events
    assert [h.status for h in state.debug.hypotheses] == ["rejected"]
    assert state.debug.confirmed_hypothesis is None
    assert events[-2:] == ["validate", "complete"]


def test_interactive_mode_waits_at_the_menu(loop_ws: Any, started: Any) -> None:
    """In interactive mode the loop stops at the menu; chosen actions run; exit ends user_exit."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    driver = started(mode="interactive")
    assert driver.run() == ["init"]
    assert driver.state == "menu"
    assert driver.step() is None
    assert driver.fire("develop") == "menu"
    assert driver.fire("validate") == "menu"
    assert driver.doc.skill_state is not None and driver.doc.skill_state.validate_.passed
    assert driver.fire("exit") == "user_exit"
    assert driver.doc.status == "user_exit"
    assert loop_ws.progress("summary.md").is_file()


def test_master_file_stays_valid_at_every_step(loop_ws: Any, started: Any) -> None:
    """The written master file validates against the seed model after every step."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    driver = started()
    while driver.step() is not None:
        LoopState.model_validate(json.loads(driver.ctx.document_path.read_text()))
    assert driver.doc.status == "completed"
