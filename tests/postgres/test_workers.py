"""fsm worker processes against a real PostgreSQL server: many workers never run one instance
twice, a worker killed or stopped loses nothing and doubles nothing, control commands from
anywhere are never lost, and a server restart leaves documents and journals in agreement."""

from __future__ import annotations

import json
import os
import random
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fsm.base.errors import ControlRefusedError
from fsm.testing.postgres_cluster import TemporaryCluster
from tests.postgres.fleet import MACHINE, Fleet
from tests.serve.conftest import launch_serve, stop_serve

pytestmark = pytest.mark.slow


@pytest.fixture(params=[1, 3], ids=["one-at-a-time", "concurrency-3"])
def fleet(tmp_path: Path, postgres_store_url: str, request: pytest.FixtureRequest) -> Fleet:
    """A workspace on a database of its own, with a lease of 2 seconds; its workers drive one
    instance at a time, or three at once on threads (every fault holds for both)."""
    return Fleet(tmp_path / "project", postgres_store_url, concurrency=request.param)


def test_many_workers_never_run_one_instance_twice(fleet: Fleet) -> None:
    """Three worker processes (one of them with two jobs) over 24 instances: every instance
    counts exactly to its limit, each count's work is done once, journals replay and are
    numbered without a gap; told to stop, every worker exits 0.

    A lease of six seconds: with two, a heartbeat late on a loaded machine (a load of 17 on 2
    cores) let the lease lapse, and a claim took the instance over first of all (as it must: its
    run was under way): the fenced-off step's work was then done twice, as after any fault."""
    fleet = Fleet(fleet.path.parent / "steady", fleet.url, lease=6.0, concurrency=fleet.concurrency)
    ids = fleet.create(24, limit=4)
    fleet.worker()
    fleet.worker("--jobs", "2")
    fleet.worker()
    fleet.wait_until(lambda: fleet.settled(ids), "every instance to end")
    outputs = fleet.stop_workers()
    for instance_id in ids:
        fleet.check(instance_id, count=4)
    assert set(fleet.effects().values()) == {1}
    assert len(fleet.effects()) == 24 * 4
    lines = [line for output in outputs for line in output.splitlines() if ": completed" in line]
    assert len(lines) == 24  # one line per instance driven


def test_a_worker_killed_mid_step_loses_and_doubles_nothing(fleet: Fleet) -> None:
    """A worker SIGKILLed while a step's command runs: another worker takes its instance over
    once the lease expires, and every instance counts exactly to its limit; the killed step's
    work may have been done twice (at least once), never a committed step."""
    ids = fleet.create(3, limit=3, delay=0.4)
    first = fleet.worker()
    fleet.wait_until(lambda: fleet.counted() >= 2, "two steps committed")
    fleet.kill(first)
    fleet.worker()
    fleet.wait_until(lambda: fleet.settled(ids), "every instance to end")
    fleet.stop_workers()
    for instance_id in ids:
        fleet.check(instance_id, count=3)
    effects = fleet.effects()
    assert set(effects) == {(i, n) for i in ids for n in (1, 2, 3)}


def test_a_worker_stopped_past_its_lease_is_fenced_off(fleet: Fleet) -> None:
    """A worker SIGSTOPped mid-step past its lease: another worker takes the instance over and
    ends it; continued, the stopped worker's commit is refused (its line says the lease was
    lost), nothing is counted twice, and the taker's claim has a larger fencing token."""
    (instance_id,) = fleet.create(1, limit=3, delay=1.0)
    stopped = fleet.worker()
    fleet.wait_until(lambda: fleet.counted() >= 1, "a step committed")
    first_fence = fleet.rows()[instance_id]["fence"]
    stopped.send_signal(signal.SIGSTOP)
    time.sleep(3.5)  # past the lease of 2 seconds: the holder is no longer renewed
    fleet.worker()
    fleet.wait_until(lambda: fleet.settled([instance_id]), "the instance to end")
    assert fleet.rows()[instance_id]["fence"] > first_fence
    stopped.send_signal(signal.SIGCONT)
    fleet.wait_until(
        lambda: fleet.said(stopped, instance_id), "the stopped worker to give the instance up"
    )
    outputs = fleet.stop_workers()
    fleet.check(instance_id, count=3)
    line = next(line for line in outputs[0].splitlines() if instance_id in line)
    assert ": error" in line and "lease" in line, line


