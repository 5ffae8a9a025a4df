"""fsm.testing: the harness drives the real engine, the scripted executor answers by pattern."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from fsm.base.errors import MissingRequirementError
from fsm.model.config import load_config
from fsm.model.machine import load_machine
from fsm.process.executor import AgentCommand, SubprocessExecutor
from fsm.testing import Call, Harness, MemoryStorage, Reply, ScriptedExecutor, applied
from tests.conftest import COUNTER, ENGINE_MACHINES

JUDGED = ENGINE_MACHINES / "judged" / "machine.yaml"
ROOT = Path(__file__).resolve().parent.parent


def test_a_run_is_driven_to_its_end_and_its_path_read_from_the_journal(tmp_path: Path) -> None:
    """A created counter runs to done; path, events and outcome come from journal and verdict."""
    counter = Harness(COUNTER, tmp_path).create({"limit": 2}, instance_id="c1")
    result = counter.run()
    assert (result.outcome, counter.state, counter.status) == ("completed", "done", "done")
    counter.assert_path(["idle", "counting", "counting", "done"])
    counter.assert_events(["count", "count", "finish"])
    counter.assert_outcome("completed", "ended in success state 'done'")
    counter.assert_consistent()
    assert [version["count"] for version in counter.written] == [0, 0, 1, 2, 2]
    assert (tmp_path / ".counters" / "c1.json").is_file()


def test_the_harness_runs_a_machine_against_another_store(tmp_path: Path) -> None:
    """With ``storage=MemoryStorage()`` the same scenario runs with documents and journals in
    memory: the driver reads them from the store, and no document is written to disk."""
    storage = MemoryStorage()
    counter = Harness(COUNTER, tmp_path, storage=storage).create({"limit": 2}, instance_id="c1")
    assert counter.run().outcome == "completed"
    counter.assert_path(["idle", "counting", "counting", "done"])
    counter.assert_consistent()
    assert counter.data["count"] == 2
    assert storage.store_of(counter.instance.machine).read("c1").data == counter.data
    assert not (tmp_path / ".counters").exists()


def test_a_failed_step_is_an_event_with_a_bang_and_no_state(tmp_path: Path) -> None:
    """A step whose action raised is shown as ``event!``; the path stays where it was."""
    counter = Harness(COUNTER, tmp_path).create({"limit": 3, "fail_at": 1, "max_errors": 1})
    assert counter.run().outcome == "failed"
    counter.assert_events(["count", "count!", "abort"])
    counter.assert_path(["idle", "counting", "failed"])


def test_run_until_stops_when_a_step_enters_the_state(tmp_path: Path) -> None:
    """run_until takes steps until one enters the state, starting a created instance first."""
    counter = Harness(COUNTER, tmp_path).create({"limit": 5})
    result = counter.run_until("counting")
    assert ([s.event for s in result.steps], counter.doc.model_dump()["count"]) == (["count"], 1)
    assert counter.run_until("done").state == "done"
    counter.assert_path(["idle", *["counting"] * 5, "done"])


def test_run_until_fails_naming_where_the_run_ended(tmp_path: Path) -> None:
    """A run that ends before entering the state fails the test with its outcome and path."""
    counter = Harness(COUNTER, tmp_path).create({"limit": 1})
    with pytest.raises(AssertionError, match=r"ended completed in state 'done' before entering "):
        counter.run_until("failed")
    failing = Harness(COUNTER, tmp_path).create({"limit": 9, "fail_at": 0})
    with pytest.raises(AssertionError, match=r"'counting' not entered in 2 steps"):
        failing.run_until("counting", max_steps=2)


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (lambda c: c.assert_path(["idle", "done"]), "path ['idle', 'counting', 'done'], expected"),
        (lambda c: c.assert_events(["finish"]), "events ['count', 'finish'], expected"),
        (lambda c: c.assert_outcome("failed"), "completed (ended in success state 'done')"),
        (lambda c: c.assert_outcome("completed", "no"), 'reason "ended in success state'),
        (lambda c: c.assert_outcome("completed", re.compile("^no")), "!~ ^no"),
    ],
    ids=["path", "events", "outcome", "reason", "reason-pattern"],
)
def test_assertions_say_what_happened(tmp_path: Path, check: object, message: str) -> None:
    """Each assertion fails with what the instance did, not only that it differs."""
    counter = Harness(COUNTER, tmp_path).create({"limit": 1})
    counter.run()
    assert callable(check)
    with pytest.raises(AssertionError) as failure:
        check(counter)
    assert message.replace('"', "'") in str(failure.value).replace('"', "'")


def test_an_instance_that_has_not_ended_has_no_outcome(tmp_path: Path) -> None:
    """assert_outcome on an instance in a non-final state fails naming the state."""
    counter = Harness(COUNTER, tmp_path).create({"limit": 3})
    with pytest.raises(AssertionError, match="not in a final state: 'idle'"):
        counter.assert_outcome("completed")


def test_scripted_programs_decide_the_verdict_and_the_preflight(tmp_path: Path) -> None:
    """Programs an action runs are answered by rules; has_program is true for the scripted
    names only, so a preflight that needs another refuses the run."""
    executor = ScriptedExecutor(programs={"make-a", "make-b"})
    executor.on_run(program="make-a").on_run(Reply(exit_code=2), program="make-b")
    harness = Harness(JUDGED, tmp_path, executor=executor)
    parts = [{"name": "a", "program": "make-a"}, {"name": "b", "program": "make-b"}]
    build = harness.create({"parts": parts})
    assert build.run().outcome == "failed"
    build.assert_outcome("failed", "1 of 2 parts failed: b")
    assert [(c.kind, c.tool, c.argv, c.cwd) for c in executor.calls] == [
        ("run", "make-a", ("make-a",), tmp_path.resolve()),
        ("run", "make-b", ("make-b",), tmp_path.resolve()),
    ]
    missing = harness.create({"parts": [{"name": "c", "program": "make-c"}]})
    with pytest.raises(MissingRequirementError, match="program 'make-c'"):
        missing.run()
    assert missing.status == "created"


def test_replies_come_in_turn_and_the_last_one_repeats(tmp_path: Path) -> None:
    """A rule's replies answer its calls in order; the last answers every later call."""
    executor = ScriptedExecutor(workspace=tmp_path)
    executor.on_shell(Reply(exit_code=1), Reply(stdout="second"), match="^make")
    answers = [executor.shell("make all") for _ in range(3)]
    assert [(r.exit_code, r.stdout) for r in answers] == [(1, ""), (0, "second"), (0, "second")]
    assert answers[0].describe() == "exited 1: make all"


