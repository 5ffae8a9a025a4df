"""Running the workspace's tests: the command line, the run, and what it reported.

The report is asked for, not guessed: pytest gets ``--junitxml=<path>`` appended, other runners
say where their report goes with ``{junit}`` (and ``{coverage}``) in ``test_command``. A run
that wrote no report falls back to the summary line of its output; a run that yields no count
at all is an error of the validate action (the tests could not be judged), which is different
from a run whose tests fail.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from fsm.executor import ExecResult, Executor
from fsm.helpers import ensure_folder

from .model import TestResult
from .reports import (
    ReportError,
    TestCounts,
    counts_from_output,
    read_coverage,
    read_junit,
)

__all__ = ["TestRun", "build_test_command", "is_pytest", "rerun_command", "run_tests"]

_WORKSPACE_COVERAGE = ("coverage.xml", "coverage.json", "coverage/coverage-summary.json")


@dataclass(frozen=True)
class TestRun:
    """The outcome of one test run."""

    __test__ = False

    command: str
    result: ExecResult
    rows: list[TestResult]
    counts: TestCounts | None
    coverage: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        """Why the run could not be judged, or None when it produced counts."""
        if self.counts is not None and self.counts.total > 0:
            return None
        if self.result.error is not None or self.result.timed_out:
            return f"test command did not run to the end: {self.result.describe()}"
        if self.counts is None:
            detail = "; ".join(self.problems) or self.result.describe()
            if self.problems and not self.result.ok:
                # the command's own failure (exit 127: command not found) explains the report
                # it did not write
                detail = f"{detail}; {self.result.describe()}"
            return f"test command produced no test report ({detail})"
        return f"test command ran no tests ({self.result.describe()})"

    @property
    def is_pass(self) -> bool:
        """Nothing failed and at least one test passed."""
        return self.counts is not None and self.counts.is_pass


def is_pytest(command: str) -> bool:
    """True when ``command`` runs pytest (``pytest``, ``python -m pytest``, ``uv run pytest``)."""
    return any(Path(word).name in ("pytest", "py.test") for word in _split(command))


def build_test_command(command: str, junit: Path, coverage: Path) -> str:
    """``command`` with report paths filled in (or ``--junitxml`` added for pytest)."""
    filled = command.replace("{junit}", shlex.quote(str(junit)))
    filled = filled.replace("{coverage}", shlex.quote(str(coverage)))
    if "{junit}" not in command and is_pytest(command):
        filled += f" --junitxml={shlex.quote(str(junit))}"
    return filled


def rerun_command(command: str, test_name: str) -> str | None:
    """The command that runs one test alone, or None when the runner cannot select one test."""
    words = _split(command)
    for index, word in enumerate(words):
        if Path(word).name in ("pytest", "py.test"):
            runner = [*words[: index + 1], "-q", "-p", "no:cacheprovider", test_name]
            return shlex.join(runner)
    return None


def run_tests(
    executor: Executor,
    command: str,
    *,
    workspace: Path,
    report_dir: Path,
    timeout: float,
) -> TestRun:
    """Run the tests and read their JUnit report (and coverage, when the run produced one)."""
    ensure_folder(report_dir, workspace)  # the test command writes its reports into it
    junit = report_dir / "junit.xml"
    coverage = report_dir / "coverage.xml"
    for stale in (junit, coverage, report_dir / "coverage.json"):
        stale.unlink(missing_ok=True)
    before = {name: _mtime(workspace / name) for name in _WORKSPACE_COVERAGE}
    full = build_test_command(command, junit, coverage)
    result = executor.shell(full, cwd=workspace, timeout=timeout)
    problems: list[str] = []
    rows: list[TestResult] = []
    counts: TestCounts | None = None
    if junit.is_file():
        try:
            rows = read_junit(junit, workspace)
            counts = TestCounts.of(rows)
        except ReportError as exc:
            problems.append(str(exc))
    else:
        problems.append(f"no JUnit report at {junit}")
    if counts is None:
        counts = counts_from_output(result.stdout + "\n" + result.stderr)
    produced = [p for p in (coverage, report_dir / "coverage.json") if p.is_file()]
    produced += [
        workspace / name
        for name, mtime in before.items()
        if (workspace / name).is_file() and _mtime(workspace / name) != mtime
    ]
    percent: float | None = None
    for path in produced:
        try:
            percent = read_coverage(path)
            break
        except ReportError as exc:
            problems.append(str(exc))
    return TestRun(full, result, rows, counts, percent, problems)


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
