"""The actions one by one: real commands, agents and test runs in sample workspaces."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from fsm_machines.ccw_loop.testrun import rerun_command

BASH = {"task_id": "t1", "description": "run it", "tool": "bash", "mode": "write", "order": 0}


def _developed(loop: Any) -> Any:
    loop.fire("init")
    loop.fire("develop")
    state = loop.doc.skill_state
    return state.develop.tasks[0], state


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (BASH, "tool bash needs a command"),
        ({**BASH, "tool": "qwen"}, "agent 'qwen' cannot run: 'qwen' is not on PATH"),
        ({**BASH, "command": "exit 3"}, "exited 3"),
        ({**BASH, "command": "sleep 5"}, "timed out"),
        ({**BASH, "command": "no-such-program-xyz"}, "exited 127"),
    ],
    ids=["bash-without-command", "missing-agent", "command-fails", "timeout", "missing-program"],
)
def test_failed_task_is_recorded_not_raised(
    loop_ws: Any, started: Any, task: dict[str, Any], message: str
) -> None:
    """A task that cannot run or fails is a failed task with its reason in the task and errors."""
    loop_ws.write_tasks([task])
    # only the task meant to time out gets a short limit: on a busy machine starting bash can
    # take longer than half a second, and the other tasks must fail for their own reason
    loop = started(task_timeout=0.5 if message == "timed out" else 60)
    done, state = _developed(loop)
    assert loop.events() == ["init", "develop"]
    assert done.status == "failed"
    assert message in done.extra("error")
    assert message in state.errors[-1].message
    assert (state.errors[-1].action, state.consecutive_errors) == ("DEVELOP", 1)
    assert loop.doc.current_iteration == 1


def test_successful_task_ends_the_error_streak(loop_ws: Any, started: Any) -> None:
    """A completed task resets the consecutive error count."""
    loop_ws.write_tasks(
        [{**BASH, "command": "exit 1"}, {**BASH, "task_id": "t2", "command": "true"}]
    )
    loop = started()
    _developed(loop)
    loop.fire("develop")
    assert loop.doc.skill_state.consecutive_errors == 0


def test_files_changed_come_from_git(loop_ws: Any, started: Any) -> None:
    """files_changed lists what the task modified or created, not the loop's own files."""
    loop_ws.write_project()
    (loop_ws.root / "calc.py").write_text("# dirty before the task\n")
    loop_ws.write_tasks(
        [{**BASH, "command": "echo x >> calc.py && mkdir -p pkg && touch pkg/new.py"}]
    )
    done, _ = _developed(started())
    assert done.files_changed == ["calc.py", "pkg/new.py"]


def test_files_changed_outside_git_come_from_file_stamps(loop_ws: Any, started: Any) -> None:
    """Without a repository, files whose size or modification time changed are the changes;
    the loop's own state folder and test caches are not."""
    loop_ws.write_project(git=False)
    loop_ws.write_tasks(
        [{**BASH, "command": "echo x >> calc.py && mkdir -p __pycache__ && touch __pycache__/c"}]
    )
    done, _ = _developed(started())
    assert (done.status, done.files_changed) == ("completed", ["calc.py"])


def test_files_changed_by_a_commit_count(loop_ws: Any, started: Any) -> None:
    """A task that commits its change leaves no dirty file; the committed files are its
    changes (a fix agent that commits is not a fix that changed nothing)."""
    loop_ws.write_project()
    commit = "git -c user.name=a -c user.email=a@example.com commit -qam fix"
    loop_ws.write_tasks([{**BASH, "command": f"echo x >> calc.py && {commit}"}])
    done, _ = _developed(started())
    assert (done.status, done.files_changed) == ("completed", ["calc.py"])


def test_files_changed_in_a_workspace_its_repository_ignores(loop_ws: Any, started: Any) -> None:
    """A workspace inside a repository that ignores it (the demo's output folder) is read from
    file stamps: git would report none of its changes."""
    parent = loop_ws.root.parent
    subprocess.run(["git", "init", "-q"], cwd=parent, check=True)
    (parent / ".gitignore").write_text(f"{loop_ws.root.name}/\n")
    loop_ws.write_project(git=False)
    loop_ws.write_tasks([{**BASH, "command": "echo x >> calc.py"}])
    done, _ = _developed(started())
    assert (done.status, done.files_changed) == ("completed", ["calc.py"])


