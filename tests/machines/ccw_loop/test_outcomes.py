"""Outcomes true on real projects: each case a run on a real package once ended with a false or
misleading result, as a scenario on the real engine with real test runs.

The test command's exit status is part of the verdict, counts are the totals of every part of a
compound command, flaky tests are named as flaky, an agent task that changes nothing is failed,
and the work of a fix that timed out or was interrupted is validated before anything is decided.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.verdict import loop_outcome

from fsm.process.executor import AgentCommand
from fsm.testing import Reply
from tests.guarantees.waiting import is_running, wait_until
from tests.machines.ccw_loop.conftest import PYTEST

TEST_ADD = "tests/test_calc.py::test_add"
MORE_TESTS = "".join(f"def test_more_{n}():\n    assert {n} == {n}\n\n\n" for n in range(3))
CHECK = {
    "task_id": "check",
    "description": "Byte-compile calc.py",
    "tool": "bash",
    "command": "python -m py_compile calc.py",
}
"""A bash task that rightly changes nothing."""
FIX = {"file": "calc.py", "replace": "a - b", "with": "a + b", "say": "fixed"}


def _project(loop_ws: Any, *, bug: bool = True) -> None:
    """The sample project plus a second test module of three passing tests, and a task list of
    one bash check (the loop then runs its tests)."""
    loop_ws.write_project(bug=bug)
    (loop_ws.root / "tests" / "test_more.py").write_text(MORE_TESTS)
    loop_ws.write_tasks([CHECK])


def _script(loop_ws: Any, name: str, body: str) -> str:
    """An executable shell script in the workspace; the command that runs it."""
    path = loop_ws.root / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return f"./{name}"


# --- the test command's exit status and the counts of every part ------------------------------


def test_script_of_two_pytest_parts_exiting_1_is_not_a_pass(loop_ws: Any, started: Any) -> None:
    """``./run_tests.sh`` running the failing part first and a passing part last, exiting 1:
    the loop does not complete; the counts are both parts' totals and the failing test is named
    from the output, in the verdict, the status and the reason."""
    _project(loop_ws)
    command = _script(
        loop_ws,
        "run_tests.sh",
        f"{PYTEST} tests/test_calc.py; a=$?\n{PYTEST} tests/test_more.py; b=$?\nexit $((a | b))\n",
    )
    loop = started(test_command=command, fix_tool="none")
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop", "validate", "debug", "hand_over"]
    state = loop.doc.skill_state
    assert state is not None
    validate = state.validate_.model_extra or {}
    assert validate["counts"] == {
        "passed": 4,
        "failed": 1,
        "skipped": 0,
        "total": 5,
        "source": "output",
    }
    assert (state.validate_.passed, validate["exit_code"]) == (False, 1)
    assert validate["verdict"] == "failed: 1 of 5 tests failed in 2 runs"
    assert state.validate_.failed_tests == [TEST_ADD]
    assert functions.status_lines(loop.doc)["validate"] == "FAILED (1 of 5 failed)"
    assert TEST_ADD in result.message


@pytest.mark.parametrize("colour", ["", " --color=yes"], ids=["plain", "colour"])
def test_a_run_stopped_at_the_first_failure_says_the_rest_did_not_run(
    loop_ws: Any, started: Any, colour: str
) -> None:
    """``pytest -x`` stops at the first failure: the counts are of the tests that ran, and the
    verdict and the status line say the run stopped there, so that "1 of 1 failed" is not read
    as the size of the suite (in colour too, as projects that set ``--color=yes`` run it)."""
    _project(loop_ws)
    loop = started(
        test_command=f"{PYTEST} -x{colour} tests/test_calc.py tests/test_more.py",
        fix_tool="none",
    )
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    state = loop.doc.skill_state
    assert state is not None
    validate = state.validate_.model_extra or {}
    assert validate["counts"]["total"] == 1
    assert validate["verdict"] == (
        "failed: 1 of 1 tests failed, then the run stopped (pytest -x or --maxfail): "
        "the tests after it did not run"
    )
    assert functions.status_lines(loop.doc)["validate"] == (
        "FAILED (1 of 1 failed, then the run stopped)"
    )


def test_test_modules_that_cannot_be_imported_are_not_called_failed_tests(
    loop_ws: Any, started: Any
) -> None:
    """A module the tests import that cannot itself be imported is a pytest collection error,
    which stops the run before any test: the verdict and status say the module was not collected
    and no test ran (not "1 of 1 tests failed"), and its error is the ImportError, not
    "collection failure"."""
    _project(loop_ws)
    calc = loop_ws.root / "calc.py"
    calc.write_text("from os import no_such_name\n" + calc.read_text())
    loop = started(fix_tool="none")
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    state = loop.doc.skill_state
    assert state is not None
    validate = state.validate_.model_extra or {}
    error = (
        "collection failure: ImportError: cannot import name 'no_such_name' from 'os' "
        f"({os.__file__})"
    )
    assert validate["verdict"] == (
        f"failed: 1 test module could not be collected, so pytest ran no test ({error})"
    )
    assert functions.status_lines(loop.doc)["validate"] == (
        "FAILED (1 module not collected, so no test ran)"
    )
    assert [row.error_message for row in state.validate_.test_results] == [error]


@pytest.mark.parametrize(
    ("case", "failing_step"),
    [
        ("script-exits-1", "echo 'doctests: 1 failure'; exit 1"),
        ("coverage-threshold", None),
    ],
    ids=["script-exits-1", "coverage-threshold"],
)
def test_non_zero_exit_with_every_test_passing_is_not_a_pass(
    loop_ws: Any, started: Any, case: str, failing_step: str | None
) -> None:
    """A test command that exits non-zero although every test it reports passed (a script whose
    last step fails; pytest with a coverage threshold that is not reached) never completes the
    loop: there is no test to debug or fix, so the loop ends failed at once with the command's
    own account, and status says the exit status is what failed."""
    _project(loop_ws, bug=False)
    if failing_step is not None:
        command = _script(loop_ws, "run_tests.sh", f"{PYTEST} tests || exit\n{failing_step}\n")
        account = "doctests: 1 failure"
    else:  # what pytest --cov-fail-under=100 does when the threshold is not reached
        (loop_ws.root / "conftest.py").write_text(
            "def pytest_terminal_summary(terminalreporter):\n"
            "    terminalreporter.write_line("
            "'FAIL Required test coverage of 100% not reached. Total coverage: 93.00%')\n\n\n"
            "def pytest_sessionfinish(session, exitstatus):\n"
            "    session.exitstatus = 1\n"
        )
        command = f"{PYTEST} tests"
        account = "FAIL Required test coverage of 100% not reached. Total coverage: 93.00%"
    loop = started(test_command=command)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events() == ["init", "develop", "validate", "halt"]
    assert result.message == (
        "Validation failed without naming a failing test for debug or a fix to work on: the "
        "test command exited 1 although every test it reported passed (5 tests passed): "
        f"{account}"
    )
    assert loop_outcome(loop.doc) == (False, result.message)
    status = functions.status_lines(loop.doc)
    assert status["validate"] == "FAILED (exit 1 although no test failed: 5 passed)"
    assert f"Reason: {result.message}" in loop_ws.progress("summary.md").read_text()
    assert loop_ws.agent_calls() == []


def test_compound_pytest_command_counts_both_parts(loop_ws: Any, started: Any) -> None:
    """``pytest A && pytest B``: JUnit covers the last part only; the counts are the sum of both
    parts' summary lines, before and after the fix, and the success says so."""
    _project(loop_ws)
    command = f"{PYTEST} tests/test_more.py && {PYTEST} tests/test_calc.py"
    agent = loop_ws.write_scripted_agent(FIX)
    loop = started(test_command=command, agents={"codex": agent})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert loop.events() == ["init", "develop", "validate", "debug", "fix", "validate", "complete"]
    assert result.message == "the task done, 1 fix attempt; validation passed: 5 tests passed"
    report = loop_ws.progress("validate.md").read_text()
    assert "- Verdict: failed: 1 of 5 tests failed in 2 runs" in report
    assert "- Verdict: passed: 5 tests passed in 2 runs" in report
    assert functions.status_lines(loop.doc)["validate"] == "PASSED (5 passed)"


