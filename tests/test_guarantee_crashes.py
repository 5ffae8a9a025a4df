"""Crash safety: ``fsm run`` SIGKILLed at every instrumented point and at random moments, for
the counter and the three bundled machines.

**Deterministic kill points** (:mod:`tests.guarantees.killing`): a forked ``fsm run`` kills
itself at its n-th instrumented call (before and after every temporary file, journal append,
replace, ``after_save``, action update, command or agent, and side file). The next ``fsm run``
continues the same instance and is killed in turn, n going 1, 2, 3... so that every point of
every step is hit, until a run ends; then a fresh instance starts, until the wanted number of
kills. **Random moments**: real ``fsm run`` processes killed after a random delay, the same way.

After every kill, before anything repairs it:

* no journal record is lost: the journal holds everything it held after the previous kill;
* the document on disk has its journal record (write-ahead: the record is durable before the
  document it describes becomes visible).

After the run that ends an instance: it ended in a final state with the outcome's exit code,
the journal replays (:func:`fsm.view.inspect.check_replay`), and no temporary file (``.*.tmp``) and
no record of a running command is left anywhere in the workspace.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fsm.base.files import FileLock
from fsm.base.update import bytes_hash
from fsm.view.inspect import check_replay
from tests.guarantees.forked import fork_fsm, wait_child
from tests.guarantees.killing import Target, run_killed
from tests.guarantees.scenarios import SCENARIOS, Scenario
from tests.guarantees.waiting import DEADLINE, memory_folder, wait_until


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """The tests' folder, in memory where possible (see :func:`memory_folder`)."""
    yield from memory_folder()


KILLS = int(os.environ.get("FSM_GUARANTEE_KILLS", "200"))
RANDOM_KILLS = int(os.environ.get("FSM_GUARANTEE_RANDOM_KILLS", "50"))


@dataclass
class Tally:
    """What the kills hit and how the instances ended."""

    kills: int = 0
    points: Counter[str] = field(default_factory=Counter)
    endings: Counter[int] = field(default_factory=Counter)
    rounds: int = 0


def _leftovers(root: Path) -> list[str]:
    found = list(root.rglob(".*.tmp"))
    found += list(root.rglob("running/*.json"))
    return sorted(str(p.relative_to(root)) for p in found)


def _wait_for_run_lock(scenario: Scenario, root: Path) -> None:
    """Wait until no process holds the instance's run lock."""
    lock = FileLock(scenario.open(root).paths.run_lock)

    def free() -> bool:
        if lock.acquire(blocking=False):
            lock.release()
            return True
        return False

    wait_until(free, "the killed run's lock was released")


def _check_after_kill(scenario: Scenario, root: Path, before: bytes, where: str) -> bytes:
    """The invariants a kill must keep; return the journal's bytes now."""
    instance = scenario.open(root)
    journal = instance.store.paths(instance.id).journal.read_bytes()
    # A kill inside an append may leave its record torn (the kernel stops a write between two
    # pages when a fatal signal is pending); the next command's repair drops that line, whose
    # document was never written (records go ahead of their document). Whole records stay.
    whole = before[: before.rfind(b"\n") + 1]
    assert journal.startswith(whole), f"journal records lost by a kill at {where}"
    raw = instance.store.paths(instance.id).document.read_bytes()
    hashes = {record.get("doc_hash") for record in instance.journal.read().records}
    assert bytes_hash(raw) in hashes, (
        f"killed at {where}: the document on disk has no journal record"
    )
    return journal


def _check_ended(scenario: Scenario, root: Path, code: int | None, tally: Tally) -> None:
    output = "\n".join(p.read_text() for p in sorted(root.parent.glob(f"{root.name}*.out")))
    assert code in (0, 4), f"{scenario.name}: the last run exited {code}: {output[-2000:]}"
    instance = scenario.open(root)
    loaded = instance.load()
    assert instance.machine.is_final(loaded.state), loaded.state
    check_replay(instance)
    assert not _leftovers(root), _leftovers(root)
    tally.endings[code] += 1