def test_sigterm_lets_the_step_finish_and_releases_the_instance(fleet: Fleet) -> None:
    """A worker told to stop (SIGTERM) in the middle of a step lets it finish and commit,
    releases the instance (its line says so) and exits 0; another worker then ends it, each
    count done once."""
    (instance_id,) = fleet.create(1, limit=3, delay=1.5)
    first = fleet.worker()
    running = fleet.instance(instance_id).running_folder
    fleet.wait_until(lambda: fleet.counted() >= 1, "a step committed")
    fleet.wait_until(lambda: any(running.glob("*.json")), "the next step's command")
    committed = fleet.counted()
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 0
    row = fleet.rows()[instance_id]
    assert (row["holder"], row["status"]) == (None, "running")
    assert fleet.counted() == committed + 1  # the step under way was finished, not abandoned
    fleet.wait_until(lambda: fleet.said(first, f"{instance_id}: released"), "its line")
    fleet.worker()
    fleet.wait_until(lambda: fleet.settled([instance_id]), "the instance to end")
    fleet.stop_workers()
    fleet.check(instance_id, count=3)
    assert set(fleet.effects().values()) == {1}


def test_pauses_and_stops_at_random_moments_are_never_lost(fleet: Fleet) -> None:
    """Pauses and stops applied from another process at random moments while two workers run:
    each one applied is where its instance stays (no worker writes over it); resumed, the
    paused ones count exactly to their limit."""
    ids = fleet.create(12, limit=25, delay=0.02)
    for instance_id in ids:
        fleet.control(instance_id, "start")
    fleet.worker()
    fleet.worker()
    fleet.wait_until(lambda: fleet.counted() >= 3, "the workers to start")
    chosen = random.Random(os.getpid())
    paused: list[str] = []
    stopped: list[str] = []
    for instance_id in chosen.sample(ids, len(ids)):
        time.sleep(chosen.uniform(0, 0.15))
        command = "stop" if chosen.random() < 0.25 else "pause"
        try:
            fleet.control(instance_id, command)
        except ControlRefusedError:
            continue  # it ended, or was stopped already
        (stopped if command == "stop" else paused).append(instance_id)
    assert paused, "no pause was applied"
    fleet.wait_until(lambda: fleet.settled(ids, ("done", "failed", "paused")), "the workers")
    rows = fleet.rows()
    assert all(rows[i]["status"] == "paused" for i in paused), rows
    assert all(rows[i]["status"] == "failed" for i in stopped), rows
    for instance_id in ids:
        fleet.check(instance_id)
    for instance_id in paused:
        fleet.control(instance_id, "resume")
    going = [i for i in ids if i not in stopped]
    fleet.wait_until(lambda: fleet.settled(going, ("done",)), "the resumed instances to end")
    fleet.stop_workers()
    for instance_id in ids:
        fleet.check(instance_id, count=None if instance_id in stopped else 25)


def test_a_server_restart_mid_run_leaves_journals_and_documents_in_agreement(
    fleet: Fleet, postgres_cluster: TemporaryCluster
) -> None:
    """The server crashes and restarts (pg_ctl -m immediate) while two workers run: they
    reconnect and carry on, every instance counts exactly to its limit, and every journal
    replays to its document."""
    ids = fleet.create(8, limit=12)
    fleet.worker()
    fleet.worker()
    fleet.wait_until(lambda: fleet.counted() >= 10, "some steps committed")
    postgres_cluster.restart("immediate")
    fleet.wait_until(lambda: fleet.settled(ids), "every instance to end")
    fleet.stop_workers()
    for instance_id in ids:
        fleet.check(instance_id, count=12)


