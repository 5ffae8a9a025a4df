"""``fsm status`` says who drives an instance: the live run (from its heartbeat) with the action
in progress and its age, or that nobody does and which command would, when it waits for a run."""

from __future__ import annotations

import time
from pathlib import Path

from fsm.cli.commands import driver_line
from fsm.engine.instance import Workspace
from fsm.store.heartbeat import Pulse, heartbeats_of
from tests.conftest import COUNTER, Cli

C = str(COUNTER)


def _driver(cli: Cli, instance_id: str) -> list[str]:
    shown = cli("status", C, instance_id)
    assert shown.code == 0, shown.err
    return [line.strip() for line in shown.out.splitlines() if line.strip().startswith("driver:")]


def test_an_instance_waiting_for_a_run_says_nobody_drives_it(cli: Cli) -> None:
    """Created, or started (status running) with no run attached: the status names nobody and
    gives the command that would drive it; --json has driver null and runnable true."""
    assert cli("new", C, "--id", "w").code == 0
    expected = [f"driver:  nobody is driving it: 'fsm run {C} w' would"]
    assert _driver(cli, "w") == expected
    assert cli("start", C, "w").code == 0
    assert _driver(cli, "w") == expected
    info = cli("status", C, "w", "--json").json()
    assert (info["driver"], info["runnable"]) == (None, True)


def test_paused_and_ended_instances_need_no_driver(cli: Cli) -> None:
    """A paused instance waits for a person, an ended one for nothing: no driver line."""
    assert cli("new", C, "--id", "p", "--set", "limit=1").code == 0
    assert cli("start", C, "p").code == 0
    assert cli("pause", C, "p").code == 0
    assert _driver(cli, "p") == []
    assert cli("resume", C, "p").code == 0
    assert cli("run", C, "p").code == 0
    assert _driver(cli, "p") == []
    assert cli("status", C, "p", "--json").json()["runnable"] is False


def test_a_live_run_is_named_with_its_action(cli: Cli, tmp_path: Path) -> None:
    """While a run's heartbeat is live, the status names the run, its process and host, and
    the action in progress; once the run lets go, nobody again."""
    assert cli("new", C, "--id", "d").code == 0
    instance = Workspace(tmp_path).instance(C, "d")
    pulse = Pulse(heartbeats_of(instance.store), "d", "worker", "idle")
    pulse.doing("increment", "counting")
    with pulse.running():
        (line,) = _driver(cli, "d")
        beat = pulse.current
        assert line.startswith(f"driver:  worker pid {beat.pid} on {beat.host}, action increment")
        info = cli("status", C, "d", "--json").json()
        assert info["driver"]["action"] == "increment" and info["driver"]["driver"] == "worker"
    assert _driver(cli, "d")[0].startswith("driver:  nobody is driving it")


def test_the_action_age_counts_from_its_start() -> None:
    """The age shown is the time since the action started, in whole seconds."""
    beat = {"driver": "run", "pid": 7, "host": "h", "action": "develop", "action_started": 100.0}
    assert driver_line(beat, True, "x", now=112.4) == "run pid 7 on h, action develop for 12 s"
    between = {**beat, "action": None, "action_started": None}
    assert driver_line(between, True, "x", now=time.time()) == "run pid 7 on h"
    assert driver_line(None, False, "x") == ""