def test_text_only_summary_counts_and_names_the_failures(loop_ws: Any, started: Any) -> None:
    """A run that writes no JUnit report (pytest behind a wrapper that drops fsm's
    PYTEST_ADDOPTS) is judged from its output: status shows how many failed, never "FAILED (0
    failed)", and the failing tests are named."""
    _project(loop_ws)
    (loop_ws.root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\n"
        + "".join(f"def test_add_{n}():\n    assert add({n}, 1) == {n + 1}\n\n\n" for n in range(8))
    )
    hidden = f"env -u PYTEST_ADDOPTS {PYTEST} tests"
    loop = started(test_command=f"bash -c {json.dumps(hidden)}", fix_tool="none")
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    state = loop.doc.skill_state
    assert state is not None
    assert (state.validate_.model_extra or {})["counts"]["source"] == "output"
    assert functions.status_lines(loop.doc)["validate"] == "FAILED (8 of 11 failed)"
    assert len(state.validate_.failed_tests) == 8
    assert "validation failed: 8 tests fail" in result.message


# --- flaky tests -------------------------------------------------------------------------------


def test_a_test_that_fails_then_passes_is_reported_flaky(loop_ws: Any, started: Any) -> None:
    """A test that failed once and passed when run alone is named as flaky in the last line,
    the status and summary.md; the loop completes (the tests pass), never silently."""
    _project(loop_ws, bug=False)
    (loop_ws.root / "tests" / "test_flaky.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_sometimes():\n"
        "    seen = Path(__file__).with_name('.seen')\n"
        "    first = not seen.exists()\n"
        "    seen.write_text('x')\n"
        "    assert not first, 'failed on its first run'\n"
    )
    loop = started()
    result = loop.run()
    flaky = "tests/test_flaky.py::test_sometimes"
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert loop.events() == ["init", "develop", "validate", "debug", "validate", "complete"]
    assert result.message == (
        "the task done; validation passed: 6 tests passed; "
        f"1 flaky test: {flaky} (failed, then passed when run alone)"
    )
    lines = functions.status_lines(loop.doc)
    assert lines["debug"] == f"round 1, 1 flaky ({flaky}: passed alone)"
    summary = loop_ws.progress("summary.md").read_text()
    assert f"- Flaky tests (failed, then passed when run alone): {flaky}" in summary
    hypothesis = loop.doc.skill_state.debug.hypotheses[0]
    assert hypothesis.status == "rejected"
    assert "deterministic" not in hypothesis.description


