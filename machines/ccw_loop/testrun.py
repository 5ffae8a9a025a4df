"""Running the workspace's tests: the command line, the run, and what it reported.

The report is asked for, not guessed, and the user's command is never rewritten: pytest is asked
for its report through the environment (``--junitxml=<path>`` added to ``PYTEST_ADDOPTS``, after
any the user set), so every pytest the command starts writes one, and the command runs exactly
as written (``python -m pytest a; a=$?; python -m pytest b; b=$?; exit $((a|b))`` exits as the
user's shell makes it). Other runners say where their report goes with ``{junit}`` (and
``{coverage}``) in ``test_command``, the one change made to it, at the user's request; without
one, their counts come from the output's summary lines (unittest's ``Ran N tests``), else they
are unknown and the run is not judged. The output is read as well
(:mod:`~fsm_machines.ccw_loop.reports`): a compound command (``pytest a && pytest b``, a script
running several parts) prints a summary line per part while the report is the last part's (each
pytest writes the same file), so the counts are the totals of every summary line whenever they
differ from the report's, and failures named only in the output are failed rows too.

The verdict follows from what happened, exit status included: a run passes only when the
command exited 0, the counts are known, nothing failed and some test passed. A non-zero exit
is never a pass, whatever the counts say (``pytest --cov-fail-under=100`` with every test
passing; a script whose unreported part failed), and failures in the report are never a pass
even when the command exited 0. A run that yields no count at all, or did not run to the end,
is an error of the validate action (the tests could not be judged), which is different from a
run whose tests fail.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fsm.executor import ExecResult, Executor
from fsm.helpers import ensure_folder

from .model import TestResult
from .reports import (
    UNCOLLECTED,
    ReportError,
    TestCounts,
    failures_in_output,
    read_coverage,
    read_junit,
    strip_colour,
    summaries_in_output,
)

__all__ = [
    "TestRun",
    "build_test_command",
    "report_environment",
    "rerun_command",
    "run_tests",
]

_WORKSPACE_COVERAGE = ("coverage.xml", "coverage.json", "coverage/coverage-summary.json")


@dataclass(frozen=True)
class TestRun:
    """The outcome of one test run."""

    __test__ = False

    command: str
    result: ExecResult
    rows: list[TestResult]
    """The JUnit report's rows, then failures named only in the output."""
    counts: TestCounts | None
    coverage: float | None = None
    problems: list[str] = field(default_factory=list)
    source: Literal["junit", "output"] | None = None
    """Where the counts come from: the JUnit report, or the output's summary lines (when the
    report covers only part of the command, or there is none)."""
    parts: int = 0
    """Summary lines in the output: the runs of a test runner the command made."""

    @property
    def error(self) -> str | None:
        """Why the run could not be judged, or None when it produced counts."""
        if self.result.error is not None or self.result.timed_out:
            limit = " (option test_timeout)" if self.result.timed_out else ""
            return f"test command did not run to the end: {self.result.describe()}{limit}"
        if self.counts is not None and self.counts.total > 0:
            return None
        if self.counts is None:
            detail = "; ".join(self.problems) or self.result.describe()
            if self.problems and not self.result.ok:
                # the command's own failure (exit 127: command not found) explains the report
                # it did not write
                detail = f"{detail}; {self.result.describe()}"
            return f"test command produced no test report ({detail})"
        return f"test command ran no tests ({self.result.describe()})"

    @property
    def uncollected(self) -> int:
        """Test modules pytest could not collect (import): their tests did not run."""
        return sum(_is_uncollected(row) for row in self.rows)

    @property
    def stopped_early(self) -> bool:
        """The runner stopped at the first failures (pytest's ``-x`` or ``--maxfail``): the
        counts are of the tests that ran before, not of the suite."""
        output = strip_colour(self.result.stdout + "\n" + self.result.stderr)
        return _STOPPED.search(output) is not None

    @property
    def is_pass(self) -> bool:
        """The command exited 0, nothing failed and at least one test passed."""
        return (
            self.error is None
            and self.counts is not None
            and self.counts.is_pass
            and (self.result.ok)
        )

    @property
    def verdict(self) -> str:
        """One line: passed, or why not (``failed: 8 of 467 tests failed``, ``failed: the test
        command exited 1 although every test it reported passed (12 passed): FAIL Required test
        coverage of 100% not reached.``)."""
        error = self.error
        if error is not None:
            return f"not judged: {error}"
        counts = self.counts
        assert counts is not None  # no error: the run produced counts
        tests = _tests(counts.passed, "passed") + (
            f", {counts.skipped} skipped" if counts.skipped else ""
        )
        where = f" in {self.parts} runs" if self.parts > 1 else ""
        if self.is_pass:
            return f"passed: {tests}{where}"
        exit_code = self.result.exit_code
        uncollected = self.uncollected
        if uncollected and self.stopped_early and not counts.passed:
            modules = f"{uncollected} test module{'s' if uncollected != 1 else ''}"
            first = next(r.error_message for r in self.rows if _is_uncollected(r))
            return f"failed: {modules} could not be collected, so pytest ran no test ({first})"
        if counts.failed:
            named = sum(row.status == "failed" for row in self.rows)
            text = f"failed: {counts.failed} of {counts.total} tests failed{where}"
            if uncollected:
                modules = f"{uncollected} test module{'s' if uncollected != 1 else ''}"
                text += f" ({modules} could not be collected: their tests did not run)"
            if named < counts.failed:
                text += f" ({counts.failed - named} not named in the output or a report)"
            if exit_code == 0:
                text += " although the test command exited 0"
            if self.stopped_early:
                text += (
                    ", then the run stopped (pytest -x or --maxfail): the tests after it did "
                    "not run"
                )
            return text
        if exit_code != 0:
            detail = _explanation(self.result)
            return (
                f"failed: the test command exited {exit_code} although every test it reported "
                f"passed ({tests}{where})" + (f": {detail}" if detail else "")
            )
        return f"failed: no test passed ({tests}{where})"


