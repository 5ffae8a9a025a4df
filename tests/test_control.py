"""The control plane: start, pause, resume and stop with the machine's guard table."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from fsm.base.errors import ControlRefusedError
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance

MakeCounter = Callable[..., Instance]

# The counter machine's table: start from created|paused, pause from running, resume from paused,
# stop from created|running|paused.
LEGAL = {
    ("created", "start"): "running",
    ("paused", "start"): "running",
    ("running", "pause"): "paused",
    ("paused", "resume"): "running",
    ("created", "stop"): "failed",
    ("running", "stop"): "failed",
    ("paused", "stop"): "failed",
}
STATUSES = ["created", "running", "paused"]
COMMANDS = ["start", "pause", "resume", "stop"]


def at_status(make: MakeCounter, status: str) -> Instance:
    """A counter instance whose control status is ``status``."""
    instance = make(limit=5)
    plane = ControlPlane(instance)
    if status in {"running", "paused"}:
        plane.apply("start")
    if status == "paused":
        plane.apply("pause")
    return instance


@pytest.mark.parametrize(
    ("status", "command"),
    [(s, c) for s in STATUSES for c in COMMANDS if (s, c) in LEGAL],
    ids=lambda v: str(v),
)
def test_legal_control_commands_set_the_declared_status(
    make_counter: MakeCounter, status: str, command: str
) -> None:
    """Each legal (status, command) pair moves the status as the machine declares."""
    instance = at_status(make_counter, status)
    saved = ControlPlane(instance).apply(command, actor="tester", reason="because")
    assert saved.status == LEGAL[(status, command)]
    record = instance.journal.read().records[-1]
    assert record["kind"] == "control"
    assert (record["event"], record["actor"], record["reason"]) == (command, "tester", "because")
    assert (record["status_from"], record["status_to"]) == (status, LEGAL[(status, command)])


@pytest.mark.parametrize(
    ("status", "command"),
    [(s, c) for s in STATUSES for c in COMMANDS if (s, c) not in LEGAL],
    ids=lambda v: str(v),
)
def test_illegal_control_commands_are_refused_and_change_nothing(
    make_counter: MakeCounter, status: str, command: str
) -> None:
    """A command illegal in the current status is refused; document and journal are unchanged."""
    instance = at_status(make_counter, status)
    before = instance.store.paths(instance.id).document.read_bytes()
    records = len(instance.journal.read().records)
    with pytest.raises(ControlRefusedError, match=f"cannot {command}.*it is {status}"):
        ControlPlane(instance).apply(command)
    assert instance.store.paths(instance.id).document.read_bytes() == before
    assert len(instance.journal.read().records) == records


def test_stop_moves_to_failure_state_with_reason(make_counter: MakeCounter) -> None:
    """Stop sets status failed, the failure final state, and the stop action's failure_reason."""
    instance = at_status(make_counter, "running")
    saved = ControlPlane(instance).apply("stop")
    document = json.loads(instance.store.paths(instance.id).document.read_text())
    assert (saved.state, document["status"]) == ("failed", "failed")
    assert document["failure_reason"] == "Manually stopped by user"


def test_commands_after_a_final_state_are_refused(make_counter: MakeCounter) -> None:
    """Once an instance has ended, no control command applies."""
    instance = make_counter(limit=0)
    Engine(instance).run()
    with pytest.raises(ControlRefusedError, match="final state 'done'"):
        ControlPlane(instance).apply("stop")


def test_unknown_command_is_refused(make_counter: MakeCounter) -> None:
    """A command the machine does not declare is refused with the declared ones."""
    instance = make_counter(limit=1)
    with pytest.raises(ControlRefusedError, match="has no 'restart' command"):
        ControlPlane(instance).apply("restart")


def test_run_of_a_paused_instance_does_not_step(make_counter: MakeCounter) -> None:
    """A run of a paused instance stops at once with the paused outcome (exit 5)."""
    instance = at_status(make_counter, "paused")
    result = Engine(instance).run()
    assert (result.outcome, result.exit_code, result.steps) == ("paused", 5, [])
    assert json.loads(instance.store.paths(instance.id).document.read_text())["count"] == 0


def test_run_after_resume_continues_where_it_was(make_counter: MakeCounter) -> None:
    """Pause after two steps, resume, run: the count continues to the limit."""
    instance = make_counter(limit=4)
    Engine(instance).run(max_steps=2)
    ControlPlane(instance).apply("pause")
    assert Engine(instance).run().outcome == "paused"
    ControlPlane(instance).apply("resume")
    result = Engine(instance).run()
    assert (result.outcome, len(result.steps)) == ("completed", 3)
    assert json.loads(instance.store.paths(instance.id).document.read_text())["count"] == 4


def test_run_of_a_stopped_instance_reports_failure(make_counter: MakeCounter) -> None:
    """A stopped instance is in its failure final state: run ends with exit 4."""
    instance = at_status(make_counter, "created")
    ControlPlane(instance).apply("stop")
    result = Engine(instance).run()
    assert (result.outcome, result.exit_code) == ("failed", 4)


def test_machine_without_control_refuses_commands(workspace: object, bare: object) -> None:
    """A machine with no control block has no control commands."""
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine

    assert isinstance(workspace, Workspace) and isinstance(bare, Machine)
    instance = workspace.instance(bare, "t")
    instance.create({})
    with pytest.raises(ControlRefusedError, match="has no control commands"):
        ControlPlane(instance).apply("pause")


def test_a_command_another_fsm_journaled_is_not_undone_by_a_later_load(
    make_counter: MakeCounter,
) -> None:
    """A process that paused an instance, then loads it after another fsm process (a second
    Instance: `fsm resume`, the server) resumed it, sees it running: a version the journal
    ends with is fsm's own work, never an older copy written back to be merged over."""
    paused = at_status(make_counter, "paused")
    other = paused.workspace.instance(paused.machine, paused.id)
    ControlPlane(other).apply("resume", actor="elsewhere")
    assert paused.load().status == "running"
    assert paused.load().status == "running"
    records = paused.journal.read().records
    assert [(r["kind"], r.get("event")) for r in records][-2:] == [
        ("control", "pause"),
        ("control", "resume"),
    ]
    assert records[-1]["actor"] == "elsewhere"