def test_a_failure_that_reproduces_once_is_not_called_deterministic(
    loop_ws: Any, started: Any
) -> None:
    """One re-run that fails again confirms the hypothesis; its words say what was seen (failed
    in the full run and once alone), not that the failure is deterministic."""
    _project(loop_ws)
    loop = started(fix_tool="none")
    loop.run()
    hypothesis = loop.doc.skill_state.debug.hypotheses[0]
    assert hypothesis.status == "confirmed"
    assert hypothesis.description.startswith(f"{TEST_ADD} failed at ")
    assert hypothesis.verdict_reason == (
        "failed in the full run and again when run alone once (exit 1)"
    )
    assert "determinist" not in loop_ws.progress("debug.md").read_text()


# --- agent tasks that change nothing ---------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "outcome", "events"),
    [
        ("write", "failed", ["init", "develop", "abort"]),
        ("analysis", "completed", ["init", "develop", "validate", "complete"]),
    ],
    ids=["write-task-fails", "analysis-task-completes"],
)
def test_agent_task_that_changes_nothing(
    loop_ws: Any, started: Any, mode: str, outcome: str, events: list[str]
) -> None:
    """An agent task in write mode that exits 0 without editing anything is failed with that
    reason (and fails the loop); an analysis task, which may not edit, is judged by its exit
    status."""
    loop_ws.write_project()
    loop_ws.write_tasks([{"task_id": "t1", "description": "Add", "tool": "codex", "mode": mode}])
    loop = started(agents={"codex": loop_ws.write_scripted_agent({"say": "done!"})})
    assert loop.run().outcome == outcome
    assert loop.events() == events
    task = loop.doc.skill_state.develop.tasks[0]
    if mode == "write":
        error = "the task changed no file (agent codex exited 0 without an edit)"
        assert task.extra("error") == error
        assert loop.doc.failure_reason == f"Task t1 ({error}) failed; a failed task is not retried"
    else:
        assert (task.status, task.files_changed) == ("completed", [])


# --- work of a fix that timed out or was interrupted ------------------------------------------

AGENT = """\
import os, subprocess, sys, time
from pathlib import Path
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
# a helper that leaves the session and keeps the agent's output open, as some agent CLIs do
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
)
Path(os.environ["CHILD_PID_FILE"]).write_text(str(child.pid))
print("fixed calc.py, now thinking", flush=True)
time.sleep(300)
"""


