"""No lost update, statistically: a simulated CCW dashboard writing at random moments into the
document of a fast ``fsm run``.

The dashboard (:mod:`tests.guarantees.dashboard`) is a separate, long-lived process that reads
the document and writes it back changed, without any lock: mostly in place (open with truncate,
write, as Node's ``writeFileSync``), sometimes through a temporary file renamed over it. ``fsm
run`` of the counter machine (a step every millisecond or so, limit out of reach) runs in a
forked child. Each *segment* is one run: the dashboard makes zero to two field edits at random
moments while it counts, then ends it with a pause or a stop; a paused instance is resumed by
the dashboard for the next segment, a stopped one is replaced by a new instance.

Every dashboard write is a *round*; a round whose write the dashboard refused (a pause when it
read no ``running``) does not count. What *lost* means, checked once the run has exited:

* a **pause** is lost when the dashboard read ``running`` and its write of ``paused`` returned,
  but the run did not end paused: it exited with anything but 5, or the document is not
  ``paused`` in a non-final state (it went on counting, or ended otherwise);
* a **stop** (the machine's stop: status ``failed``, phase ``failed``, a ``failure_reason``) is
  lost when the run did not exit with 4 or the document does not hold all three, with the
  dashboard's reason;
* a **title edit** is lost when the document's ``title`` is not the last title the dashboard
  wrote (the dashboard's later writes carry what they read, so a title fsm dropped stays
  dropped);
* a **key update** is lost likewise for ``dashboard_note``, a key the counter's model does not
  define, which the dashboard added in an earlier round of the same instance;
* **fsm's own work** is lost when the journal does not replay to the document
  (:func:`fsm.view.inspect.check_replay`) or the document's ``count`` is not the number of counting
  steps journaled, or a temporary file is left behind.

The budget is 0 for each, over at least 500 rounds. The test also requires that the dashboard
really raced the run: most rounds must have been merged into a step in progress.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fsm.engine.instance import Workspace
from fsm.model.machine import Machine
from fsm.view.inspect import check_replay
from tests.conftest import COUNTER
from tests.guarantees import dashboard
from tests.guarantees.forked import fork_fsm, wait_child

ROUNDS = 520
SEED = int(os.environ.get("FSM_GUARANTEE_SEED", "20260110"))
LIMIT = 5000
"""The counter's limit: out of reach of a segment (a few dozen steps), reached within seconds by
a run that missed its pause or stop."""
DEADLINE = 60.0
"""Seconds a run may take to notice a pause or stop before it counts as lost (generous: a busy
machine; an honoured pause takes milliseconds)."""


class Dashboard:
    """The simulated dashboard process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, dashboard.__file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.history: list[str] = []
        """What the dashboard did in the current segment (shown when something was lost)."""

    def send(self, **command: Any) -> dict[str, Any]:
        """Carry out one command and return the dashboard's answer."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        assert "error" not in answer, answer["error"]
        shown = {k: v for k, v in command.items() if k != "path"}
        self.history.append(f"{shown} -> {answer}")
        return answer

    def close(self) -> None:
        """End the process."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@dataclass
class Tally:
    """Rounds, losses and races, by kind."""

    rounds: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)
    merged_steps: int = 0
    reapplied: int = 0
    late_steps: list[int] = field(default_factory=list)

    def lose(self, kind: str, detail: str) -> None:
        self.lost[kind] += 1
        if len(self.details) < int(os.environ.get("FSM_GUARANTEE_DETAILS", "12")):
            self.details.append(f"{kind}: {detail}")


@dataclass
class Counted:
    """One counter instance and what the dashboard last wrote into it."""

    id: str
    path: Path
    title: str = "t0"
    note: str | None = None
    status: str = "created"
    count: int = 0


def _timing(rng: random.Random) -> dict[str, Any]:
    """When and how the dashboard writes: at once, soon or a little later; mostly in place."""
    delay = rng.choice([0.0, rng.uniform(0, 0.004), rng.uniform(0, 0.015)])
    think = rng.choice([0.0, 0.0, rng.uniform(0, 0.002)])
    mode = "rename" if rng.random() < 0.25 else "inplace"
    # now and then the dashboard is descheduled between truncating the file and writing it, as
    # on a busy machine (a stop was lost that way): the file is empty meanwhile
    stall = rng.choice([0.0] * 6 + [rng.uniform(0, 0.01), rng.uniform(0.01, 0.05)])
    return {"delay": delay, "think": think, "mode": mode, "stall": stall}


