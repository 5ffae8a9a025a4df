"""A fix agent that games the check is not believed (issue 29), on whole loops.

The fix is judged on the tests as they were before the first fix: skipping, xfailing or deleting
the failing test, deselecting it, or dropping tests makes no passing validation; what the fix
changed among the tests and the configuration is said; the configuration is pinned; the user's
test command runs as written; a flaky test is named as flaky in every last line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions

from fsm.base.errors import MissingRequirementError
from fsm.process.executor import AgentCommand
from tests.machines.ccw_loop.conftest import CALC_TESTS, PYTEST

TEST_ADD = "tests/test_calc.py::test_add"
FIXED_CALC = {"when": "test_add", "file": "calc.py", "replace": "a - b", "with": "a + b"}
SKIPPED = "import pytest\n" + CALC_TESTS.replace(
    "def test_add():", '@pytest.mark.skip(reason="flaky")\ndef test_add():'
)
XFAILED = "import pytest\n" + CALC_TESTS.replace(
    "def test_add():", "@pytest.mark.xfail\ndef test_add():"
)
DELETED = "from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
CHECK = {
    "task_id": "check",
    "description": "Byte-compile calc",
    "tool": "bash",
    "command": "python -m py_compile calc.py",
}
AS_THEY_WERE = "the fix changed tests/test_calc.py: validated against the tests as they were"


def _rewrites_tests(content: str) -> dict[str, Any]:
    return {"when": "test_add", "file": "tests/test_calc.py", "write": content}


@pytest.mark.parametrize(
    "content", [SKIPPED, XFAILED, DELETED], ids=["skip", "xfail", "delete-the-test"]
)
def test_a_fix_that_weakens_the_test_is_judged_on_the_tests_as_they_were(
    loop_ws: Any, started: Any, content: str
) -> None:
    """A fix that only skips, xfails or deletes the failing test is validated on the test file
    as it was (in a copy of the workspace): the test still fails, the loop gives up on it, and
    every line says what the fix changed; the agent's edit stays in the user's tree."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([CHECK])
    agent = loop_ws.write_agent(_rewrites_tests(content))
    loop = started(agents={"codex": agent}, max_fix_attempts=1)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert loop.events()[-4:] == ["debug", "fix", "validate", "abandon"]
    assert result.message.startswith(f"Gave up on {TEST_ADD} after 1 fix attempt")
    assert result.message.endswith(AS_THEY_WERE)
    state = loop.doc.skill_state
    assert state is not None
    fix = state.develop.tasks[-1]
    assert fix.extra("protected_files_changed") == ["tests/test_calc.py"]
    assert state.validate_.failed_tests == [TEST_ADD]
    verdict = (state.validate_.model_extra or {})["verdict"]
    assert verdict == (
        "failed: 1 of 2 tests failed (validated against the tests as they were: "
        "tests/test_calc.py restored)"
    )
    lines = functions.status_lines(loop.doc)
    assert lines["validate"] == "FAILED (1 of 2 failed), on the tests as they were"
    assert lines["fixes"] == f"1 attempt (1 changed 1 file, 0 failed); {AS_THEY_WERE}"
    assert (loop_ws.root / "tests" / "test_calc.py").read_text() == content
    assert (loop_ws.root / "calc.py").read_text().count("a - b") == 1
    assert not list(Path(loop_ws.root).glob("**/fsm-tests-as-they-were-*"))


def test_a_real_fix_that_also_edits_the_test_completes_and_says_so(
    loop_ws: Any, started: Any
) -> None:
    """A fix that repairs the code and also touches the test completes (the test as it was
    passes), and the success names the test file it changed."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([CHECK])
    agent = loop_ws.write_agent(FIXED_CALC, _rewrites_tests(SKIPPED))
    loop = started(agents={"codex": agent})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert result.message == (
        f"the task done, 1 fix attempt; validation passed: 2 tests passed; {AS_THEY_WERE}"
    )


def test_allowed_test_changes_still_lose_no_test(loop_ws: Any, started: Any) -> None:
    """With allow_test_changes the tests run as the fix left them, yet a test that ran before
    may not disappear: deleting the failing test is a failing test of its own, and the count
    drop is said."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([CHECK])
    agent = loop_ws.write_agent(_rewrites_tests(DELETED))
    loop = started(agents={"codex": agent}, max_fix_attempts=1, allow_test_changes=True)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("failed", 4)
    state = loop.doc.skill_state
    assert state is not None
    extra = state.validate_.model_extra or {}
    assert extra["lost_tests"] == [
        f"{TEST_ADD}: no longer collected (deleted or deselected) (it failed before the first fix)",
        "collected tests dropped from 2 to 1",
    ]
    assert "tests_restored" not in extra
    assert state.validate_.failed_tests == [TEST_ADD]
    assert extra["verdict"].startswith("failed: 1 test passed, but tests were lost since the")
    assert functions.status_lines(loop.doc)["validate"] == (
        f"FAILED (2 lost since the first fix: {TEST_ADD}: no longer collected (deleted or "
        "deselected) (it failed before the first fix))"
    )
    assert result.message.endswith(
        "the fix changed tests/test_calc.py: validated against the tests as changed "
        "(allow_test_changes)"
    )


