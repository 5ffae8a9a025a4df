"""``fsm serve --drive``: the server drives the runnable instances itself, so that Start and
Resume from the page take effect with nothing else running; each run is ``fsm run --actor
serve`` in a process of its own, and the server never spins on an instance that stays
runnable."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import load_machine
from fsm.serve.drive import Driver
from fsm.serve.views import Served
from fsm.serve.watch import Change, ChangeFeed
from fsm.store.heartbeat import Heartbeat, heartbeats_of
from tests.conftest import COUNTER, CliResult
from tests.serve.conftest import ServeProcess, make_served

DEADLINE = 30.0

# --- which instances the driver starts (its runs replaced by a stand-in) -------------------


def _counters(path: Path) -> dict[str, Instance]:
    """Counters in every situation a driver meets."""
    workspace = Workspace(path)
    counter = load_machine(COUNTER)
    made = {name: workspace.instance(counter, name) for name in ("created", "running", "paused")}
    made["done"] = workspace.instance(counter, "done")
    for instance in made.values():
        instance.create({"limit": 2})
    ControlPlane(made["running"]).apply("start")
    ControlPlane(made["paused"]).apply("start")
    ControlPlane(made["paused"]).apply("pause")
    Engine(made["done"]).run()
    return made


def _stand_in(log: Path, outcome: str) -> Callable[[tuple[str, str]], list[str]]:
    """A run that only notes its instance and says it ended with ``outcome``."""
    code = (
        "import sys\n"
        f"open({str(log)!r}, 'a').write(sys.argv[1] + '\\n')\n"
        f"print(sys.argv[1] + ': {outcome} in state \\'counting\\' after 0 steps')\n"
    )
    return lambda key: [sys.executable, "-c", code, key[1]]


def _launched(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the driver did not get there")
        await asyncio.sleep(0.02)


def _idle(driver: Driver) -> Callable[[], bool]:
    return lambda: not driver.pending and not driver.running


async def _driving(
    served: Served, log: Path, outcome: str, steps: Callable[[Driver, ChangeFeed], Any]
) -> Driver:
    feed = ChangeFeed([])
    with open(os.devnull, "w") as out:
        driver = Driver(served, feed, 2, out=out, argv=_stand_in(log, outcome))
        stop = asyncio.Event()
        task = asyncio.create_task(driver.run(stop))
        try:
            await _until(lambda: driver.looked >= 4 and _idle(driver)())
            await steps(driver, feed)
        finally:
            stop.set()
            await task
    return driver


def test_the_driver_starts_what_run_all_would_run(tmp_path: Path) -> None:
    """Created and running instances are driven; paused and ended ones are not."""
    _counters(tmp_path)
    log = tmp_path / "launched"

    async def nothing(driver: Driver, feed: ChangeFeed) -> None:
        return None

    asyncio.run(_driving(make_served(tmp_path), log, "waiting", nothing))
    assert sorted(_launched(log)) == ["created", "running"]


def test_an_instance_left_runnable_is_started_again_only_once_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that ends with its instance still runnable (waiting for a person) is not started
    again on a change that leaves the instance as it was, only once the instance changed; so
    even when noting how the instance was left takes a while (a loaded machine)."""
    real_mark = Driver._mark

    def slow_mark(self: Driver, key: tuple[str, str]) -> Any:
        time.sleep(0.3)
        return real_mark(self, key)

    monkeypatch.setattr(Driver, "_mark", slow_mark)
    made = _counters(tmp_path)
    log = tmp_path / "launched"

    async def steps(driver: Driver, feed: ChangeFeed) -> None:
        looked = driver.looked
        feed.publish([Change("counter", "running")])  # a change event, the document as it was
        await _until(lambda: driver.looked > looked and _idle(driver)())
        assert _launched(log).count("running") == 1
        ControlPlane(made["running"]).apply("pause")
        ControlPlane(made["running"]).apply("resume")
        feed.publish([Change("counter", "running")])
        await _until(lambda: _launched(log).count("running") == 2 and _idle(driver)())

    asyncio.run(_driving(make_served(tmp_path), log, "waiting", steps))


def test_a_resume_is_driven_and_an_instance_another_run_drives_is_left_to_it(
    tmp_path: Path,
) -> None:
    """Resuming a paused instance gets it driven; an instance whose heartbeat says another live
    run drives it is not started."""
    made = _counters(tmp_path)
    log = tmp_path / "launched"
    store = made["created"].store
    other = Heartbeat("elsewhere-host", os.getpid(), "worker", "2026-01-01T00:00:00.000Z", 0.0)

    async def steps(driver: Driver, feed: ChangeFeed) -> None:
        ControlPlane(made["paused"]).apply("resume")
        heartbeats_of(store).publish("paused", _fresh(other))
        looked = driver.looked
        feed.publish([Change("counter", "paused")])
        await _until(lambda: driver.looked > looked and _idle(driver)())
        assert "paused" not in _launched(log)
        heartbeats_of(store).clear("paused", other)
        feed.publish([Change("counter", "paused")])
        await _until(lambda: "paused" in _launched(log) and _idle(driver)())

    asyncio.run(_driving(make_served(tmp_path), log, "waiting", steps))


