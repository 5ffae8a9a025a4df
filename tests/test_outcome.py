"""Outcomes that tell the truth: a machine's verdict decides success, and a run refuses to start
when what it needs is missing."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.base.errors import MissingRequirementError
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine, load_machine
from fsm.model.records import ControlRecord, ErrorRecord, TransitionRecord
from fsm.process.executor import AgentCommand, SubprocessExecutor
from fsm.store.journal import Journal
from tests.conftest import ENGINE_MACHINES, Cli

JUDGED = ENGINE_MACHINES / "judged" / "machine.yaml"
J = str(JUDGED)


@pytest.fixture
def judged() -> Machine:
    """The judged test machine: final state tagged success, verdict from the document."""
    return load_machine(JUDGED)


def _program(folder: Path, name: str, code: int) -> str:
    """An executable script in ``folder`` that exits ``code``; return its absolute path."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _new(cli: Cli, workspace: Path, parts: list[dict[str, Any]], **extra: Any) -> None:
    inputs = workspace / "inputs.json"
    inputs.write_text(json.dumps({"parts": parts, **extra}))
    created = cli("new", J, "--id", "b1", "--input", str(inputs))
    assert created.code == 0, created.err


def test_success_state_with_failed_work_is_a_failure(cli: Cli, tmp_path: Path) -> None:
    """A run that reaches a success-tagged state while a part failed exits 4 and says why, on
    the run's last line, in status (human and JSON) and in ls --json."""
    ok = _program(tmp_path, "ok.sh", 0)
    bad = _program(tmp_path, "bad.sh", 1)
    _new(cli, tmp_path, [{"name": "a", "program": ok}, {"name": "b", "program": bad}])

    ran = cli("run", J, "b1")
    assert ran.code == 4
    assert ran.out.strip().splitlines()[-1] == (
        "b1: failed in state 'done' after 3 steps: 1 of 2 parts failed: b"
    )
    shown = cli("status", J, "b1")
    assert "outcome: failure: 1 of 2 parts failed: b" in shown.out
    as_json = cli("status", J, "b1", "--json").json()
    assert (as_json["outcome"], as_json["reason"]) == ("failure", "1 of 2 parts failed: b")
    [row] = _ls(cli)
    assert (row["outcome"], row["reason"]) == ("failure", "1 of 2 parts failed: b")


def _ls(cli: Cli) -> list[dict[str, Any]]:
    """`fsm ls --json` of the judged machine, named by path."""
    result = cli("ls", J, "--json")
    assert result.code == 0, result.err
    rows: list[dict[str, Any]] = result.json()
    return rows


def test_success_needs_the_verdict(cli: Cli, tmp_path: Path) -> None:
    """When every part was built the run completes with exit 0 and the verdict's reason."""
    ok = _program(tmp_path, "ok.sh", 0)
    _new(cli, tmp_path, [{"name": "a", "program": ok}])
    ran = cli("run", J, "b1")
    assert ran.code == 0
    assert ran.out.strip().endswith("completed in state 'done' after 2 steps: all 1 parts built")
    assert cli("status", J, "b1", "--json").json()["outcome"] == "success"


def test_a_broken_outcome_hook_never_reports_success(
    workspace: Workspace, judged: Machine, tmp_path: Path
) -> None:
    """An outcome hook that raises makes the verdict a failure naming the error."""
    instance = workspace.instance(judged, "b1")
    instance.create({"parts": [], "judge_raises": True})
    result = Engine(instance).run()
    assert result.outcome == "failed" and result.exit_code == 4
    assert "could not be judged: RuntimeError: the judge is broken" in result.message


def test_without_outcome_hook_tags_decide(cli: Cli) -> None:
    """A machine without an outcome hook is judged by its final state's tags."""
    counter = str(Path(__file__).parent.parent / "examples" / "counter" / "machine.yaml")
    assert cli("new", counter, "--id", "c1", "--set", "limit=1").code == 0
    ran = cli("run", counter, "c1")
    assert ran.code == 0 and ran.out.strip().endswith("ended in success state 'done'")


def test_fire_into_a_final_state_reports_the_verdict(
    workspace: Workspace, judged: Machine, tmp_path: Path, cli: Cli
) -> None:
    """`fsm step` into a success-tagged final state exits 4 when the verdict is a failure."""
    bad = _program(tmp_path, "bad.sh", 1)
    _new(cli, tmp_path, [{"name": "a", "program": bad}])
    assert cli("start", J, "b1").code == 0
    assert cli("step", J, "b1").code == 0  # builds (and fails) the part
    finished = cli("step", J, "b1")
    assert finished.code == 4
    assert finished.out.strip() == "b1: todo -> done (finish): failure: 1 of 1 parts failed: a"


