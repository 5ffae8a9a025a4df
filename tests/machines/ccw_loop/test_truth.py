"""Outcomes that tell the truth (issue 9), on whole loops driven by the real engine.

A task that could not run fails the loop; a fix on the last iteration is validated; a fix that
changed nothing is a failed fix; a failing test keeps one hypothesis and is given up after
``max_fix_attempts``; tasks added to the task list after init are developed; ``fsm status`` lines
agree with the document.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.verdict import loop_outcome

from fsm.base.errors import MissingRequirementError
from fsm.process.executor import AgentCommand
from tests.machines.ccw_loop.conftest import LOOP_ID

TEST_ADD = "tests/test_calc.py::test_add"
ADD_MUL = {
    "task_id": "task-1",
    "description": "Add mul to calc",
    "tool": "bash",
    "mode": "write",
    "order": 0,
    "command": "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py",
}
NOTE = {**ADD_MUL, "task_id": "task-2", "description": "Note it", "order": 1, "command": "true"}
WRONG_FIX = {"file": "calc.py", "append": "\n# tried\n", "say": "fixed it, surely"}
RIGHT_FIX = {"file": "calc.py", "replace": "a - b", "with": "a + b", "say": "fixed"}


def _drive(loop: Any, limit: int = 40) -> None:
    """Step until the loop ends (``run`` would refuse a loop whose agent is missing)."""
    while not loop.instance.machine.is_final(loop.state):
        loop.step()
        limit -= 1
        assert limit > 0, loop.events()


def test_failed_task_fails_the_loop(loop_ws: Any, started: Any) -> None:
    """A task that fails is failed, never done: the other tasks still run, then the loop ends
    failed naming it, without a validation that could call the loop a success."""
    loop_ws.write_project()
    loop_ws.write_tasks([{**ADD_MUL, "command": "echo broken >&2; exit 3"}, NOTE])
    loop = started()
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop", "develop", "abort"]
    doc = loop.doc
    assert doc.status == "failed"
    assert doc.failure_reason is not None
    assert doc.failure_reason.startswith("Task task-1 (exited 3")
    assert "broken" in doc.failure_reason and "not retried" in doc.failure_reason
    assert doc.skill_state is not None
    assert [t.status for t in doc.skill_state.develop.tasks] == ["failed", "completed"]
    assert loop_outcome(doc) == (False, doc.failure_reason)
    lines = functions.status_lines(doc)
    assert lines["develop"] == "1/2 tasks done (50%), 1 failed"
    assert "Reason: Task task-1" in loop_ws.progress("summary.md").read_text()
    loop.assert_consistent()


def test_missing_agent_is_a_failed_task(loop_ws: Any, started: Any) -> None:
    """A task whose agent is neither configured nor installed fails with that reason, and the
    loop with it."""
    loop_ws.write_project()
    loop_ws.write_tasks([{**ADD_MUL, "tool": "qwen"}])
    loop = started()
    _drive(loop)
    assert loop.events() == ["init", "develop", "abort"]
    assert "agent 'qwen' cannot run: 'qwen' is not on PATH" in (loop.doc.failure_reason or "")
    assert loop_outcome(loop.doc)[0] is False


def test_fix_on_the_last_iteration_is_validated(loop_ws: Any, started: Any) -> None:
    """An agent whose third fix works completes the loop within the default 10 iterations: the
    failing test is debugged once, keeps hypothesis H1 across the attempts, and the budget keeps
    an iteration for the validation of the last fix."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL, NOTE])
    agent = loop_ws.write_scripted_agent(WRONG_FIX, WRONG_FIX, RIGHT_FIX)
    loop = started(agents={"codex": agent})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    fixes = ["fix", "validate"] * 3
    assert loop.events() == ["init", "develop", "develop", "validate", "debug", *fixes, "complete"]
    doc = loop.doc
    assert (doc.status, doc.current_iteration, doc.max_iterations) == ("completed", 10, 10)
    state = doc.skill_state
    assert state is not None
    assert [(h.id, (h.model_extra or {}).get("test")) for h in state.debug.hypotheses] == [
        ("H1", TEST_ADD)
    ]
    assert (state.debug.iteration, state.debug.hypotheses[0].model_extra["fix_attempts"]) == (1, 3)
    assert [(t.id, t.status) for t in state.develop.tasks[2:]] == [
        ("fix-H1", "completed"),
        ("fix-H1-2", "completed"),
        ("fix-H1-3", "completed"),
    ]
    assert loop_outcome(doc) == (
        True,
        "all 2 tasks done, 3 fix attempts; validation passed: 2 tests passed",
    )
    assert "Earlier attempt fix-H1-2 changed calc.py" in loop_ws.progress("changes.log").read_text()
    loop.assert_consistent()


