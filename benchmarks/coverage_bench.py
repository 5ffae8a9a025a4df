"""What ``pytest --fsm-cov`` costs: the same work with the journal watched and without.

* a persisted step with a coverage collector watching the journal vs the same step unwatched,
  CPU time of 200 counters run to a limit of 10 in files (budget 1.10x);
* a pytest session of the project's own tests (the review-queue example's and the testing kit's)
  with ``--fsm-cov`` vs without, wall time, the two interleaved round by round and the medians
  compared (budget 1.10x: the plugin adds at most a tenth to the project's test time).

Run alone (``.venv/bin/python benchmarks/coverage_bench.py``) or as the ``coverage`` part of
``benchmarks/run.py``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import COUNTER, PYTHON, ROOT, Result, command_env, median_runs, timed

from fsm.base.clock import SimulatedClock
from fsm.coverage.collect import Collector
from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine

SUITE = ["examples/review_queue/tests", "tests/test_testing.py"]
"""The tests timed with and without the plugin: they create and run instances throughout."""


def _counters(folder: Path, watched: bool) -> float:
    machine = load_machine(COUNTER)
    workspace = Workspace(folder, clock=SimulatedClock(tick=0.001))
    collector = Collector()
    if watched:
        collector.start()
    started = time.process_time()
    try:
        for number in range(200):
            instance = workspace.instance(machine, f"c{number}")
            instance.create({"limit": 10})
            Engine(instance).run(max_steps=20)
    finally:
        collector.stop()
    return time.process_time() - started


def persisted_steps(folder: Path) -> Result:
    """CPU time of 200 counters run with the journal watched, vs unwatched (best of 3 each)."""
    plain, watched = [], []
    for round_number in range(3):
        for side, samples in ((False, plain), (True, watched)):
            where = folder / f"{'watched' if side else 'plain'}{round_number}"
            samples.append(_counters(where, side))
            shutil.rmtree(where, ignore_errors=True)
    return timed("200 counter runs, journal watched", min(watched), min(plain), 1.10)


def pytest_session(folder: Path, times: int = 3) -> Result:
    """Wall time of a pytest session of the project's tests with --fsm-cov vs without."""
    base = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITE]
    report = folder / "cov.json"
    plain, covered = median_runs(
        [base, [*base, "--fsm-cov", f"--fsm-cov-report=json:{report}"]],
        ROOT,
        command_env(folder),
        times=times,
    )
    return timed("pytest session with --fsm-cov", covered, plain, 1.10)


def coverage(folder: Path, times: int = 3) -> list[Result]:
    """Both figures."""
    folder.mkdir(parents=True, exist_ok=True)
    return [persisted_steps(folder), pytest_session(folder, times)]


if __name__ == "__main__":
    scratch = Path(tempfile.mkdtemp(prefix="fsm-cov-bench-"))
    try:
        for result in coverage(scratch, int(sys.argv[1]) if len(sys.argv) > 1 else 3):
            print(result.line(), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
