"""JUnit XML and coverage reports, and the pass rule applied to them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsm_machines.ccw_loop.reports import (
    ReportError,
    TestCounts,
    counts_from_output,
    node_id,
    read_coverage,
    read_junit,
)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
  <testcase classname="tests.test_calc" name="test_ok" time="0.012"/>
  <testcase classname="tests.test_calc" name="test_bad" time="0.5">
    <failure message="assert 1 == 2">def test_bad():
&gt;       assert 1 == 2
E       assert 1 == 2

tests/test_calc.py:7: AssertionError</failure>
  </testcase>
  <testcase classname="tests.test_calc.TestGroup" name="test_crash[x]" time="0.001">
    <error message="fixture broke">Traceback</error>
  </testcase>
  <testcase classname="tests.test_calc" name="test_later" time="0">
    <skipped message="not yet"/>
  </testcase>
</testsuite></testsuites>
"""


def _junit(tmp_path: Path, text: str) -> Path:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_calc.py").write_text("")
    path = tmp_path / "junit.xml"
    path.write_text(text)
    return path


def test_junit_rows_have_status_message_trace_and_duration(tmp_path: Path) -> None:
    """Each test case becomes a row; failure and error are failed, skipped is skipped."""
    rows = read_junit(_junit(tmp_path, JUNIT), tmp_path)
    assert [(r.test_name, r.status) for r in rows] == [
        ("tests/test_calc.py::test_ok", "passed"),
        ("tests/test_calc.py::test_bad", "failed"),
        ("tests/test_calc.py::TestGroup::test_crash[x]", "failed"),
        ("tests/test_calc.py::test_later", "skipped"),
    ]
    bad = rows[1]
    assert (bad.suite, bad.error_message, bad.duration_ms) == (
        "tests.test_calc",
        "assert 1 == 2",
        500.0,
    )
    assert bad.stack_trace is not None and bad.stack_trace.endswith("AssertionError")
    assert rows[3].error_message == "not yet"


@pytest.mark.parametrize(
    ("counts", "is_pass", "rate"),
    [
        (TestCounts(3, 0, 0), True, 100.0),
        (TestCounts(2, 1, 0), False, 66.7),
        (TestCounts(0, 0, 0), False, 0.0),
        (TestCounts(0, 0, 4), False, 0.0),
        (TestCounts(1, 0, 5), True, 100.0),
    ],
    ids=["all-pass", "one-fails", "zero-tests", "only-skipped", "skipped-do-not-count"],
)
def test_pass_rule(counts: TestCounts, is_pass: bool, rate: float) -> None:
    """Passed means failed == 0 and passed > 0; the pass rate ignores skipped tests."""
    assert (counts.is_pass, counts.pass_rate) == (is_pass, rate)


def test_empty_suite_reads_as_zero_tests(tmp_path: Path) -> None:
    """A report with no test cases gives no rows (and so no pass)."""
    rows = read_junit(_junit(tmp_path, '<testsuite name="pytest" tests="0"/>'), tmp_path)
    assert rows == []
    assert not TestCounts.of(rows).is_pass


@pytest.mark.parametrize(
    "text",
    ["<testsuites><testsuite>", "<coverage line-rate='1'/>"],
    ids=["truncated", "not-junit"],
)
def test_unreadable_junit_is_a_report_error(tmp_path: Path, text: str) -> None:
    """A broken or foreign XML file is reported, not read as zero tests."""
    with pytest.raises(ReportError):
        read_junit(_junit(tmp_path, text), tmp_path)


def test_node_id_falls_back_to_dotted_name(tmp_path: Path) -> None:
    """Without a matching module file the test keeps its dotted JUnit name."""
    assert node_id("pkg.Suite", "test_x", None, tmp_path) == "pkg.Suite.test_x"
    assert node_id("tests.test_a", "t", "tests/test_a.py", tmp_path) == "tests/test_a.py::t"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("==== 3 passed, 1 failed, 2 skipped in 0.1s ====", TestCounts(3, 1, 2)),
        ("1 passed, 2 errors in 1s", TestCounts(1, 2, 0)),
        ("no summary here", None),
    ],
    ids=["pytest-summary", "errors-count-as-failed", "nothing"],
)
def test_counts_from_output(output: str, expected: TestCounts | None) -> None:
    """Without a JUnit report the counts come from a pytest-style summary line."""
    assert counts_from_output(output) == expected


@pytest.mark.parametrize(
    ("name", "text", "percent"),
    [
        ("coverage.xml", '<coverage line-rate="0.8512"/>', 85.1),
        ("coverage.json", '{"totals": {"percent_covered": 72.25}}', 72.2),
        ("coverage-summary.json", '{"total": {"lines": {"pct": 90}}}', 90.0),
    ],
    ids=["cobertura", "coverage-py", "istanbul"],
)
def test_coverage_reports(tmp_path: Path, name: str, text: str, percent: float) -> None:
    """Overall coverage is read from Cobertura XML, coverage.py JSON or an istanbul summary."""
    path = tmp_path / name
    path.write_text(text)
    assert read_coverage(path) == percent


def test_unknown_coverage_json_is_a_report_error(tmp_path: Path) -> None:
    """A JSON file of another shape is not read as 0 % coverage."""
    path = tmp_path / "coverage.json"
    path.write_text('{"something": 1}')
    with pytest.raises(ReportError):
        read_coverage(path)