@pytest.mark.parametrize("git", [True, False], ids=["git", "no-git"])
def test_fix_that_changes_nothing_is_a_failed_fix(loop_ws: Any, started: Any, git: bool) -> None:
    """A fix agent that exits 0 without editing anything makes failed fixes, each followed at
    once by the next attempt (nothing changed, so nothing to validate); after max_fix_attempts
    the loop gives up on the test and says so."""
    loop_ws.write_project(bug=True, git=git)
    loop_ws.write_tasks([ADD_MUL])
    agent = loop_ws.write_scripted_agent({"say": "all good"})
    loop = started(agents={"codex": agent})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop", "validate", "debug", "fix", "fix", "fix", "abandon"]
    doc = loop.doc
    state = doc.skill_state
    assert state is not None
    fixes = state.develop.tasks[1:]
    assert [(t.id, t.status, t.files_changed) for t in fixes] == [
        ("fix-H1", "failed", []),
        ("fix-H1-2", "failed", []),
        ("fix-H1-3", "failed", []),
    ]
    assert all("the fix changed no file" in str(t.extra("error")) for t in fixes)
    assert doc.failure_reason == (
        f"Gave up on {TEST_ADD} after 3 fix attempts (H1); last attempt: the fix changed no "
        "file (agent codex exited 0 without an edit)"
    )
    lines = functions.status_lines(doc)
    assert lines["develop"] == "1/1 tasks done (100%)"
    assert lines["fixes"] == "3 attempts (none changed a file, 3 failed)"
    assert lines["validate"] == "FAILED (1 of 2 failed)"
    assert lines["debug"] == f"root cause H1 ({TEST_ADD}), 3/3 fix attempts"
    loop.assert_consistent()


def test_wrong_fixes_are_given_up_after_max_fix_attempts(loop_ws: Any, started: Any) -> None:
    """Fixes that change code but not the result are validated one by one; the test is not
    debugged again, and after max_fix_attempts (persisted at init) the loop gives up on it."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL])
    agent = loop_ws.write_scripted_agent(WRONG_FIX)
    loop = started(agents={"codex": agent}, max_fix_attempts=2)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == [
        "init",
        *["develop", "validate", "debug"],
        *["fix", "validate", "fix", "validate"],
        "abandon",
    ]
    doc = loop.doc
    assert doc.skill_state is not None and doc.skill_state.max_fix_attempts == 2
    assert doc.failure_reason == (
        f"Gave up on {TEST_ADD} after 2 fix attempts (H1); it still fails: assert -1 == 5"
    )
    assert len(loop_ws.agent_calls()) == 2
    assert "Reason: Gave up on" in loop_ws.progress("summary.md").read_text()


def test_budget_too_small_for_a_fix_and_its_validation(loop_ws: Any, started: Any) -> None:
    """With one iteration left, no fix is started that could not be validated: the loop ends at
    the limit and says what did not fit."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([ADD_MUL])
    agent = loop_ws.write_scripted_agent(WRONG_FIX)
    loop = started(agents={"codex": agent}, fields={"max_iterations": 6})
    assert loop.run().outcome == "failed"
    assert loop.events() == ["init", "develop", "validate", "debug", "fix", "validate", "exhaust"]
    assert loop.doc.current_iteration == 5
    assert loop.doc.failure_reason == (
        f"Reached max_iterations (6) without a passing validation (still failing: {TEST_ADD}): "
        "a fix for H1 and its validation need 2 iterations, 1 left"
    )


