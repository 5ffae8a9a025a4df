"""What every benchmark shares: timing helpers, the command environment, and the result rows."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "examples" / "counter" / "machine.yaml"
PYTHON = sys.executable


@dataclass(frozen=True)
class Result:
    """One line of the table: a measured value, its baseline and budget.

    ``ratio`` is value / baseline; it is within budget when it is at most ``budget`` (a budget
    of None marks a figure shown for information). ``shown`` is how the value reads.
    """

    name: str
    value: float
    baseline: float
    budget: float | None
    shown: str
    baseline_shown: str

    @property
    def ratio(self) -> float:
        return self.value / self.baseline

    @property
    def ok(self) -> bool | None:
        return None if self.budget is None else self.ratio <= self.budget

    def line(self) -> str:
        verdict = {True: "ok  ", False: "OVER", None: "info"}[self.ok]
        budget = f"{self.budget:.2f}x" if self.budget is not None else "  -  "
        return (
            f"{verdict} {self.name:<44} {self.shown:>16}  baseline {self.baseline_shown:>16}"
            f"  ratio {self.ratio:5.2f}x  budget {budget}"
        )

    def row(self) -> str:
        """The line as a Markdown table row (the README's table)."""
        budget = f"{self.budget:.2f}x" if self.budget is not None else "-"
        verdict = {True: "ok", False: "over", None: "info"}[self.ok]
        return (
            f"| {self.name} | {self.shown} | {self.baseline_shown} | {self.ratio:.2f}x "
            f"| {budget} | {verdict} |"
        )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def timed(name: str, value: float, baseline: float, budget: float | None) -> Result:
    """A result of two durations, shown in the unit that reads best."""
    unit = us if max(value, baseline) < 0.01 else ms
    return Result(name, value, baseline, budget, unit(value), unit(baseline))


def best_of(func: Callable[[], Any], number: int, repeat: int = 5) -> float:
    """Seconds per call: the best of ``repeat`` rounds of ``number`` calls."""
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            func()
        rounds.append((time.perf_counter() - start) / number)
    return min(rounds)


def command_env(folder: Path) -> dict[str, str]:
    """The environment of timed commands.

    Bytecode is cached in ``folder`` for both sides (an environment that sets
    ``PYTHONDONTWRITEBYTECODE``, as this project's sandbox does, would otherwise leave fsm's own
    modules without ``.pyc`` files while the installed dependencies of a baseline keep theirs),
    and fsm's own cache (:mod:`fsm.base.cache`) is a folder of this run, filled by the warm-up runs.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    env["FSM_CACHE_DIR"] = str(folder / "fsm-cache")
    return env


def median_runs(
    commands: Sequence[Sequence[str]], cwd: Path, env: dict[str, str], times: int = 9
) -> list[float]:
    """Median wall time of each command, after one warm-up run each, the commands interleaved
    so that a busy moment of the machine weighs on all of them alike."""
    samples: list[list[float]] = [[] for _ in commands]
    for round_number in range(times + 1):
        for argv, timings in zip(commands, samples, strict=True):
            start = time.perf_counter()
            subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
            if round_number:
                timings.append(time.perf_counter() - start)
    return [statistics.median(timings) for timings in samples]


def fsm(*argv: str) -> list[str]:
    """The argv of an ``fsm`` command run by this interpreter."""
    return [PYTHON, "-m", "fsm", *argv]