def _slow_agent(loop_ws: Any) -> AgentCommand:
    """A real agent program that fixes calc.py, starts a setsid child holding its output, and
    never returns by itself."""
    loop_ws.bin_dir.mkdir(exist_ok=True)
    script = loop_ws.bin_dir / "slow_agent.py"
    script.write_text(AGENT)
    return AgentCommand((sys.executable, str(script), "{prompt}"))


def test_fix_that_timed_out_after_changing_files_is_validated(
    loop_ws: Any, started: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that fixed the file, then hung with a setsid child holding its output, is
    killed at task_timeout (child included) and the run goes on: its work is validated and the
    loop completes, instead of making more attempts that find nothing to change; status counts
    the attempt as having changed files."""
    _project(loop_ws)
    monkeypatch.setenv("CHILD_PID_FILE", str(loop_ws.bin_dir / "child.pid"))
    loop = started(agents={"codex": _slow_agent(loop_ws)}, task_timeout=2)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert loop.events() == ["init", "develop", "validate", "debug", "fix", "validate", "complete"]
    fix = loop.doc.skill_state.develop.tasks[-1]
    assert (fix.id, fix.status, fix.files_changed) == ("fix-H1", "failed", ["calc.py"])
    assert str(fix.extra("error")).startswith("agent codex timed out after ")
    assert "(limit 2s)" in str(fix.extra("error"))
    assert str(fix.extra("error")).endswith("(option task_timeout)")
    child = int((loop_ws.bin_dir / "child.pid").read_text())
    wait_until(lambda: not is_running(child), "the agent's setsid child killed")
    lines = functions.status_lines(loop.doc)
    assert lines["fixes"] == "1 attempt (1 changed 1 file, 1 failed)"
    assert lines["validate"] == "PASSED (5 passed)"


def test_fix_interrupted_by_a_killed_run_is_validated_on_resume(loop_ws: Any, started: Any) -> None:
    """A run that ends while the fix agent works (killed, crashed, interrupted) leaves its edit
    unrecorded; the next run validates first instead of asking for another fix, records the
    interrupted attempt with the file it changed, and completes."""
    _project(loop_ws)
    calls = []

    def killed_while_working(call: Any) -> None:
        calls.append(call)
        calc = call.cwd / "calc.py"
        calc.write_text(calc.read_text().replace("a - b", "a + b"))
        raise KeyboardInterrupt  # the run ends here, as a SIGTERM or Ctrl-C ends it

    loop = started(agents={"codex": killed_while_working})
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    assert loop.events() == ["init", "develop", "validate", "debug"]
    assert loop_ws.progress("attempt.json").is_file()
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert loop.events()[4:] == ["validate", "complete"]
    assert len(calls) == 1
    fix = loop.doc.skill_state.develop.tasks[-1]
    assert (fix.id, fix.status, fix.files_changed) == ("fix-H1", "failed", ["calc.py"])
    assert str(fix.extra("error")).startswith("interrupted: the run ended while agent codex")
    assert loop.doc.skill_state.debug.hypotheses[0].model_extra["fix_attempts"] == 1
    assert not loop_ws.progress("attempt.json").exists()
    assert result.message == "the task done, 1 fix attempt; validation passed: 5 tests passed"
    assert functions.status_lines(loop.doc)["fixes"] == "1 attempt (1 changed 1 file, 1 failed)"


def test_fixes_line_counts_the_files_the_attempts_changed(loop_ws: Any, started: Any) -> None:
    """A fix attempt that rewrote several files is not shown as one changed file: the fixes line
    of status counts the attempts that changed something and the files they changed, and names
    the test files among them."""
    _project(loop_ws)

    def rewrote_the_tests_too(call: Any) -> Any:
        calc = call.cwd / "calc.py"
        calc.write_text(calc.read_text().replace("a - b", "a + b"))
        for name in ("test_calc.py", "test_more.py"):
            tests = call.cwd / "tests" / name
            tests.write_text(tests.read_text() + "\n# reviewed\n")
        return Reply(stdout="fixed, and tidied the tests")

    loop = started(agents={"codex": rewrote_the_tests_too})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert functions.status_lines(loop.doc)["fixes"] == (
        "1 attempt (1 changed 3 files, 0 failed); the fix changed tests/test_calc.py, "
        "tests/test_more.py: validated against the tests as they were"
    )