@pytest.mark.parametrize("moment", ["after-develop", "after-passing-validation"])
def test_tasks_added_after_init_are_developed(loop_ws: Any, started: Any, moment: str) -> None:
    """A task the dashboard appends to {id}/tasks.jsonl while the loop runs (glued onto the last
    line, as after its rewrite without a trailing newline) is developed and validated before
    the loop completes."""
    loop_ws.write_project()
    path = loop_ws.write_tasks([ADD_MUL])
    path.write_text(path.read_text().rstrip("\n"))
    loop = started()
    steps = ["init", "develop"] if moment == "after-develop" else ["init", "develop", "validate"]
    assert [loop.step().event for _ in steps] == steps
    added = {**NOTE, "task_id": "task-1768000000000-9f3a1c07", "command": "touch noted.txt"}
    with path.open("a") as handle:
        handle.write(json.dumps(added) + "\n")
    assert loop.run().outcome == "completed"
    assert loop.events() == [*steps, "develop", "validate", "complete"][: len(steps) + 3]
    state = loop.doc.skill_state
    assert state is not None
    assert [(t.id, t.status) for t in state.develop.tasks] == [
        ("task-1", "completed"),
        ("task-1768000000000-9f3a1c07", "completed"),
    ]
    assert (loop_ws.root / "noted.txt").exists()
    assert state.completed_actions[-3:] == ["DEVELOP", "VALIDATE", "COMPLETE"]


def test_unsafe_task_id_fails_the_loop_and_writes_nothing_outside(
    loop_ws: Any, started: Any
) -> None:
    """A task id that would lead out of the workspace makes fsm run refuse, naming the line; a
    loop driven anyway (step by step) has it as a failed task and ends failed; nothing is ever
    written outside the workspace."""
    loop_ws.write_project()
    outside = loop_ws.root.parent
    before = sorted(p.name for p in outside.iterdir())
    loop_ws.write_tasks([ADD_MUL, {**NOTE, "task_id": "../../../escaped"}])
    loop = started()
    with pytest.raises(MissingRequirementError, match=r"'\.\./\.\./\.\./escaped' is not safe"):
        loop.run()
    assert (loop.doc.status, loop.doc.skill_state) == ("running", None)
    _drive(loop)
    assert loop.events() == ["init", "develop", "abort"]
    reason = loop.doc.failure_reason or ""
    assert reason.startswith("Task invalid-task-")
    assert "'../../../escaped' is not safe as a name" in reason
    assert sorted(p.name for p in outside.iterdir()) == before
    assert not list(loop_ws.root.rglob("escaped*"))


def test_on_error_pause_retries_the_task_on_resume(loop_ws: Any, started: Any) -> None:
    """A failed task marked on_error pause pauses the loop and is pending again: once a person
    fixed the cause and resumed, it is retried and the loop completes."""
    loop_ws.write_project()
    loop_ws.write_tasks([{**ADD_MUL, "command": "test -f ready", "on_error": "pause"}])
    loop = started()
    paused = loop.run()
    assert (paused.outcome, loop.doc.status) == ("paused", "paused")
    state = loop.doc.skill_state
    assert state is not None
    assert state.develop.tasks[0].status == "pending"
    assert "exited 1" in state.errors[-1].message
    (loop_ws.root / "ready").write_text("")
    loop.control("resume")
    assert loop.run().outcome == "completed"
    assert loop.events() == ["init", "develop", "develop", "validate", "complete"]