def test_allowed_test_changes_let_a_fix_add_tests(loop_ws: Any, started: Any) -> None:
    """With allow_test_changes a fix that repairs the code and adds a test completes, its test
    counted."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([CHECK])
    added = CALC_TESTS + "\n\ndef test_add_negative():\n    assert add(-1, -2) == -3\n"
    agent = loop_ws.write_agent(FIXED_CALC, _rewrites_tests(added))
    loop = started(agents={"codex": agent}, allow_test_changes=True)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert result.message.startswith(
        "the task done, 1 fix attempt; validation passed: 3 tests passed; the fix changed "
        "tests/test_calc.py: validated against the tests as changed"
    )


def test_a_develop_task_may_add_tests(loop_ws: Any, started: Any) -> None:
    """Tests a task of the task list adds before the first fix are part of what the fix is
    judged on (the baseline is taken at the first fix), and the loop completes."""
    loop_ws.write_project(bug=True)
    more = "from calc import add\n\n\ndef test_add_one():\n    assert add(1, 0) == 1\n"
    loop_ws.write_tasks(
        [
            {
                "task_id": "task-1",
                "description": "Add a test",
                "tool": "bash",
                "command": f"printf {json.dumps(more)} > tests/test_more.py",
            }
        ]
    )
    loop = started(agents={"codex": loop_ws.write_agent(FIXED_CALC)})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert result.message == "the task done, 1 fix attempt; validation passed: 3 tests passed"
    baseline = json.loads(loop_ws.progress("baseline/baseline.json").read_text())
    assert sorted(baseline["files"]) == ["tests/test_calc.py", "tests/test_more.py"]
    assert baseline["tests"][TEST_ADD] == "failed" and baseline["total"] == 3


def test_the_users_compound_command_runs_as_written(loop_ws: Any, started: Any) -> None:
    """``pytest a; a=$?; pytest b; b=$?; exit $((a|b))`` is not rewritten (fsm asks pytest for
    its report through PYTEST_ADDOPTS), so a passing suite passes and its exit is the shell's."""
    loop_ws.write_project()
    loop_ws.write_tasks([CHECK])
    command = f"{PYTEST} tests -k 'not zero'; a=$?; {PYTEST} tests -k zero; b=$?; exit $((a|b))"
    loop = started(test_command=command)
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert result.message == "the task done; validation passed: 2 tests passed"
    assert f"- Command: `{command}`\n" in loop_ws.progress("validate.md").read_text()


def test_a_flaky_test_is_named_flaky_when_the_iterations_run_out(
    loop_ws: Any, started: Any
) -> None:
    """A test that fails every other run passes alone each debug round and fails each full
    run: the loop ends at max_iterations, and the last line names it flaky."""
    loop_ws.write_project()
    loop_ws.write_tasks([CHECK])
    (loop_ws.root / "tests" / "test_flaky.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_flaky_truth():\n"
        "    seen = Path(__file__).with_name('.runs')\n"
        "    runs = int(seen.read_text()) if seen.exists() else 0\n"
        "    seen.write_text(str(runs + 1))\n"
        "    assert runs % 2, 'fails every other run'\n"
    )
    loop = started(fields={"max_iterations": 6})
    result = loop.run()
    flaky = "tests/test_flaky.py::test_flaky_truth"
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert result.message.startswith("Reached max_iterations (6) without a passing validation")
    assert f"still failing: {flaky}" in result.message
    assert result.message.endswith(f"1 flaky test: {flaky} (failed, then passed when run alone)")


