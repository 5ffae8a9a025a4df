"""Several processes on one instance: one run at a time, control commands from elsewhere."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fsm.engine.instance import Workspace
from fsm.model.machine import Machine
from fsm.view.inspect import replay
from tests.conftest import COUNTER, fsm_process
from tests.guarantees.waiting import is_running


def wait_for(predicate: object, timeout: float = 60.0) -> None:
    """Poll ``predicate`` until it is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def is_alive(pid: int) -> bool:
    """True while a process with ``pid`` runs (a killed one its parent has not collected yet,
    a zombie, counts as gone)."""
    return is_running(pid)


def transitions_in(instance_journal: Path) -> int:
    """How many transition records the journal holds."""
    if not instance_journal.exists():
        return 0
    return sum('"kind":"transition"' in line for line in instance_journal.read_text().splitlines())


def test_second_run_is_refused_while_one_is_in_progress(tmp_path: Path, counter: Machine) -> None:
    """A run of an instance that another process is running exits 6 and changes nothing."""
    workspace = Workspace(tmp_path)
    instance = workspace.instance(counter, "busy")
    instance.create({"limit": 1000})
    slow = fsm_process(tmp_path, "-o", "delay=0.05", "run", str(COUNTER), "busy")
    try:
        wait_for(lambda: transitions_in(instance.store.paths(instance.id).journal) >= 1)
        second = fsm_process(tmp_path, "run", str(COUNTER), "busy")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 6
        assert "already being run" in err
        assert "Traceback" not in err
    finally:
        fsm_process(tmp_path, "stop", str(COUNTER), "busy").communicate(timeout=120)
        slow.communicate(timeout=120)


def test_pause_from_another_process_stops_a_running_run(tmp_path: Path, counter: Machine) -> None:
    """A pause given while `fsm run` works is seen before the next step: exit 5, no step lost."""
    workspace = Workspace(tmp_path)
    instance = workspace.instance(counter, "p1")
    instance.create({"limit": 1000})
    run = fsm_process(tmp_path, "-o", "delay=0.05", "run", str(COUNTER), "p1")
    wait_for(lambda: transitions_in(instance.store.paths(instance.id).journal) >= 2)
    pause = fsm_process(tmp_path, "pause", str(COUNTER), "p1", "--reason", "lunch")
    pause.communicate(timeout=120)
    assert pause.returncode == 0
    _, err = run.communicate(timeout=120)
    assert run.returncode == 5, err
    document = json.loads(instance.store.paths(instance.id).document.read_text())
    assert document["status"] == "paused"
    # Every committed step is in the document: the last count equals the number of transitions.
    assert document["count"] == transitions_in(instance.store.paths(instance.id).journal)
    controls = [r for r in instance.journal.read().records if r["kind"] == "control"]
    assert controls[-1]["event"] == "pause"
    assert controls[-1]["reason"] == "lunch"
    assert replay(instance).problems == []


def test_stop_from_another_process_ends_the_run_failed(tmp_path: Path, counter: Machine) -> None:
    """A stop given while `fsm run` works ends the run with exit 4 in the failure state."""
    workspace = Workspace(tmp_path)
    instance = workspace.instance(counter, "s1")
    instance.create({"limit": 1000})
    run = fsm_process(tmp_path, "-o", "delay=0.05", "run", str(COUNTER), "s1")
    wait_for(lambda: transitions_in(instance.store.paths(instance.id).journal) >= 1)
    fsm_process(tmp_path, "stop", str(COUNTER), "s1").communicate(timeout=120)
    run.communicate(timeout=120)
    assert run.returncode == 4
    document = json.loads(instance.store.paths(instance.id).document.read_text())
    assert (document["status"], document["phase"]) == ("failed", "failed")
    assert document["failure_reason"] == "Manually stopped by user"
    assert replay(instance).problems == []


@pytest.mark.parametrize(("signame", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_terminated_run_takes_its_running_command_down(
    tmp_path: Path, signame: str, code: int
) -> None:
    """SIGTERM, SIGHUP (a closed terminal) or Ctrl-C to `fsm run` kills the command its step
    runs, says `interrupted` and exits 128 plus the signal; the document stays as it was."""
    import signal

    from fsm.model.machine import load_machine
    from tests.conftest import ENGINE_MACHINES

    machine = load_machine(ENGINE_MACHINES / "slow" / "machine.yaml")
    workspace = Workspace(tmp_path)
    instance = workspace.instance(machine, "slow1")
    instance.create({})
    before = instance.store.paths(instance.id).document.read_bytes()
    run = fsm_process(tmp_path, "run", str(ENGINE_MACHINES / "slow" / "machine.yaml"), "slow1")
    pid_file = tmp_path / "child.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip())
    child = int(pid_file.read_text())
    run.send_signal(getattr(signal, signame))
    _, err = run.communicate(timeout=120)
    assert run.returncode == code, err
    assert err.strip().endswith("fsm: error: interrupted") and "Traceback" not in err
    wait_for(lambda: not is_alive(child))
    assert instance.store.paths(instance.id).document.read_bytes() == before


def test_command_left_by_a_killed_run_is_killed_by_the_next_one(tmp_path: Path) -> None:
    """After `fsm run` is SIGKILLed mid-command, the next run kills that command before stepping."""
    import os
    import signal

    from fsm.engine.engine import Engine
    from fsm.model.machine import load_machine
    from tests.conftest import ENGINE_MACHINES

    slow = ENGINE_MACHINES / "slow" / "machine.yaml"
    workspace = Workspace(tmp_path)
    instance = workspace.instance(load_machine(slow), "slow2")
    instance.create({})
    run = fsm_process(tmp_path, "run", str(slow), "slow2")
    pid_file = tmp_path / "child.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip())
    # the command may write its pid before fsm has recorded it: kill the run once it has
    wait_for(lambda: list((instance.store.paths(instance.id).meta / "running").glob("*.json")))
    child = int(pid_file.read_text())
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=120)
    os.kill(child, 0)  # the killed run's command is still alive
    assert list((instance.store.paths(instance.id).meta / "running").glob("*.json"))
    result = Engine(instance).run(max_steps=0)
    assert result.outcome == "limit"
    wait_for(lambda: not is_alive(child))
    assert not list((instance.store.paths(instance.id).meta / "running").glob("*.json"))
    assert "orphaned_command_killed" in instance.store.paths(instance.id).log.read_text()