def test_files_changed_in_a_folder_of_a_larger_repository(loop_ws: Any, started: Any) -> None:
    """A workspace that is a folder of a larger repository counts its own changes only: a file
    dirty elsewhere in the repository (changed meanwhile, too) is not the task's."""
    parent = loop_ws.root.parent
    subprocess.run(["git", "init", "-q"], cwd=parent, check=True)
    elsewhere = parent / "elsewhere.txt"
    elsewhere.write_text("dirty before\n")
    loop_ws.write_project(git=False)
    loop_ws.write_tasks([{**BASH, "command": f"echo x >> calc.py && echo more >> {elsewhere}"}])
    done, _ = _developed(started())
    assert done.status == "completed"
    assert done.files_changed == [f"{loop_ws.root.name}/calc.py"]


def test_each_task_appends_one_change_line(loop_ws: Any, started: Any) -> None:
    """changes.log gets one NDJSON record per developed task."""
    loop_ws.write_tasks(
        [{**BASH, "command": "true"}, {**BASH, "task_id": "t2", "command": "false"}]
    )
    loop = started()
    _developed(loop)
    loop.fire("develop")
    records = [json.loads(x) for x in loop_ws.progress("changes.log").read_text().splitlines()]
    assert [(r["task_id"], r["result"], r["iteration"]) for r in records] == [
        ("t1", "success", 1),
        ("t2", "failed", 2),
    ]


def test_agent_gets_prompt_and_mode(loop_ws: Any, started: Any) -> None:
    """An agent task runs the agent with its prompt template and the task's mode."""
    agent = loop_ws.write_agent()
    loop_ws.write_tasks(
        [{**BASH, "tool": "gemini", "mode": "analysis", "prompt_template": "Review calc"}]
    )
    done, _ = _developed(started(agents={"gemini": agent}))
    assert done.status == "completed"
    call = loop_ws.agent_calls()[0]
    assert call.mode == "analysis"
    assert call.text.startswith("Review calc")


def test_on_error_pause_pauses_the_loop(loop_ws: Any, started: Any) -> None:
    """A failed task whose entry says on_error pause sets the status to paused: the run stops."""
    loop_ws.write_tasks([{**BASH, "command": "false", "on_error": "pause"}])
    loop = started()
    result = loop.run()
    assert (result.outcome, result.exit_code, result.state) == ("paused", 5, "develop")
    assert loop.doc.status == "paused"
    assert loop.events() == ["init", "develop"]


def test_validate_with_zero_tests_is_an_error(loop_ws: Any, started: Any) -> None:
    """A run with no tests fails validation and counts as a failed action."""
    loop_ws.write_project()
    (loop_ws.root / "tests" / "test_calc.py").write_text("")
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started()
    _developed(loop)
    loop.fire("validate")
    state = loop.doc.skill_state
    assert not state.validate_.passed
    assert "ran no tests" in state.errors[-1].message


def test_validate_error_names_why_the_test_command_failed(loop_ws: Any, started: Any) -> None:
    """A test command that cannot run (not found) is reported with its exit code and stderr,
    not only as a missing test report."""
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started(test_command="no-such-test-runner-xyz")
    _developed(loop)
    loop.fire("validate")
    message = loop.doc.skill_state.errors[-1].message
    assert "produced no test report" in message
    assert "exited 127" in message and "not found" in message


def test_validate_reads_coverage_the_run_produced(loop_ws: Any, started: Any) -> None:
    """Coverage written by the test command to {coverage} becomes validate.coverage."""
    loop_ws.write_project()
    command = (
        f"{loop_ws.pytest_command} --junitxml={{junit}} && "
        f'{sys.executable} -c "import sys; '
        "open(sys.argv[1], 'w').write('<coverage line-rate=\\'0.75\\'/>')\""
        " {coverage}"
    )
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started(test_command=command)
    _developed(loop)
    loop.fire("validate")
    validate = loop.doc.skill_state.validate_
    assert (validate.passed, validate.coverage, validate.pass_rate) == (True, 75.0, 100.0)


