"""``fsm start`` and ``fsm run`` racing on one created instance, as separate processes.

A person starts an instance from one terminal (or the dashboard's start button) while a
scheduler runs it from another. Whatever the order in which they reach the instance, exactly
one process drives it, the other reports cleanly (``fsm start`` exits 0, or refuses with one
line and exit 3 because the instance is running or has ended), and the instance is never left
``running`` with nothing driving it: when both have exited it has ended, or a new ``fsm run``
drives it to the end.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from fsm.engine.instance import Workspace
from fsm.model.machine import Machine
from fsm.view.inspect import check_replay
from tests.conftest import COUNTER
from tests.guarantees.forked import fork_fsm, wait_child
from tests.guarantees.waiting import DEADLINE

TRIALS = 60
LIMIT = 15


def _race(
    tmp_path: Path, first: list[str], second: list[str], trial: int, offset: float
) -> tuple[tuple[int | None, str], tuple[int | None, str]]:
    """Start ``first``, then ``second`` ``offset`` seconds later; their exit codes and output."""
    outputs = (tmp_path / f"{trial}-a.out", tmp_path / f"{trial}-b.out")
    pids = [fork_fsm(tmp_path, first, outputs[0])]
    if offset:
        time.sleep(offset)
    pids.append(fork_fsm(tmp_path, second, outputs[1]))
    codes = [wait_child(pid, DEADLINE) for pid in pids]
    return (codes[0], outputs[0].read_text()), (codes[1], outputs[1].read_text())


def _assert_ended_or_drivable(tmp_path: Path, counter: Machine, instance_id: str) -> None:
    """The instance has ended, or a new run drives it to the end; the journal replays."""
    instance = Workspace(tmp_path).instance(counter, instance_id)
    doc = json.loads(instance.store.paths(instance.id).document.read_text())
    if doc["phase"] != "done":
        code = wait_child(
            fork_fsm(tmp_path, ["run", str(COUNTER), instance_id], tmp_path / "x"), DEADLINE
        )
        doc = json.loads(instance.store.paths(instance.id).document.read_text())
        assert code == 0 and doc["phase"] == "done", (doc, (tmp_path / "x").read_text())
    assert (doc["status"], doc["count"]) == ("done", LIMIT)
    check_replay(instance)


@pytest.mark.slow
def test_start_and_run_racing_leave_one_driver_and_no_stranded_instance(
    tmp_path: Path, counter: Machine
) -> None:
    """Many trials of `fsm start` and `fsm run` on a new instance, in either order, a few
    milliseconds apart or at once."""
    rng = random.Random(10)
    workspace = Workspace(tmp_path)
    outcomes: dict[tuple[int | None, int | None], int] = {}
    for trial in range(TRIALS):
        instance_id = f"r{trial}"
        workspace.instance(counter, instance_id).create({"limit": LIMIT})
        start = ["start", str(COUNTER), instance_id]
        run = ["run", str(COUNTER), instance_id]
        offset = rng.choice([0.0, rng.uniform(0, 0.03)])
        if rng.random() < 0.5:
            (start_code, start_out), (run_code, run_out) = _race(
                tmp_path, start, run, trial, offset
            )
        else:
            (run_code, run_out), (start_code, start_out) = _race(
                tmp_path, run, start, trial, offset
            )
        outcomes[(start_code, run_code)] = outcomes.get((start_code, run_code), 0) + 1
        assert run_code == 0, f"trial {trial}: the run exited {run_code}: {run_out}"
        assert "completed" in run_out
        assert start_code in (0, 3), f"trial {trial}: start exited {start_code}: {start_out}"
        if start_code == 3:
            errors = [line for line in start_out.splitlines() if line.startswith("fsm: error")]
            assert len(errors) == 1 and "cannot start" in errors[0], start_out
        assert "Traceback" not in start_out + run_out
        _assert_ended_or_drivable(tmp_path, counter, instance_id)
    # Both orders happened: the test raced what it claims to.
    assert len(outcomes) >= 2, outcomes


def test_two_runs_racing_on_a_created_instance_leave_one_driver(
    tmp_path: Path, counter: Machine
) -> None:
    """Two `fsm run` at once on a new instance: one drives it to the end, the other is refused
    with exit 6 (already being run) or finds it ended; nothing is left running."""
    workspace = Workspace(tmp_path)
    for trial in range(10):
        instance_id = f"d{trial}"
        workspace.instance(counter, instance_id).create({"limit": LIMIT})
        run = ["run", str(COUNTER), instance_id]
        (first, first_out), (second, second_out) = _race(tmp_path, run, run, trial, 0.0)
        assert sorted([first, second]) in ([0, 0], [0, 6]), (first_out, second_out)
        refused = first_out if first == 6 else second_out
        if 6 in (first, second):
            assert "already being run" in refused
        _assert_ended_or_drivable(tmp_path, counter, instance_id)
