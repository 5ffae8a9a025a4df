"""Test-run reports: JUnit XML into ``TestResult`` rows, coverage reports into a percentage.

JUnit XML is what almost every runner can write (pytest ``--junitxml``, jest-junit, go-junit-report,
surefire), so it is the report validate reads. ``<failure>`` and ``<error>`` both count as
failed, ``<skipped>`` as skipped. Coverage is read from a Cobertura XML (``line-rate``), a
coverage.py JSON (``totals.percent_covered``) or an istanbul summary (``total.lines.pct``).
The files come from the workspace's own test run, which fsm trusts like the workspace itself.

The output is read too, because one report rarely covers a whole command: ``pytest a && pytest
b`` (or a script running several parts) prints one summary line per part, while only one part
writes the JUnit file. :func:`summaries_in_output` finds every summary line (pytest's ``== 3
passed, 1 failed in 0.12s ==``, a plain ``3 passed, 1 failed`` alone on a line, unittest's ``Ran 5
tests`` with its ``FAILED (failures=1)``),
and :func:`failures_in_output` every test pytest names in its short summary (``FAILED
tests/test_x.py::test_y - assert 1 == 2``) or unittest names in its report (``FAIL: test_y
(tests.test_x.T.test_y)``, its dotted id then; a doctest it ran as ``pkg.mod.f (doctest)``),
so that failures of a part without a report are counted and named.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .model import TestResult

__all__ = [
    "UNCOLLECTED",
    "ReportError",
    "TestCounts",
    "counts_from_output",
    "failures_in_output",
    "node_id",
    "read_coverage",
    "read_junit",
    "strip_colour",
    "summaries_in_output",
]

UNCOLLECTED = "collection failure"
"""How pytest's JUnit report names the error of a test module it could not collect (import)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*(?P<items>\d+ [a-z]+(?:, \d+ [a-z]+)*|no tests ran)"
    r"(?: in [\d.]+s(?: \([\d:.]+\))?)?\s*=*$"
)
_ITEM = re.compile(r"(\d+) ([a-z]+)")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UNITTEST_END = re.compile(r"^(OK|FAILED)(?: \((?P<items>[a-z_]+=\d+(?:, [a-z_]+=\d+)*)\))?$")
_SHORT_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (?P<name>.+?)(?: - (?P<message>.*))?$")
# unittest's report of one failure: "FAIL: test_y (pkg.test_x.T.test_y)" (Python 3.11 names the
# test in full; older ones "FAIL: test_y (pkg.test_x.T)"), its traceback after a line of dashes.
_UNITTEST_FAILURE = re.compile(r"^(?:FAIL|ERROR): (?P<method>\w+) \((?P<where>[\w.]+)\)")
_UNITTEST_RULE = re.compile(r"^(?:=+|-+)$")
_UNITTEST_DOCTEST = "Doctest: "
"""The line under the heading of a doctest that unittest ran (``load_tests`` adding a
DocTestSuite): ``Doctest: pkg.mod.f``."""
_WORDS = {
    "passed": "passed",
    "xpassed": "passed",
    "failed": "failed",
    "error": "failed",
    "errors": "failed",
    "skipped": "skipped",
    "xfailed": "skipped",
}
"""Summary words that count, and where: an unexpected pass is a pass, an expected failure is
not run for real (JUnit writes it as skipped); warnings, deselected and reruns are no tests."""
_SUMMARY_WORDS = frozenset({*_WORDS, "warning", "warnings", "deselected", "rerun", "reruns"})
"""Every word a summary line may hold: a line with another ("3 apples") is no summary."""


class ReportError(ValueError):
    """A report file that exists but cannot be read as the format it should be."""