_STOPPED = re.compile(
    r"^!+ (?:stopping after \d+ failures?|Interrupted: \d+ errors? during collection) !+$", re.M
)
"""pytest's line when ``-x`` or ``--maxfail`` ended the run, or errors in collecting the tests
ended it before any ran."""


def _is_uncollected(row: TestResult) -> bool:
    return row.status == "failed" and (row.error_message or "").startswith(UNCOLLECTED)


_UNITTEST_ID = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}")
"""A unittest test id: module, class and method as a dotted path of Python names
(``pkg.test_x.T.test_y``; a ``pkg.TestX`` of another runner has no method)."""


def build_test_command(command: str, junit: Path, coverage: Path) -> str:
    """``command`` with the report paths it asks for (``{junit}``, ``{coverage}``) filled in;
    nothing is added to it."""
    filled = command.replace("{junit}", shlex.quote(str(junit)))
    return filled.replace("{coverage}", shlex.quote(str(coverage)))


def report_environment(
    command: str, junit: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment that asks every pytest ``command`` starts for a JUnit report at
    ``junit``: ``PYTEST_ADDOPTS`` with ``--junitxml`` after the user's own options (empty when
    the command says where its report goes with ``{junit}``)."""
    if "{junit}" in command:
        return {}
    source = os.environ if environ is None else environ
    own = source.get("PYTEST_ADDOPTS", "").strip()
    wanted = f"--junitxml={shlex.quote(str(junit))}"
    return {"PYTEST_ADDOPTS": f"{own} {wanted}" if own else wanted}


def rerun_command(command: str, test_name: str, workspace: Path | None = None) -> str | None:
    """The command that runs one test alone, or None when the runner cannot select one test.

    A command that runs pytest itself is re-run with its own words before ``pytest`` (``uv run
    pytest``, ``python -m pytest``) and its options that collect doctests
    (``--doctest-modules``). A command that does not (a script such as ``./run_tests.sh``) but
    reported a pytest node id whose file is in ``workspace`` is re-run with ``python -m pytest``,
    the default test command's runner. A unittest id
    (``pkg.test_x.T.test_y``) is re-run with the command's own words before ``unittest`` (``python
    -m unittest``), or, for a script, with ``python -m unittest`` when its module is a file of
    ``workspace``.
    """
    words = _split(command)
    if "::" in test_name:
        for index, word in enumerate(words):
            if Path(word).name in ("pytest", "py.test"):
                collect = _doctest_options(words[index + 1 :])
                runner = [*words[: index + 1], "-q", "-p", "no:cacheprovider", *collect]
                return shlex.join([*runner, test_name])
        module = test_name.split("::", 1)[0]
        if workspace is not None and module.endswith(".py") and (workspace / module).is_file():
            return shlex.join(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", test_name])
        return None
    if not _UNITTEST_ID.fullmatch(test_name):
        return None
    for index, word in enumerate(words):
        if word == "unittest":
            return shlex.join([*words[: index + 1], test_name])
    parts = test_name.split(".")
    if workspace is not None and any(
        (workspace / Path(*parts[:cut])).with_suffix(".py").is_file()
        for cut in range(1, len(parts))
    ):
        return shlex.join(["python", "-m", "unittest", test_name])
    return None


def _doctest_options(words: list[str]) -> list[str]:
    """The options among pytest's ``words`` that make it collect doctests (``--doctest-modules``,
    ``--doctest-glob PATTERN``, ...), each as one word: a doctest's node id
    (``pkg/mod.py::pkg.mod.f``) names no test without them."""
    kept: list[str] = []
    for index, word in enumerate(words):
        if not word.startswith("--doctest"):
            continue
        glob = word == "--doctest-glob" and index + 1 < len(words)
        kept.append(f"{word}={words[index + 1]}" if glob else word)
    return kept


def run_tests(
    executor: Executor,
    command: str,
    *,
    workspace: Path,
    report_dir: Path,
    timeout: float,
    cwd: Path | None = None,
) -> TestRun:
    """Run the tests and read their JUnit report (and coverage, when the run produced one);
    ``cwd``: where they run, when not in the workspace (a copy of it)."""
    ensure_folder(report_dir, workspace)  # the test command writes its reports into it
    workspace = cwd or workspace
    junit = report_dir / "junit.xml"
    coverage = report_dir / "coverage.xml"
    for stale in (junit, coverage, report_dir / "coverage.json"):
        stale.unlink(missing_ok=True)
    before = {name: _mtime(workspace / name) for name in _WORKSPACE_COVERAGE}
    full = build_test_command(command, junit, coverage)
    env = report_environment(command, junit)
    result = executor.shell(full, cwd=workspace, timeout=timeout, env=env or None)
    problems: list[str] = []
    rows: list[TestResult] = []
    if junit.is_file():
        try:
            rows = read_junit(junit, workspace)
        except ReportError as exc:
            problems.append(str(exc))
    else:
        problems.append(f"no JUnit report at {junit}")
    output = result.stdout + "\n" + result.stderr
    counts, source, parts = _counts(rows, summaries_in_output(output), junit.is_file())
    known = {row.test_name for row in rows}
    for name, message in failures_in_output(output):
        if name not in known:
            rows.append(
                TestResult(
                    test_name=name,
                    suite=name.split("::", 1)[0],
                    status="failed",
                    duration_ms=0,
                    error_message=message,
                )
            )
            known.add(name)
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
    return TestRun(full, result, rows, counts, percent, problems, source, parts)


def _counts(
    rows: list[TestResult], summaries: list[TestCounts], has_report: bool
) -> tuple[TestCounts | None, Literal["junit", "output"] | None, int]:
    """The run's counts, where they come from, and how many summary lines there were: the
    report's, unless the output's summary lines add up to other totals (the report covers one
    part of a compound command)."""
    summed = sum(summaries[1:], summaries[0]) if summaries else None
    reported = TestCounts.of(rows) if has_report and rows else None
    if reported is not None and (summed is None or summed == reported):
        return reported, "junit", len(summaries)
    if summed is not None:
        return summed, "output", len(summaries)
    return (TestCounts(0, 0, 0) if has_report and not rows else None), None, 0


def _tests(number: int, what: str) -> str:
    return f"{number} test{'s' if number != 1 else ''} {what}"


def _explanation(result: ExecResult) -> str:
    """The last line of the output that is not a summary line: usually what made the command
    fail (``FAIL Required test coverage of 100% not reached. Total coverage: 93.00%``)."""
    for text in (result.stderr, result.stdout):
        for line in reversed(text.strip().splitlines()):
            shown = line.strip().strip("=").strip()
            if shown and not summaries_in_output(line):
                return shown[:300]
    return ""


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