def _read(path: Path) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            data: dict[str, Any] = json.loads(path.read_bytes())
            return data
        except (ValueError, FileNotFoundError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def _wait_counting(path: Path, above: int) -> None:
    """Wait until the run has counted past ``above``."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        data = _read(path)
        if data.get("status") == "running" and data.get("count", 0) > above:
            return
        time.sleep(0.001)
    raise AssertionError(f"the run of {path.name} never counted")


def _check_own_work(workspace: Path, counter: Machine, counted: Counted, tally: Tally) -> None:
    instance = Workspace(workspace).instance(counter, counted.id)
    try:
        check_replay(instance)
    except Exception as exc:
        tally.lose("fsm work", f"{counted.id}: {exc}")
    records = instance.journal.read().records
    steps = sum(r["kind"] == "transition" and r["event"] == "count" for r in records)
    count = _read(counted.path)["count"]
    if count != steps:
        tally.lose("fsm work", f"{counted.id}: count {count} but {steps} counting steps journaled")
    leftovers = sorted(p.name for p in counted.path.parent.glob(".*.tmp"))
    if leftovers:
        tally.lose("fsm work", f"{counted.id}: temporary files left: {leftovers}")
    tally.merged_steps += sum(bool(r.get("merged")) and r["kind"] == "transition" for r in records)
    tally.reapplied += sum(r["kind"] == "merge" for r in records)


def _segment(
    workspace: Path,
    counter: Machine,
    counted: Counted,
    dash: Dashboard,
    rng: random.Random,
    tally: Tally,
) -> None:
    """One run of ``counted``: field edits at random moments, then a pause or a stop."""
    path = str(counted.path)
    dash.history.clear()
    if counted.status == "paused":
        assert dash.send(path=path, op="resume")["applied"]
    start = _read(counted.path)["count"]
    output = workspace / f"run-{counted.id}.out"
    pid = fork_fsm(workspace, ["run", str(COUNTER), counted.id], output)
    code: int | None = None
    try:
        _wait_counting(counted.path, start)
        for _ in range(rng.choice([0, 1, 1, 2])):
            if rng.random() < 0.5:
                value = f"title {sum(tally.rounds.values())}"
                answer = dash.send(path=path, op="title", value=value, **_timing(rng))
                counted.title = value
                tally.rounds["title edit"] += 1
            else:
                value = f"note {sum(tally.rounds.values())}"
                answer = dash.send(path=path, op="key", value=value, **_timing(rng))
                counted.note = value
                tally.rounds["key update" if answer["seen"][dashboard.KEY] else "key added"] += 1
        ending = rng.choice(["pause", "stop"])
        reason = f"Manually stopped by user (round {sum(tally.rounds.values())})"
        answer = dash.send(path=path, op=ending, value=reason, **_timing(rng))
        if answer["applied"]:
            tally.rounds[ending] += 1
        code = wait_child(pid, DEADLINE)
    finally:
        if code is None:  # never ended: it is lost (below), and must not outlive the test
            os.kill(pid, signal.SIGKILL)
            wait_child(pid, DEADLINE)
    doc = _read(counted.path)
    writes = "\n    ".join(dash.history)
    ran = output.read_text()[-300:]
    shown = f"{counted.id} (pid {pid}) after exit {code}: {ran!r} doc {doc}\n    {writes}"
    if answer["applied"]:
        tally.late_steps.append(doc["count"] - answer["seen"]["count"])
        if ending == "pause" and (
            code != 5 or doc["status"] != "paused" or doc["phase"] != "counting"
        ):
            tally.lose("pause", shown)
        if ending == "stop" and (
            code != 4
            or (doc["status"], doc["phase"], doc.get("failure_reason"))
            != ("failed", "failed", reason)
        ):
            tally.lose("stop", shown)
    else:
        tally.lose("refused", f"the dashboard saw no running instance: {answer['seen']}; {shown}")
    if doc.get("title") != counted.title:
        tally.lose("title edit", f"expected {counted.title!r}; {shown}")
    if doc.get(dashboard.KEY) != counted.note:
        tally.lose("key", f"expected {counted.note!r}; {shown}")
    _check_own_work(workspace, counter, counted, tally)
    counted.status, counted.count = doc["status"], doc["count"]


@pytest.mark.slow
def test_no_dashboard_write_and_no_step_is_ever_lost(tmp_path: Path, counter: Machine) -> None:
    """Over 500+ dashboard rounds against fast runs: 0 lost pauses, stops, title edits and key
    updates, and fsm's own work always replays (see the module docstring for the definitions)."""
    rng = random.Random(SEED)
    tally = Tally()
    dash = Dashboard()
    workspace = Workspace(tmp_path)
    counted: Counted | None = None
    created = 0
    try:
        while sum(tally.rounds.values()) < ROUNDS:
            if counted is None or counted.status == "failed" or counted.count > LIMIT - 1000:
                created += 1
                instance = workspace.instance(counter, f"c{created}")
                instance.create({"limit": LIMIT, "title": "t0"})
                counted = Counted(instance.id, instance.store.paths(instance.id).document)
            _segment(tmp_path, counter, counted, dash, rng, tally)
    finally:
        dash.close()
    rounds = sum(tally.rounds.values())
    summary = (
        f"seed {SEED}: {rounds} rounds {dict(tally.rounds)}; lost {dict(tally.lost)}; "
        f"{tally.merged_steps} steps merged, {tally.reapplied} writes re-applied; "
        f"steps after a pause or stop was read: max {max(tally.late_steps)}"
    )
    assert not tally.lost, summary + "\n" + "\n".join(tally.details)
    assert min(tally.rounds["pause"], tally.rounds["stop"]) >= ROUNDS // 5, summary
    # The test only proves something when the writes really landed while steps were running.
    assert tally.merged_steps >= rounds // 2, summary
    if os.environ.get("FSM_GUARANTEE_REPORT"):
        print(summary)