@dataclass(frozen=True)
class TestCounts:
    """How many tests passed, failed (failures and errors) and were skipped."""

    __test__ = False

    passed: int
    failed: int
    skipped: int

    @property
    def total(self) -> int:
        """Every test that ran or was skipped."""
        return self.passed + self.failed + self.skipped

    @property
    def is_pass(self) -> bool:
        """The loop's pass rule: nothing failed and at least one test passed."""
        return self.failed == 0 and self.passed > 0

    @property
    def pass_rate(self) -> float:
        """Passed among the tests that ran (skipped tests do not count), 0-100, one decimal."""
        ran = self.passed + self.failed
        return round(self.passed * 100 / ran, 1) if ran else 0.0

    def __add__(self, other: TestCounts) -> TestCounts:
        return TestCounts(
            self.passed + other.passed, self.failed + other.failed, self.skipped + other.skipped
        )

    @classmethod
    def of(cls, rows: list[TestResult]) -> TestCounts:
        """Count ``rows`` by status."""
        return cls(
            sum(r.status == "passed" for r in rows),
            sum(r.status == "failed" for r in rows),
            sum(r.status == "skipped" for r in rows),
        )


def read_junit(path: Path, workspace: Path) -> list[TestResult]:
    """Every test case of the JUnit XML report at ``path``, in file order."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise ReportError(f"cannot read JUnit report {path.name}: {exc}") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportError(f"{path.name} is not a JUnit report (root element <{root.tag}>)")
    rows: list[TestResult] = []
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        for case in suite.findall("testcase"):
            rows.append(_row(case, suite.get("name", ""), workspace))
    return rows


def _row(case: ET.Element, suite_name: str, workspace: Path) -> TestResult:
    classname = case.get("classname", "")
    name = case.get("name", "")
    status = "passed"
    message: str | None = None
    trace: str | None = None
    for child in case:
        if child.tag in ("failure", "error"):
            status = "failed"
            text = (child.text or "").strip()
            message = child.get("message") or (text.splitlines()[-1] if text else None)
            if message == UNCOLLECTED:
                # pytest's word for a test module it could not import: the reason is the last
                # "E   " line of the trace
                raised = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
                message = f"{UNCOLLECTED}: {raised[-1]}" if raised else message
            trace = text or None
            break
        if child.tag == "skipped":
            status = "skipped"
            message = child.get("message") or None
    try:
        seconds = float(case.get("time") or 0)
    except ValueError:
        seconds = 0.0
    return TestResult(
        test_name=node_id(classname, name, case.get("file"), workspace),
        suite=classname or suite_name,
        status=status,
        duration_ms=round(seconds * 1000, 3),
        error_message=message or None,
        stack_trace=trace,
    )


def node_id(classname: str, name: str, file: str | None, workspace: Path) -> str:
    """A pytest node id (``tests/test_x.py::TestY::test_z``) when the module file exists.

    pytest's JUnit ``classname`` is the dotted module path plus any class names; the longest
    dotted prefix that is a ``.py`` file in the workspace is the module.
    """
    parts = [p for p in classname.split(".") if p]
    if file and file.endswith(".py"):
        module = Path(file).with_suffix("").parts
        return "::".join([file, *parts[len(module) :], name])
    for cut in range(len(parts), 0, -1):
        candidate = Path(*parts[:cut]).with_suffix(".py")
        if (workspace / candidate).is_file():
            return "::".join([candidate.as_posix(), *parts[cut:], name])
    return f"{classname}.{name}" if classname else name


def strip_colour(text: str) -> str:
    """``text`` without the ANSI colour codes a runner told ``--color=yes`` puts in."""
    return _ANSI.sub("", text)


def counts_from_output(output: str) -> TestCounts | None:
    """The totals of every summary line in ``output`` (None when there is none)."""
    found = summaries_in_output(output)
    return sum(found[1:], found[0]) if found else None


def summaries_in_output(output: str) -> list[TestCounts]:
    """The counts of each summary line in ``output``, in order: one per pytest or unittest run
    (a compound command prints several)."""
    found: list[TestCounts] = []
    ran: int | None = None
    for raw in output.splitlines():
        line = _ANSI.sub("", raw).strip()
        match = _PYTEST_SUMMARY.match(line)
        words = _ITEM.findall(match.group("items")) if match is not None else []
        if match is not None and all(word in _SUMMARY_WORDS for _, word in words):
            counts = {"passed": 0, "failed": 0, "skipped": 0}
            for number, word in words:
                if word in _WORDS:
                    counts[_WORDS[word]] += int(number)
            found.append(TestCounts(counts["passed"], counts["failed"], counts["skipped"]))
            continue
        started = _UNITTEST_RAN.match(line)
        if started is not None:
            ran = int(started.group(1))
            continue
        ended = _UNITTEST_END.match(line)
        if ended is not None and ran is not None:
            pairs = [i.split("=") for i in (ended.group("items") or "").split(", ") if i]
            items = {key: int(value) for key, value in pairs}
            failed = items.get("failures", 0) + items.get("errors", 0)
            failed += items.get("unexpected_successes", 0)
            skipped = items.get("skipped", 0) + items.get("expected_failures", 0)
            found.append(TestCounts(max(ran - failed - skipped, 0), failed, skipped))
            ran = None
    return found


def failures_in_output(output: str) -> list[tuple[str, str | None]]:
    """Tests the output names as failed or in error, ``(id, message)`` in order, each once:
    pytest's short summary (node ids) and unittest's report (dotted ids, ``pkg.test_x.T.test_y``,
    with the last line of the failure's traceback as its message)."""
    seen: dict[str, str | None] = {}
    lines = [_ANSI.sub("", raw).rstrip() for raw in output.splitlines()]
    for index, line in enumerate(lines):
        match = _SHORT_SUMMARY.match(line)
        if match is not None and "::" in match.group("name"):
            seen.setdefault(match.group("name"), match.group("message"))
            continue
        failure = _UNITTEST_FAILURE.match(line)
        if failure is not None:
            method, where = failure.group("method"), failure.group("where")
            name = where if where.endswith("." + method) else f"{where}.{method}"
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if following.startswith(_UNITTEST_DOCTEST):
                # a doctest's dotted name is the project's function, no test id: re-running it
                # with ``python -m unittest`` would call the function
                name = following.removeprefix(_UNITTEST_DOCTEST).strip() + " (doctest)"
            seen.setdefault(name, _unittest_message(lines, index + 1))
    return list(seen.items())


def _unittest_message(lines: list[str], start: int) -> str | None:
    """What a unittest failure reports after its heading: the exception line that ends its (last)
    traceback, ``AssertionError: 12 != 11``. The heading may be followed by the test's docstring,
    and the exception by more lines (assertEqual's diff, a doctest's example), so the line is
    found by its place, the first unindented line after ``Traceback (most recent call last):``;
    without a traceback, the last line of the block."""
    block: list[str] = []
    for line in lines[start:]:
        if _UNITTEST_FAILURE.match(line) or line.startswith("Ran ") or line.startswith("="):
            break
        block.append(line)
    raised = [i for i, line in enumerate(block) if line.startswith("Traceback (most recent call")]
    if raised:
        for line in block[raised[-1] + 1 :]:
            if line.strip() and not line[0].isspace():
                return line.strip()
    last = None
    for line in block:
        if line.strip() and not _UNITTEST_RULE.match(line):
            last = line.strip()
    return last


def read_coverage(path: Path) -> float:
    """The overall coverage percentage (0-100) in a Cobertura XML or JSON coverage report."""
    try:
        if path.suffix == ".xml":
            rate = ET.parse(path).getroot().get("line-rate")
            if rate is None:
                raise ReportError(f"{path.name} has no line-rate (not a Cobertura report)")
            return _percent(float(rate) * 100)
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ET.ParseError, OSError, ValueError) as exc:
        raise ReportError(f"cannot read coverage report {path.name}: {exc}") from exc
    if isinstance(data, dict):
        totals = data.get("totals")
        if isinstance(totals, dict) and isinstance(totals.get("percent_covered"), int | float):
            return _percent(float(totals["percent_covered"]))
        total = data.get("total")
        if isinstance(total, dict):
            for key in ("lines", "statements"):
                entry = total.get(key)
                if isinstance(entry, dict) and isinstance(entry.get("pct"), int | float):
                    return _percent(float(entry["pct"]))
    raise ReportError(f"{path.name} is not a coverage.py or istanbul JSON report")


def _percent(value: float) -> float:
    return round(min(max(value, 0.0), 100.0), 1)
