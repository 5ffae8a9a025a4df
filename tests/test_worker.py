"""fsm worker on the file store (one host's workers over its files): it scans the instances
as ``fsm run --all`` does, claims each with the run lease, drives it to a stop, and serves
only its queues."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import COUNTER, Cli, fsm_process

C = str(COUNTER)


@pytest.mark.parametrize(("jobs", "concurrency"), [("1", "1"), ("2", "1"), ("1", "3"), ("2", "2")])
def test_a_drained_worker_runs_every_runnable_instance_once(
    cli: Cli, jobs: str, concurrency: str
) -> None:
    """``fsm worker --drain`` over a file workspace runs every runnable instance to its end,
    one line each, and leaves paused ones alone; exit 0 when all it ran completed (processes,
    threads of one process, or both: each instance is run once, under its own run lease)."""
    for instance_id in ("w1", "w2", "w3"):
        assert cli("new", C, "--id", instance_id, "--set", "limit=2").code == 0
    assert cli("start", C, "w3").code == 0
    assert cli("pause", C, "w3").code == 0
    done = cli("worker", C, "--drain", "--jobs", jobs, "--concurrency", concurrency)
    assert done.code == 0, done.err
    lines = sorted(done.out.splitlines())
    assert [line.split(":")[0] for line in lines] == ["counter w1", "counter w2"]
    assert all(": completed in state 'done'" in line for line in lines)
    assert "worker drove 2 instances: 2 completed" in done.err
    statuses = {row["id"]: row["status"] for row in cli("ls", C, "--json").json()}
    assert statuses == {"w1": "done", "w2": "done", "w3": "paused"}


def test_a_worker_serves_only_its_queues(cli: Cli) -> None:
    """An instance created for another queue is left to the workers serving it."""
    assert cli("new", C, "--id", "mine", "--set", "limit=1").code == 0
    assert cli("new", C, "--id", "theirs", "--set", "limit=1", "--queue", "gpu").code == 0
    first = cli("worker", C, "--drain")
    assert [line.split(":")[0] for line in first.out.splitlines()] == ["counter mine"]
    second = cli("worker", C, "--drain", "--queue", "gpu")
    assert [line.split(":")[0] for line in second.out.splitlines()] == ["counter theirs"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--jobs", "0"], "--jobs must be 1 or more", id="no-jobs"),
        pytest.param(
            ["--concurrency", "0"], "--concurrency must be between 1 and 64", id="no-threads"
        ),
        pytest.param(["--queue", "a/b"], "--queue 'a/b' is not a queue name", id="bad-queue"),
        pytest.param(["--max-steps", "0"], "--max-steps must be 1 or more", id="no-steps"),
    ],
)
def test_bad_worker_options_are_one_line(cli: Cli, argv: list[str], message: str) -> None:
    """A worker option that cannot be used is one error line, exit 2."""
    done = cli("worker", C, *argv)
    assert done.code == 2
    assert done.err.strip() == f"fsm: error: {message}"


def test_a_bad_queue_name_is_refused_at_creation(cli: Cli) -> None:
    """``fsm new --queue`` with a name that is no queue name creates nothing."""
    done = cli("new", C, "--id", "q", "--queue", "a b")
    assert done.code == 2
    assert "is not a queue name" in done.err
    assert cli("ls", C, "--json").json() == []


def test_an_instance_driven_twice_is_counted_once_by_its_last_run(cli: Cli, tmp_path: Path) -> None:
    """A worker that drives an instance, sees it paused, and drives it again once resumed
    (then stopped) prints a line per run, but its totals count one instance, ended as its last
    run ended: 'drove 1 instances in 2 runs: 1 failed', not two instances."""
    assert cli("new", C, "--id", "long", "--set", "limit=100000").code == 0
    worker = fsm_process(tmp_path, "-o", "delay=0.01", "worker", C)
    try:
        assert worker.stdout is not None
        _wait_for(lambda: _count(tmp_path) > 0)
        assert cli("pause", C, "long").code == 0
        first = worker.stdout.readline()
        assert first.startswith("counter long: paused in state 'counting'"), first
        assert cli("resume", C, "long").code == 0
        _wait_for(lambda: _count(tmp_path) > int(first.split(" after ")[1].split()[0]))
        assert cli("stop", C, "long").code == 0
        second = worker.stdout.readline()
        assert second.startswith("counter long: failed in state 'failed'"), second
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "fsm: worker drove 1 instances in 2 runs: 1 failed" in err


def _count(workspace: Path, instance_id: str = "long") -> int:
    document = json.loads((workspace / ".counters" / f"{instance_id}.json").read_text())
    return int(document["count"])


def _wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_a_second_sigterm_abandons_the_steps_in_progress(
    cli: Cli, tmp_path: Path, concurrency: str
) -> None:
    """Told twice to stop, a worker abandons its steps at once, one instance at a time or two
    on threads alike: it ends with exit 130, and every instance's journal still replays to its
    document (nothing of an abandoned step is half-written)."""
    ids = ["a1", "a2"]
    for instance_id in ids:
        assert cli("new", C, "--id", instance_id, "--set", "limit=100000").code == 0
    worker = fsm_process(tmp_path, "-o", "delay=0.3", "worker", C, "--concurrency", concurrency)
    try:
        counted = ids if concurrency == "2" else ids[:1]
        _wait_for(lambda: sum(_count(tmp_path, i) > 0 for i in ids) >= len(counted))
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 130, err
    for instance_id in ids:
        assert cli("replay", C, instance_id).code == 0