def _dry_run(scenario: Scenario, tmp_path: Path) -> tuple[list[str], float]:
    """An uninterrupted run: the points it passed, in order, and its duration."""
    root = tmp_path / "dry"
    instance = scenario.create(root)
    report = tmp_path / "dry.points"
    started = time.monotonic()
    pid = run_killed(
        root,
        scenario.machine_path,
        scenario.instance_id,
        instance.store.paths(instance.id).journal,
        None,
        report,
    )
    code = wait_child(pid, DEADLINE)
    duration = time.monotonic() - started
    assert code in (0, 4), (tmp_path / "dry.out").read_text()
    shutil.rmtree(root)
    return report.read_text().splitlines(), duration


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_kill_point_leaves_a_consistent_instance(tmp_path: Path, name: str) -> None:
    """Every point of an uninterrupted run killed at least once, and at least 200 kills per
    machine kind (see the module docstring). A kill right after a commit's journal record
    leaves the rest of that commit to the repair, so its last points are reached in later
    instances; every third kill is followed by kills at each point of the repair it leaves."""
    scenario = SCENARIOS[name]
    points, _ = _dry_run(scenario, tmp_path)
    order = {point: index for index, point in enumerate(points)}
    unkilled = set(points)
    tally = Tally()
    while unkilled or tally.kills < KILLS:
        tally.rounds += 1
        assert tally.rounds <= 24, f"{name}: points never reached: {sorted(unkilled)}"
        root = tmp_path / f"round{tally.rounds}"
        instance = scenario.create(root)
        target = Target(order, set(unkilled or points))
        journal = b""
        main_kills = 0
        for attempt in range(10 * len(points)):
            report = root.parent / f"{root.name}-{attempt}.points"
            pid = run_killed(
                root,
                scenario.machine_path,
                scenario.instance_id,
                instance.store.paths(instance.id).journal,
                target,
                report,
            )
            code = wait_child(pid, DEADLINE)
            if code != -signal.SIGKILL:
                _check_ended(scenario, root, code, tally)
                break
            point = report.read_text().splitlines()[-1]
            tally.kills += 1
            tally.points[point.split("|")[1]] += 1
            journal = _check_after_kill(scenario, root, journal, point)
            if point.startswith("repair|"):
                target.repair = 0
                continue
            main_kills += 1
            unkilled.discard(point)
            target.wanted.discard(point)
            target.after = order[point] + 1
            # Every third kill, the next run dies inside the repair it needs (its 1st to 4th point).
            target.repair = 1 + main_kills // 3 % 4 if main_kills % 3 == 0 else 0
        else:
            raise AssertionError(f"{name}: an instance never ended after {attempt} kills")
        shutil.rmtree(root)
        for stale in tmp_path.glob(f"{root.name}-*"):
            stale.unlink()
    if os.environ.get("FSM_GUARANTEE_REPORT"):
        print(
            f"{name}: {tally.kills} kills ({len(points)} points of a run, every one hit) over "
            f"{tally.rounds} instances; by call {dict(tally.points)}; endings {dict(tally.endings)}"
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_kills_at_random_moments_leave_a_consistent_instance(tmp_path: Path, name: str) -> None:
    """Real `fsm run` processes SIGKILLed after a random delay, until each instance ends."""
    scenario = SCENARIOS[name]
    _, duration = _dry_run(scenario, tmp_path)
    rng = random.Random(f"{name}-random-kills")
    tally = Tally()
    while tally.kills < RANDOM_KILLS:
        tally.rounds += 1
        root = tmp_path / f"round{tally.rounds}"
        scenario.create(root)
        journal = b""
        for attempt in range(1000):
            output = root.parent / f"{root.name}-{attempt}.out"
            pid = fork_fsm(root, ["run", str(scenario.machine_path), scenario.instance_id], output)
            code = wait_child(pid, rng.uniform(0, duration))
            if code is None:
                os.kill(pid, signal.SIGKILL)
                code = wait_child(pid, DEADLINE)
            if code == 6 and "already being run" in output.read_text():
                # A command the killed run was starting holds its lock until it has started
                # (fork, then exec): the next run is refused for that moment, as it should be.
                _wait_for_run_lock(scenario, root)
                continue
            if code != -signal.SIGKILL:
                _check_ended(scenario, root, code, tally)
                break
            tally.kills += 1
            journal = _check_after_kill(scenario, root, journal, f"random kill {attempt}")
        else:
            raise AssertionError(f"{name}: an instance never ended")
        shutil.rmtree(root)
    if os.environ.get("FSM_GUARANTEE_REPORT"):
        print(
            f"{name}: {tally.kills} random kills over {tally.rounds} instances; "
            f"endings {dict(tally.endings)}"
        )