def test_coverage_is_null_until_measured(loop_ws: Any, started: Any) -> None:
    """validate.coverage is null after init and after a run that measured nothing."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    loop = started()
    loop.step()
    assert loop.data["skill_state"]["validate"]["coverage"] is None
    assert loop.run().outcome == "completed"
    raw = loop.data["skill_state"]
    assert raw["validate"]["coverage"] is None
    assert raw["summary"]["validate"]["coverage"] is None
    test_results = json.loads(loop_ws.progress("test-results.json").read_text())
    assert test_results["coverage"] is None


def test_secret_in_agent_command_is_never_recorded(loop_ws: Any, started: Any) -> None:
    """A token in the agent's fsm.toml command reaches neither the document, nor changes.log,
    develop.md or any other file of the loop, nor the instance log, even when the agent prints
    it; what is recorded is the tool and a redacted command."""
    secret = "sk-live-0123456789abcdef"
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([{**ADD_MUL, "tool": "codex"}, NOTE])
    # A real program, configured as fsm.toml would: what is redacted is its command line.
    loop_ws.bin_dir.mkdir()
    script = loop_ws.bin_dir / "agent.py"
    script.write_text(
        "import sys\n"
        "open('calc.py', 'a').write('\\n')\n"
        f"print('auth with {secret} refused', file=sys.stderr)\n"
        "sys.exit(1)\n"
    )
    argv = (sys.executable, str(script), "--token", secret, f"--key={secret}", "{prompt}")
    loop = started(agents={"codex": AgentCommand(argv)})
    _drive(loop)
    task = loop.doc.skill_state.develop.tasks[0]
    assert task.status == "failed"
    command = f"{sys.executable} {script} --token *** --key=*** {{prompt}}"
    assert task.extra("agent_command") == command
    # the description shows at most 120 characters of the command (the test's folder varies)
    error = task.extra("error")
    assert error.startswith(f"agent codex exited 1: {command[:60]}")
    assert error.endswith(" (auth with *** refused)")
    leaks = [
        path
        for path in loop_ws.state_dir.rglob("*")
        if path.is_file() and secret in path.read_text(errors="replace")
    ]
    assert leaks == []
    assert len(loop_ws.agent_calls()) == 1


def test_added_task_that_cannot_run_fails_the_loop(loop_ws: Any, started: Any) -> None:
    """A task appended after init that cannot run (an unknown tool) is loaded as a failed task,
    costs no iteration, and the loop ends failed naming it instead of completing without it."""
    loop_ws.write_project()
    path = loop_ws.write_tasks([ADD_MUL])
    loop = started()
    assert [loop.step().event for _ in range(3)] == ["init", "develop", "validate"]
    with path.open("a") as handle:
        handle.write(json.dumps({**NOTE, "task_id": "t-cursor", "tool": "cursor"}) + "\n")
    _drive(loop)
    assert loop.events() == ["init", "develop", "validate", "develop", "abort"]
    doc = loop.doc
    assert doc.current_iteration == 2
    assert (doc.failure_reason or "").startswith(
        "Task t-cursor (cannot run: it names unknown tool 'cursor'"
    )
    assert doc.skill_state is not None
    assert "t-cursor cannot run" in doc.skill_state.errors[-1].message


def test_loop_id_in_the_document_never_names_a_file(loop_ws: Any) -> None:
    """A master file whose loop_id (written by another program) leads out of the state folder
    still keeps its progress files beside it, named by the file's own (checked) id."""
    loop_ws.write_project()
    loop_ws.write_tasks([ADD_MUL])
    raw = loop_ws.new_loop()
    raw["loop_id"] = "../../../escaped"
    (loop_ws.state_dir / f"{LOOP_ID}.json").write_text(json.dumps(raw, indent=2))
    outside = loop_ws.root.parent
    before = sorted(p.name for p in outside.iterdir())
    loop = loop_ws.open()
    assert loop.run().outcome == "completed"
    assert loop_ws.progress("summary.md").is_file()
    assert sorted(p.name for p in outside.iterdir()) == before
    assert not list(outside.rglob("escaped*"))