def test_debug_of_a_script_reporting_pytest_ids_reruns_with_pytest(
    loop_ws: Any, started: Any
) -> None:
    """A test command that is not pytest itself (a script) but reported pytest node ids has each
    failing test re-run alone with ``python -m pytest``, and judged by what that run showed."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started()
    _developed(loop)
    loop.fire("validate")
    # the command the loop pinned at init is replaced, as fsm run --reconfigure does
    loop = loop_ws.open(test_command="./run-tests {junit}", reconfigure=True)
    loop.fire("debug")
    hypotheses = loop.doc.skill_state.debug.hypotheses
    assert [h.status for h in hypotheses] == ["confirmed"]
    evidence = hypotheses[0].evidence or {}
    assert evidence["rerun_command"] == (
        "python -m pytest -q -p no:cacheprovider tests/test_calc.py::test_add"
    )


@pytest.mark.parametrize(
    ("command", "test", "rerun"),
    [
        ("pytest", "tests/test_calc.py::test_add", "pytest -q -p no:cacheprovider T"),
        ("uv run pytest", "tests/test_calc.py::test_add", "uv run pytest -q -p no:cacheprovider T"),
        (
            "./run_tests.sh",
            "tests/test_calc.py::test_add",
            "python -m pytest -q -p no:cacheprovider T",
        ),
        ("./t.sh", "tests/test_gone.py::test_x", None),
        ("go test ./...", "calc.TestAdd", None),
        ("python -m unittest -v", "tests.test_calc.T.test_add", "python -m unittest T"),
        ("./run_tests.sh", "tests.test_calc.T.test_add", "python -m unittest T"),
        ("./run_tests.sh", "pkg.test_gone.T.test_add", None),
        (
            "python -m pytest --doctest-modules calc.py tests",
            "calc.py::calc.add",
            "python -m pytest -q -p no:cacheprovider --doctest-modules T",
        ),
        (
            "pytest --doctest-glob '*.rst' --doctest-continue-on-failure docs",
            "docs/use.rst::use.rst",
            "pytest -q -p no:cacheprovider '--doctest-glob=*.rst' --doctest-continue-on-failure T",
        ),
        ("python -m unittest -v", "calc.add (doctest)", None),
    ],
    ids=[
        "pytest",
        "uv-run-pytest",
        "script-with-pytest-ids",
        "file-not-here",
        "not-pytest",
        "unittest",
        "script-with-unittest-ids",
        "unittest-module-not-here",
        "doctest-modules",
        "doctest-glob",
        "unittest-doctest",
    ],
)
def test_rerun_command(loop_ws: Any, command: str, test: str, rerun: str | None) -> None:
    """How one failing test is re-run alone, or None when the runner cannot select it."""
    loop_ws.write_project()
    expected = rerun.replace("T", test) if rerun else None
    assert rerun_command(command, test, loop_ws.root) == expected


UNITTEST_CALC = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_add_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
)


def test_a_unittest_suite_is_debugged_and_fixed(loop_ws: Any) -> None:
    """A project tested with `python -m unittest`: the failing test is named from unittest's
    report, re-run alone with `python -m unittest ID` and confirmed, given to the fix agent, and
    the loop completes once the fix is validated (it used to halt: no test named)."""
    loop_ws.write_project(bug=True)
    (loop_ws.root / "tests" / "__init__.py").write_text("")
    (loop_ws.root / "tests" / "test_calc.py").write_text(UNITTEST_CALC)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    agent = loop_ws.write_agent(
        {"when": "test_add", "file": "calc.py", "replace": "a - b", "with": "a + b"}
    )
    loop_ws.new_loop()
    loop = loop_ws.open(test_command="python -m unittest -v", agents={"codex": agent})
    result = loop.run()
    assert result.outcome == "completed", result.message
    debug = loop.doc.skill_state.debug
    assert [(h.status, (h.evidence or {}).get("rerun_command")) for h in debug.hypotheses] == [
        ("confirmed", "python -m unittest tests.test_calc.T.test_add")
    ]
    assert "2 tests passed" in result.message


UNITTEST_DESCRIBED = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_add(self):\n"
    '        """Adds two numbers."""\n'
    "        self.assertEqual([add(2, 3), add(1, 1)], [5, 2])\n"
)


def test_a_unittest_failure_is_described_by_its_exception(loop_ws: Any) -> None:
    """unittest prints a test's docstring under its FAIL heading and assertEqual's diff after the
    exception: the hypothesis, the fix prompt and the status name the exception line
    (``AssertionError: Lists differ: ...``), not the docstring or the diff's last marker line."""
    loop_ws.write_project(bug=True)
    (loop_ws.root / "tests" / "__init__.py").write_text("")
    (loop_ws.root / "tests" / "test_calc.py").write_text(UNITTEST_DESCRIBED)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    agent = loop_ws.write_agent(
        {
            "when": "AssertionError: Lists differ: [-1, 0] != [5, 2]",
            "file": "calc.py",
            "replace": "a - b",
            "with": "a + b",
        }
    )
    loop_ws.new_loop()
    loop = loop_ws.open(test_command="python -m unittest -v", agents={"codex": agent})
    result = loop.run()
    assert result.outcome == "completed", result.message
    (hypothesis,) = loop.doc.skill_state.debug.hypotheses
    assert (hypothesis.evidence or {}).get(
        "error_message"
    ) == "AssertionError: Lists differ: [-1, 0] != [5, 2]"
    assert "Adds two numbers" not in hypothesis.description


