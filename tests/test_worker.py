"""fsm worker on the file store (one host's workers over its files): it scans the instances
as ``fsm run --all`` does, claims each with the run lease, drives it to a stop, and serves
only its queues."""

from __future__ import annotations

import pytest

from tests.conftest import COUNTER, Cli

C = str(COUNTER)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_drained_worker_runs_every_runnable_instance_once(cli: Cli, jobs: str) -> None:
    """``fsm worker --drain`` over a file workspace runs every runnable instance to its end,
    one line each, and leaves paused ones alone; exit 0 when all it ran completed."""
    for instance_id in ("w1", "w2", "w3"):
        assert cli("new", C, "--id", instance_id, "--set", "limit=2").code == 0
    assert cli("start", C, "w3").code == 0
    assert cli("pause", C, "w3").code == 0
    done = cli("worker", C, "--drain", "--jobs", jobs)
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