def test_the_rule_added_last_answers_first(tmp_path: Path) -> None:
    """A general rule and then an exception: the exception answers the calls it matches."""
    executor = ScriptedExecutor(workspace=tmp_path)
    executor.on_agent("reviewer", Reply(stdout="APPROVE"))
    executor.on_agent("reviewer", Reply(stdout="CHANGES"), match=lambda p: "b.py" in p)
    assert executor.agent("reviewer", "review a.py").stdout == "APPROVE"
    assert executor.agent("reviewer", "review b.py", mode="write").stdout == "CHANGES"
    assert executor.prompts("reviewer") == ["review a.py", "review b.py"]
    assert [(c.tool, c.mode) for c in executor.calls] == [
        ("reviewer", "analysis"),
        ("reviewer", "write"),
    ]
    assert (executor.has_agent("reviewer"), executor.has_agent("codex")) == (True, False)


def test_an_answer_may_edit_the_workspace_as_an_agent_would(tmp_path: Path) -> None:
    """A function answering a call gets the call (its folder and prompt) and may change files."""

    def fix(call: Call) -> Reply:
        (call.cwd / "notes.md").write_text(call.text)
        return Reply(stdout="edited notes.md")

    executor = ScriptedExecutor(workspace=tmp_path)
    executor.on_agent("codex", fix, match=r"^write ")
    result = executor.agent("codex", "write the notes", mode="write")
    assert (result.ok, result.stdout) == (True, "edited notes.md")
    assert (tmp_path / "notes.md").read_text() == "write the notes"
    executor.on_agent("codex", lambda call: None, match="quiet")
    assert executor.agent("codex", "quiet please").ok


def test_unscripted_calls_fail_or_run_for_real(tmp_path: Path) -> None:
    """Without a fallback a call no rule answers fails naming it; with one it runs for real
    and is recorded as unscripted."""
    strict = ScriptedExecutor(workspace=tmp_path)
    refused = strict.agent("codex", "fix it\nplease")
    assert (refused.ok, refused.error) == (False, "not scripted: agent codex: fix it")
    assert strict.run(["ls"]).error == "not scripted: run command: ls"
    assert not strict.has_program("ls")
    real = ScriptedExecutor(fallback=SubprocessExecutor(tmp_path))
    ran = real.shell("echo real > out.txt && echo done")
    assert (ran.ok, ran.stdout, (tmp_path / "out.txt").read_text()) == (True, "done\n", "real\n")
    assert (real.calls[0].scripted, real.has_program("bash")) == (False, True)


def test_unscripted_agents_use_the_harness_agent_tables(tmp_path: Path) -> None:
    """Agent tables given to the harness serve the calls no rule answers, as fsm.toml's do."""
    table = [sys.executable, "-c", "import sys; print('got', sys.argv[1])", "{prompt}"]
    harness = Harness(COUNTER, tmp_path, agents={"helper": table})
    result = harness.executor.agent("helper", "hello")
    assert (result.ok, result.stdout) == (True, "got hello\n")
    assert harness.executor.has_agent("helper")