def _fresh(beat: Heartbeat) -> Heartbeat:
    from dataclasses import replace

    return replace(beat, beat=time.time())


# --- a real server driving real runs ----------------------------------------------------------


def _workspace(path: Path, delay: float) -> Path:
    (path / "fsm.toml").write_text(f"[machine.counter]\ndelay = {delay}\n")
    return path


def _post(server: ServeProcess, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        f"{server.base}{path}",
        data=json.dumps(body or {}).encode(),
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.1)


def _actors(instance: Instance) -> set[str]:
    return {r["actor"] for r in instance.journal.read().records if r["kind"] == "transition"}


@pytest.mark.slow
def test_fsm_serve_drive_runs_a_new_and_a_resumed_instance_with_nothing_else_running(
    tmp_path: Path, start_serve: Callable[..., ServeProcess]
) -> None:
    """With --drive, an instance created before the start is driven to its end, a paused one
    waits, and a Resume through the API gets it driven to its end too; the steps' actor is the
    server (serve), and the server prints how each run ended."""
    workspace = _workspace(tmp_path, 0.05)
    counter = load_machine(COUNTER)
    fresh = Workspace(workspace).instance(counter, "fresh")
    fresh.create({"limit": 3})
    held = Workspace(workspace).instance(counter, "held")
    held.create({"limit": 2})
    ControlPlane(held).apply("start")
    ControlPlane(held).apply("pause")
    server = start_serve(workspace, str(COUNTER), "--drive")
    _wait_for(lambda: fresh.load().state == "done")
    assert held.load().status == "paused" and held.load().state == "idle"
    assert _post(server, "/api/instances/counter/held/resume")["status"] == "running"
    _wait_for(lambda: held.load().state == "done")
    assert _actors(fresh) == _actors(held) == {"serve"}
    server.process.terminate()
    out, _ = server.process.communicate(timeout=30)
    assert "fsm serve: counter fresh: drove it: completed in state 'done' after 4 steps" in out
    assert "fsm serve: counter held: drove it: completed in state 'done' after 3 steps" in out


@pytest.mark.slow
def test_stopping_the_server_interrupts_its_runs_and_releases_their_instances(
    tmp_path: Path, start_serve: Callable[..., ServeProcess]
) -> None:
    """SIGTERM to a driving server interrupts its run as Ctrl-C interrupts fsm run: the server
    ends cleanly, the heartbeat is gone and the instance can be run at once by someone else."""
    workspace = _workspace(tmp_path, 0.2)
    instance = Workspace(workspace).instance(load_machine(COUNTER), "long")
    instance.create({"limit": 1_000_000})
    server = start_serve(workspace, str(COUNTER), "--workers", "2")

    def driven_by_serve() -> bool:
        beat = heartbeats_of(instance.store).read("long")
        return beat is not None and beat.alive() and beat.driver == "serve"

    _wait_for(driven_by_serve)
    server.process.terminate()
    assert server.process.wait(timeout=DEADLINE) == 0
    assert heartbeats_of(instance.store).read("long") is None
    assert instance.load().status == "running"
    result = Engine(instance).run(max_steps=1)
    assert result.outcome == "limit"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--workers", "0"], "--workers 0 must be 1 or more"),
        (
            ["run", "--all", "--actor", "serve"],
            "--actor goes with one instance (the runs of --all are run-all)",
        ),
    ],
    ids=["no-workers", "actor-with-all"],
)
def test_bad_driving_options_are_one_line(
    cli: Callable[..., CliResult], argv: list[str], message: str
) -> None:
    """Nonsense driving options are one error line and exit 2."""
    result = cli(*argv)
    assert result.code == 2
    assert result.err.strip().splitlines() == [f"fsm: error: {message}"]


def test_fsm_run_actor_names_who_drives_in_the_journal(cli: Callable[..., CliResult]) -> None:
    """`fsm run --actor NAME` keeps NAME as the actor of the run's steps."""
    assert cli("new", str(COUNTER), "--id", "c1", "--set", "limit=2").code == 0
    assert cli("run", str(COUNTER), "c1", "--actor", "alice", "-q").code == 0
    assert cli("history", str(COUNTER), "c1").out.count(" by alice") >= 3