DOCTESTED_CALC = 'def add(a, b):\n    """\n    >>> add(2, 3)\n    5\n    """\n    return a - b\n'


def test_a_failing_doctest_is_rerun_as_a_doctest_and_fixed(loop_ws: Any) -> None:
    """A failing doctest of ``pytest --doctest-modules`` is re-run alone with that option (without
    it pytest finds no such test), confirmed and fixed; it used to be inconclusive every round
    until max_iterations ended the loop without a fix ever being tried."""
    loop_ws.write_project(bug=True)
    (loop_ws.root / "calc.py").write_text(DOCTESTED_CALC)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    agent = loop_ws.write_agent(
        {"when": "calc.py::calc.add", "file": "calc.py", "replace": "a - b", "with": "a + b"}
    )
    loop_ws.new_loop()
    loop = loop_ws.open(
        test_command=f"{loop_ws.pytest_command} --doctest-modules calc.py",
        agents={"codex": agent},
    )
    result = loop.run()
    assert result.outcome == "completed", result.message
    statuses = [h.status for h in loop.doc.skill_state.debug.hypotheses]
    assert statuses == ["confirmed"]


DOCTEST_SUITE = (
    "import doctest\n\nimport calc\n\n\n"
    "def load_tests(loader, tests, ignore):\n"
    "    tests.addTests(doctest.DocTestSuite(calc))\n"
    "    return tests\n"
)


def test_a_failure_that_cannot_be_rerun_alone_is_confirmed_by_failing_again(
    loop_ws: Any,
) -> None:
    """A doctest that unittest runs through ``load_tests`` cannot be re-run alone by its id
    (``python -m unittest calc.add`` is no test): once the next full run fails it again, it is
    confirmed (it failed twice) and fixed, instead of being debugged round after round until
    max_iterations ends the loop without any fix tried."""
    loop_ws.write_project(bug=True)
    (loop_ws.root / "calc.py").write_text(DOCTESTED_CALC)
    (loop_ws.root / "tests" / "__init__.py").write_text("")
    (loop_ws.root / "tests" / "test_doc.py").write_text(DOCTEST_SUITE)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    agent = loop_ws.write_agent(
        {"when": "calc.add", "file": "calc.py", "replace": "a - b", "with": "a + b"}
    )
    loop_ws.new_loop()
    loop = loop_ws.open(test_command="python -m unittest -v", agents={"codex": agent})
    result = loop.run()
    assert result.outcome == "completed", result.message
    assert loop.events() == [
        "init",
        "develop",
        "validate",
        "debug",
        "validate",
        "debug",
        "fix",
        "validate",
        "complete",
    ]
    (hypothesis,) = loop.doc.skill_state.debug.hypotheses
    assert hypothesis.status == "confirmed"
    assert str(hypothesis.verdict_reason).startswith("failed in two full runs")