def test_fsm_run_refuses_an_instance_a_worker_holds(fleet: Fleet) -> None:
    """``fsm run ID`` of an instance a live worker drives is refused with exit 3, naming the
    worker; once the worker ends it, ``fsm run`` finds it done."""
    import subprocess

    from tests.postgres.fleet import FSM, MACHINE

    (instance_id,) = fleet.create(1, limit=2, delay=1.5)
    worker = fleet.worker()
    fleet.wait_until(lambda: fleet.rows()[instance_id]["holder"] is not None, "the claim")
    refused = subprocess.run(
        [str(FSM), "run", str(MACHINE), instance_id],
        cwd=fleet.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 3, refused
    assert f"is being run by worker {os.uname().nodename} pid {worker.pid}" in refused.stderr
    fleet.wait_until(lambda: fleet.settled([instance_id]), "the instance to end")
    fleet.stop_workers()
    fleet.check(instance_id, count=2)


def test_a_worker_is_seen_driving_from_another_checkout(fleet: Fleet, tmp_path: Path) -> None:
    """While a worker drives an instance, its heartbeat is in the database: ``fsm serve`` in
    another checkout of the project (no file of the worker's) says the worker drives it, with
    its pid and the action in progress; once the instance ended, nobody drives it."""
    (instance_id,) = fleet.create(1, limit=3, delay=1.0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "fsm.toml").write_text(f'[store]\nurl = "{fleet.url}"\nspace = "project"\n')
    serve = launch_serve(elsewhere, str(MACHINE))
    try:
        status = f"{serve.base}/api/instances/worker-counter/{instance_id}"
        headers = {"Authorization": f"Bearer {serve.token}"}

        def driver() -> dict[str, Any] | None:
            request = urllib.request.Request(status, headers=headers)
            with urllib.request.urlopen(request, timeout=10) as answer:
                found: dict[str, Any] | None = json.loads(answer.read())["driver"]
            return found

        worker = fleet.worker()
        seen: list[dict[str, Any]] = []

        def working() -> bool:
            now = driver()
            if now is None or now["action"] != "work":
                return False
            seen.append(now)
            return True

        fleet.wait_until(working, "the worker's heartbeat with its action")
        assert (seen[0]["driver"], seen[0]["pid"]) == ("worker", worker.pid)
        assert seen[0]["action_started"] <= time.time()
        fleet.wait_until(lambda: fleet.settled([instance_id]), "the instance to end")
        fleet.wait_until(lambda: driver() is None, "nobody driving it")
    finally:
        stop_serve(serve.process)
    fleet.stop_workers()


def test_one_worker_process_drives_several_instances_at_once(
    tmp_path: Path, postgres_store_url: str
) -> None:
    """`fsm worker --concurrency 4`: one process runs the commands of four instances at the same
    time (each under its own claim), and every count's work is still done once."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    ids = fleet.create(4, limit=2, delay=1.5)
    worker = fleet.worker("--concurrency", "4")
    folders = [fleet.instance(instance_id).running_folder for instance_id in ids]
    fleet.wait_until(
        lambda: all(any(folder.glob("*.json")) for folder in folders),
        "a command of each of the four instances running at once",
    )
    held = {row["holder"] for row in fleet.rows().values()}
    assert len(held) == 1 and None not in held  # one process's holder, four claims
    fleet.wait_until(lambda: fleet.settled(ids), "every instance to end")
    outputs = fleet.stop_workers()
    assert worker.returncode == 0
    for instance_id in ids:
        fleet.check(instance_id, count=2)
    assert set(fleet.effects().values()) == {1}
    assert sum(": completed" in line for line in outputs[0].splitlines()) == 4
