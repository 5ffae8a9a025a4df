"""Many instances: `fsm run --all --jobs N` over 1,000 counters, against the same steps driven
by one `fsm run` process per instance (timed on a sample of 100 processes, extrapolated)."""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from pathlib import Path

from common import COUNTER, Result, command_env, fsm

INSTANCES = 1000
SAMPLE = 100
JOBS = (1, 2, 4)
_STEPS = re.compile(r" after (\d+) steps")


def fleet(folder: Path, rounds: int) -> list[Result]:
    """Steps per second of each way, and how the fleet scales with its jobs on this machine."""
    env = command_env(folder)
    times: dict[int, list[float]] = {}
    steps: dict[int, int] = {}
    separate: list[float] = []
    for round_number in range(rounds):
        for jobs in JOBS:
            workspace = _counters(folder / f"fleet-{round_number}-{jobs}", INSTANCES)
            argv = fsm("run", "--all", str(COUNTER), "--jobs", str(jobs))
            start = time.perf_counter()
            done = subprocess.run(
                argv, cwd=workspace, env=env, capture_output=True, text=True, check=False
            )
            times.setdefault(jobs, []).append(time.perf_counter() - start)
            assert done.returncode == 0, done.stderr
            steps[jobs] = sum(int(m.group(1)) for m in _STEPS.finditer(done.stdout))
        workspace = _counters(folder / f"separate-{round_number}", SAMPLE)
        start = time.perf_counter()
        sampled = 0
        for number in range(SAMPLE):
            argv = fsm("run", str(COUNTER), f"c{number:04d}", "-q")
            done = subprocess.run(
                argv, cwd=workspace, env=env, capture_output=True, text=True, check=True
            )
            sampled += sum(int(m.group(1)) for m in _STEPS.finditer(done.stdout))
        separate.append((time.perf_counter() - start) * INSTANCES / SAMPLE)
    one = statistics.median(times[1])
    processes = statistics.median(separate)
    total = steps[1]
    assert sampled * INSTANCES // SAMPLE == total, (sampled, total)
    results = [
        Result(
            f"run --all {INSTANCES:,} counters, 1 job vs processes",
            one,
            processes,
            0.5,
            _rate(total, one),
            _rate(total, processes) + "*",
        )
    ]
    for jobs in JOBS[1:]:
        median = statistics.median(times[jobs])
        results.append(
            Result(
                f"run --all {INSTANCES:,} counters, {jobs} jobs vs 1 job",
                median,
                one,
                0.75,
                _rate(steps[jobs], median),
                _rate(total, one),
            )
        )
    return results


def _rate(steps: int, seconds: float) -> str:
    return f"{steps / seconds:,.0f} steps/s"


def _counters(workspace: Path, count: int) -> Path:
    """``count`` new counters (limit 3: three counting steps and the finish) in ``workspace``."""
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    machine = load_machine(COUNTER)
    space = Workspace(workspace)
    for number in range(count):
        space.instance(machine, f"c{number:04d}").create({"limit": 3})
    return workspace