def test_the_configuration_is_pinned_until_reconfigured(loop_ws: Any, started: Any) -> None:
    """The test command, limits and fix agent a loop started with are kept in the document; a
    changed one on the next run is refused with each change named, and adopted (and pinned) by
    a run that asks for it (``fsm run --reconfigure``)."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([CHECK])
    loop = started(fix_tool="none")
    loop.run(max_steps=2)
    state = loop.doc.skill_state
    assert state is not None
    assert (state.model_extra or {})["config"]["test_command"] == PYTEST
    deselecting = f"{PYTEST} tests -k zero"
    changed = loop_ws.open(fix_tool="none", test_command=deselecting, max_errors=5)
    with pytest.raises(MissingRequirementError) as refused:
        changed.run()
    assert refused.value.missing == [
        f"the configuration changed since the loop started: test_command {PYTEST!r} is now "
        f"{deselecting!r}; max_errors 3 is now 5 (fsm.toml or -o): restore it, or run with "
        "--reconfigure to adopt it"
    ]
    assert changed.events() == ["init", "develop"]
    adopted = loop_ws.loops(fix_tool="none", test_command=deselecting, max_errors=5).instance(
        loop.id, reconfigure=True
    )
    result = adopted.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    state = adopted.doc.skill_state
    assert state is not None
    assert ((state.model_extra or {})["config"]["test_command"], state.max_errors) == (
        deselecting,
        5,
    )


def test_a_fix_that_edits_fsm_toml_is_not_believed(loop_ws: Any, tmp_path: Path) -> None:
    """A fix agent that only adds ``--deselect`` of the failing test to fsm.toml's test_command
    (run with fsm as a user does): the running loop keeps its command; the next run is refused
    until --reconfigure; with it, the deselected test is a lost test, never a pass."""
    loop_ws.write_project(bug=True)
    # no other test's id starts with the failing one's (pytest deselects by prefix)
    tests = loop_ws.root / "tests" / "test_calc.py"
    tests.write_text(CALC_TESTS.replace("test_add_zero", "test_zero"))
    loop_ws.git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "tests")
    agent = tmp_path / "deselecting_agent.py"
    agent.write_text(
        "from pathlib import Path\n"
        "toml = Path('fsm.toml')\n"
        "text = toml.read_text()\n"
        f"if '--deselect' not in text:\n"
        f"    toml.write_text(text.replace('no:cacheprovider', "
        f"'no:cacheprovider --deselect {TEST_ADD}'))\n"
        "print('fixed: the flaky test is deselected')\n"
    )
    (loop_ws.root / "tasks.jsonl").write_text(json.dumps(CHECK) + "\n")
    loop_ws.write_config(
        codex=AgentCommand((sys.executable, str(agent), "{prompt}")),
        max_fix_attempts=1,
        task_list="tasks.jsonl",
    )

    def fsm(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fsm", "-C", str(loop_ws.root), *argv],
            capture_output=True,
            text=True,
            check=False,
        )

    loop_id = fsm("new", "ccw-loop", "--set", "title=gamed").stdout.strip()
    first = fsm("run", "-q", "ccw-loop", loop_id, "--max-steps", "5")
    assert first.returncode == 5, first.stdout + first.stderr
    assert "--deselect" in (loop_ws.root / "fsm.toml").read_text()
    refused = fsm("run", "-q", "ccw-loop", loop_id)
    assert refused.returncode == 2
    assert "the configuration changed since the loop started: test_command" in refused.stderr
    assert "--reconfigure" in refused.stderr
    final = fsm("run", "-q", "ccw-loop", loop_id, "--reconfigure")
    assert final.returncode == 4, final.stdout + final.stderr
    line = final.stdout.strip().splitlines()[-1]
    assert f"Gave up on {TEST_ADD} after 1 fix attempt" in line
    assert "lost since the first fix" in line
    assert line.endswith(
        "the fix changed fsm.toml: the configuration was then adopted by fsm run --reconfigure"
    )


def test_a_fix_that_edits_the_task_list_is_named(loop_ws: Any, started: Any) -> None:
    """A fix that also rewrites the loop's task list (in the state folder, which change
    detection leaves out) has that file named in its record and the last line."""
    loop_ws.write_project(bug=True)
    listed = loop_ws.write_tasks([CHECK])
    name = listed.relative_to(loop_ws.root).as_posix()
    rewrite = {"when": "test_add", "file": name, "write": json.dumps(CHECK) + "\n\n"}
    loop = started(agents={"codex": loop_ws.write_agent(FIXED_CALC, rewrite)})
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    state = loop.doc.skill_state
    assert state is not None
    assert state.develop.tasks[-1].extra("protected_files_changed") == [name]
    assert result.message.endswith(
        f"the fix changed {name}: validated against the configuration the loop started with"
    )


@pytest.mark.parametrize("allowed", [True, False], ids=["allowed", "not-allowed"])
def test_a_task_added_after_the_first_fix_may_add_tests_when_it_says_so(
    loop_ws: Any, started: Any, allowed: bool
) -> None:
    """A task of the task list that comes after the first fix and adds a test: with
    ``"allow_test_changes": true`` its test joins what later validations run; without, the
    validation runs the tests as they were (its file left out, and said)."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([CHECK])
    loop = started(agents={"codex": loop_ws.write_agent(FIXED_CALC)})
    loop.run(max_steps=5)
    assert loop.events()[-1] == "fix"
    more = "from calc import add\n\n\ndef test_add_one():\n    assert add(1, 0) == 1\n"
    adding = {
        "task_id": "task-2",
        "description": "Add a test",
        "tool": "bash",
        "command": f"printf {json.dumps(more)} > tests/test_more.py",
        "allow_test_changes": allowed,
    }
    loop_ws.write_tasks([CHECK, adding])
    result = loop.run()
    assert (result.outcome, result.exit_code) == ("completed", 0)
    extra = loop.doc.skill_state.validate_.model_extra or {}  # type: ignore[union-attr]
    assert extra["counts"]["passed"] == (3 if allowed else 2)
    assert extra.get("tests_restored") == (None if allowed else ["tests/test_more.py"])
    assert result.message.endswith(
        "validation passed: 3 tests passed"
        if allowed
        else "validation passed: 2 tests passed; validated against the tests as they were before "
        'the first fix (tests/test_more.py differ: a task with "allow_test_changes": true may '
        "change them)"
    )