def test_debug_hypothesis_names_error_and_location(loop_ws: Any, started: Any) -> None:
    """A confirmed hypothesis carries the error, the trace location and the re-run evidence."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started()
    _developed(loop)
    loop.fire("validate")
    loop.fire("debug")
    debug = loop.doc.skill_state.debug
    (h1,) = debug.hypotheses
    assert (h1.id, h1.status, h1.likelihood) == ("H1", "confirmed", 1)
    assert h1.logging_point == "tests/test_calc.py:test_add:5"
    assert "assert -1 == 5" in h1.description
    assert h1.evidence is not None and h1.evidence["exit_code"] == 1
    assert (debug.confirmed_hypothesis, debug.iteration, debug.hypotheses_count) == ("H1", 1, 1)
    log = [json.loads(x) for x in loop_ws.progress("debug.log").read_text().splitlines()]
    assert [(r["hid"], r["status"]) for r in log] == [("H1", "confirmed")]
    assert "### H1 (confirmed" in loop_ws.progress("debug.md").read_text()


def test_fix_task_is_developed_before_other_pending_tasks(loop_ws: Any, started: Any) -> None:
    """The fix for a confirmed hypothesis is inserted before the remaining pending tasks."""
    loop_ws.write_project(bug=True)
    agent = loop_ws.write_agent(loop_ws.fix_add)
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started(mode="interactive", agents={"codex": agent})
    for event in ("init", "develop", "validate", "debug"):
        loop.fire(event)
    raw = loop.data
    raw["skill_state"]["develop"]["tasks"].append(
        {"id": "later", "description": "later", "status": "pending"}
    )
    loop_ws.write_document(raw)
    loop.fire("fix")
    tasks = loop.doc.skill_state.develop.tasks
    assert [(t.id, t.status) for t in tasks] == [
        ("t1", "completed"),
        ("fix-H1", "completed"),
        ("later", "pending"),
    ]


GEMINI_EVENTS = "\n".join(
    json.dumps(event)
    for event in [
        {"type": "init", "timestamp": "t", "session_id": "s", "model": "m"},
        {
            "type": "message",
            "timestamp": "t",
            "role": "assistant",
            "content": "calc.py ",
            "delta": True,
        },
        {
            "type": "message",
            "timestamp": "t",
            "role": "assistant",
            "content": "looks right.",
            "delta": True,
        },
        {
            "type": "result",
            "timestamp": "t",
            "status": "success",
            "stats": {"input_tokens": 90, "output_tokens": 7, "cached": 0},
        },
    ]
)


def test_an_agent_task_step_records_what_the_agent_reported(loop_ws: Any, started: Any) -> None:
    """The develop step that ran an agent speaking gemini's events keeps, in its journal
    record, the agent's final message and tokens; the task's output is that final message."""
    from fsm.testing import Reply

    agent = Reply(stdout=GEMINI_EVENTS, output="gemini-stream-json")
    loop_ws.write_tasks(
        [{**BASH, "tool": "gemini", "mode": "analysis", "prompt_template": "Review calc"}]
    )
    loop = started(agents={"gemini": agent})
    done, _ = _developed(loop)
    assert done.status == "completed"
    (step,) = [r for r in loop.journal() if r.get("event") == "develop"]
    (run,) = step["agents"]
    assert (run["tool"], run["mode"], run["ok"], run["output"]) == (
        "gemini",
        "analysis",
        True,
        "gemini-stream-json",
    )
    assert run["final_message"] == "calc.py looks right."
    assert run["usage"] == {"input_tokens": 90, "output_tokens": 7, "cached_input_tokens": 0}
    assert next(r for r in loop.journal() if r.get("event") == "init").get("agents") is None