def test_write_config_is_what_fsm_reads(tmp_path: Path) -> None:
    """fsm.toml written by the harness holds the machine's options and the agent tables."""
    harness = Harness(COUNTER, tmp_path)
    agent = AgentCommand(("codex", "exec", "{prompt}"), ("codex", "read", "{prompt}"))
    harness.write_config({"step_size": 2, "folder": "work"}, {"codex": agent, "qwen": ["q"]})
    config = load_config(tmp_path)
    assert config.machines == {"counter": {"step_size": 2, "folder": "work"}}
    assert config.agents == {"codex": agent, "qwen": AgentCommand(("q",))}
    counter = Harness(COUNTER, tmp_path).create({"limit": 4})
    assert [step.event for step in counter.run().steps] == ["count", "count", "finish"]
    assert (tmp_path / "work" / f"{counter.id}.json").is_file()


def test_options_are_given_as_the_command_line_gives_them(tmp_path: Path) -> None:
    """Harness options override fsm.toml; create takes more for one instance."""
    harness = Harness(COUNTER, tmp_path, options={"step_size": 3})
    harness.write_config({"step_size": 2})
    assert harness.create({"limit": 3}).run().steps[0].dest == "counting"
    assert len(harness.create({"limit": 6}).run().steps) == 3
    assert len(harness.create({"limit": 6}, step_size=6).run().steps) == 2


def test_a_machine_is_named_by_path_folder_name_or_loaded(tmp_path: Path) -> None:
    """The machine may be loaded, a machine file, its folder, or a registered name."""
    loaded = load_machine(COUNTER)
    for machine in (loaded, COUNTER, str(COUNTER.parent)):
        assert Harness(machine, tmp_path).machine.name == "counter"
    assert Harness("ccw-loop", tmp_path).machine.name == "ccw-loop"


def test_without_a_folder_the_harness_works_in_a_temporary_one() -> None:
    """Used as a context manager without a folder, the harness removes its workspace."""
    with Harness(COUNTER) as harness:
        counter = harness.create({"limit": 1})
        assert counter.run().outcome == "completed"
        root = harness.root
        assert root.is_dir()
    assert not root.exists()


class _Options(BaseModel):
    """A copy of the counter's options model, as a test importing the module would have."""

    folder: str = ".counters"
    step_size: int = 1
    delay: float = 0.0


def test_context_reads_the_options_as_the_test_model(tmp_path: Path) -> None:
    """context(Model) is the instance's context with its options as that model: a module the
    test imported itself (another copy of the machine's classes) reads them too."""
    counter = Harness(COUNTER, tmp_path, options={"step_size": 4}).create({"limit": 1})
    ctx = counter.context(_Options)
    assert (type(ctx.options), ctx.options.step_size) == (_Options, 4)
    assert (ctx.instance_id, ctx.instance_dir) == (counter.id, counter.instance.folders.files)
    same = counter.context(type(counter.instance.options))
    assert same.options is counter.instance.options


class _Doc(BaseModel):
    count: int = 0
    limit: int = 3


def test_applied_is_an_update_applied_and_validated(tmp_path: Path) -> None:
    """applied() applies an action's update as the engine does and validates the result."""
    assert applied(_Doc(count=1), {"count": 2}) == _Doc(count=2)
    assert applied(_Doc(), None) == _Doc()
    with pytest.raises(ValueError, match="count"):
        applied(_Doc(), {"count": "many"})


def test_the_harness_is_typed(tmp_path: Path) -> None:
    """mypy --strict accepts a test that uses the harness and reads typed documents, options
    and calls (assert_type checks the types exactly, so Any would fail)."""
    test = tmp_path / "test_typed.py"
    test.write_text(TYPED_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(test)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


TYPED_TEST = """
from __future__ import annotations

from pathlib import Path
from typing import assert_type

from pydantic import BaseModel

from fsm.model.context import Context
from fsm.process.executor import ExecResult
from fsm.model.outcome import RunResult, Verdict
from fsm.testing import Call, Driver, Harness, Reply, ScriptedExecutor, applied


class Doc(BaseModel):
    count: int = 0


class Options(BaseModel):
    step_size: int = 1


def edit(call: Call) -> Reply:
    (call.cwd / "x").write_text(call.text)
    return Reply(stdout="ok")


def check(tmp_path: Path) -> None:
    harness = Harness(Path("m/machine.yaml"), tmp_path, document=Doc)
    assert_type(harness, Harness[Doc])
    assert_type(harness.executor, ScriptedExecutor)
    harness.executor.on_agent("codex", edit, match=r"fix").on_shell(Reply(exit_code=1))
    driver = harness.create({"count": 1})
    assert_type(driver, Driver[Doc])
    assert_type(driver.doc, Doc)
    assert_type(driver.doc.count, int)
    assert_type(driver.run(), RunResult)
    assert_type(driver.context(Options), Context[Options])
    assert_type(driver.context(Options).options.step_size, int)
    assert_type(driver.verdict(), Verdict | None)
    assert_type(applied(driver.doc, {"count": 2}), Doc)
    assert_type(harness.executor.calls[0].result, ExecResult | None)
    untyped = Harness("counter", tmp_path)
    assert_type(untyped, Harness[BaseModel])
    assert_type(untyped.instance("c1").doc, BaseModel)
"""