def test_missing_program_refuses_the_run_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    """A run whose preflight finds a program missing exits 2 with one line naming it; the
    instance is not started and its document and journal are untouched."""
    ok = _program(tmp_path, "ok.sh", 0)
    _new(cli, tmp_path, [{"name": "a", "program": ok}, {"name": "b", "program": "no-such-tool"}])
    document = tmp_path / "builds" / "b1.json"
    journal = tmp_path / "builds" / "b1.fsm" / "journal.ndjson"
    before = (document.read_bytes(), journal.read_bytes())

    ran = cli("run", J, "b1")
    assert ran.code == 2
    assert ran.err.strip().splitlines() == [
        "fsm: error: instance 'b1' cannot run: program 'no-such-tool' (part b) is not installed"
    ]
    assert (document.read_bytes(), journal.read_bytes()) == before
    assert cli("status", J, "b1", "--json").json()["status"] == "created"


def test_preflight_reports_every_missing_requirement(workspace: Workspace, judged: Machine) -> None:
    """The error lists each missing requirement, not only the first."""
    instance = workspace.instance(judged, "b1")
    parts = [{"name": "a", "program": "nope-1"}, {"name": "b", "program": "nope-2"}]
    instance.create({"parts": parts})
    with pytest.raises(MissingRequirementError) as caught:
        Engine(instance).run()
    assert caught.value.missing == [
        "program 'nope-1' (part a) is not installed",
        "program 'nope-2' (part b) is not installed",
    ]


def test_preflight_is_not_asked_when_the_run_will_do_nothing(
    workspace: Workspace, judged: Machine
) -> None:
    """A paused instance is not driven by run, so a missing program does not refuse it: the
    run reports the pause (exit 5) as before."""
    from fsm.engine.control import ControlPlane

    instance = workspace.instance(judged, "b1")
    instance.create({"parts": [{"name": "a", "program": "nope"}]})
    ControlPlane(instance).apply("start")
    ControlPlane(instance).apply("pause")
    result = Engine(instance).run()
    assert result.outcome == "paused" and result.exit_code == 5


def test_has_program_finds_names_on_path_and_executable_paths(tmp_path: Path) -> None:
    """has_program: a name on PATH, a path relative to the workspace or absolute, executable."""
    executor = SubprocessExecutor(tmp_path)
    script = _program(tmp_path, "tool.sh", 0)
    (tmp_path / "plain.txt").write_text("not a program")
    assert executor.has_program("sh")
    assert executor.has_program(script)
    assert executor.has_program("./tool.sh")
    assert not executor.has_program("./plain.txt")
    assert not executor.has_program("no-such-program-anywhere")


def test_has_agent_needs_the_configured_program(tmp_path: Path) -> None:
    """An fsm.toml agent table whose program is not installed is not an available agent."""
    executor = SubprocessExecutor(
        tmp_path,
        {
            "ghost": AgentCommand(("ghost-cli-not-installed", "{prompt}")),
            "echo": AgentCommand(("echo", "{prompt}")),
            "half": AgentCommand(("echo", "{prompt}"), ("ghost-cli-not-installed", "{prompt}")),
        },
    )
    assert executor.has_agent("echo")
    assert not executor.has_agent("ghost")
    assert not executor.has_agent("half")


def test_journal_reads_backwards_across_blocks_and_skips_a_torn_tail(tmp_path: Path) -> None:
    """Journal.backwards yields every record newest first, records spanning read blocks
    included, and skips a torn last line."""
    journal = Journal(tmp_path / "journal.ndjson")
    for number in range(300):
        journal.append({"kind": "note", "n": number, "pad": "x" * (number * 7 % 900)})
    with journal.path.open("a") as handle:
        handle.write('{"kind": "tr')
    numbers = [record["n"] for record in journal.backwards()]
    assert numbers == list(range(299, -1, -1))
    last = journal.last()
    assert last is not None and last.extra == {"n": 299, "pad": "x" * (299 * 7 % 900)}


def test_last_error_is_only_an_error_not_followed_by_a_working_step(tmp_path: Path) -> None:
    """last_error finds the latest failed step unless a transition came after it."""
    journal = Journal(tmp_path / "journal.ndjson")
    assert journal.last_error() is None
    journal.write(
        ErrorRecord(event="go", source="a", dest="a", transition=0, action="act", error="first")
    )
    journal.write(
        ControlRecord(
            event="pause", source="a", dest="a", status_from="running", status_to="paused"
        )
    )
    error = journal.last_error()
    assert error is not None and (error.action, error.error) == ("act", "first")
    journal.write(TransitionRecord(event="go", source="a", dest="a", transition=0))
    assert journal.last_error() is None


def test_paused_status_names_the_last_error(make_counter: Callable[..., Instance]) -> None:
    """`status` of an instance that is not final shows the failure that stopped it."""
    from fsm.engine.control import ControlPlane
    from fsm.view.inspect import status

    instance = make_counter(limit=3, fail_at=0, max_errors=5)
    engine = Engine(instance)
    ControlPlane(instance).apply("start")
    engine.step()
    ControlPlane(instance).apply("pause")
    info = status(instance)
    assert info.outcome is None
    assert info.reason == "last error: increment: RuntimeError: cannot count past 0"
