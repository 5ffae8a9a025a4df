"""JUnit XML and coverage reports, and the pass rule applied to them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fsm_machines.ccw_loop.reports import (
    ReportError,
    TestCounts,
    counts_from_output,
    failures_in_output,
    node_id,
    read_coverage,
    read_junit,
    summaries_in_output,
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


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("== 3 passed in 0.1s ==\n...\n== 1 failed, 2 passed in 0.2s ==", [(3, 0, 0), (2, 1, 0)]),
        ("12 passed, 3 deselected, 1 warning in 1.01s (0:00:01)", [(12, 0, 0)]),
        ("1 xfailed, 2 xpassed, 1 error in 0.3s", [(2, 1, 1)]),
        ("\x1b[32m3 passed\x1b[0m in 0.1s", [(3, 0, 0)]),
        ("2 failed", [(0, 2, 0)]),
        ("Ran 4 tests in 0.001s\n\nFAILED (failures=1, errors=1)", [(2, 2, 0)]),
        ("Ran 3 tests in 0.001s\n\nOK (skipped=1)", [(2, 0, 1)]),
        ("test_x printed: 2 failed attempts so far\n3 apples", []),
    ],
    ids=[
        "two-runs",
        "deselected",
        "xfail-xpass-error",
        "colour",
        "plain",
        "unittest",
        "unittest-ok",
        "not-summaries",
    ],
)
def test_every_summary_line_of_the_output(output: str, expected: list[tuple[int, ...]]) -> None:
    """Each run of a compound command prints a summary line: all of them are read, in order."""
    assert [(c.passed, c.failed, c.skipped) for c in summaries_in_output(output)] == expected


def test_failures_named_in_the_short_summary() -> None:
    """pytest's short summary names failed and erroring tests (each once, with the message)."""
    output = (
        "FAILED tests/test_a.py::test_x[a b] - assert 1 == 2\n"
        "ERROR tests/test_b.py::test_y\n"
        "FAILED tests/test_a.py::test_x[a b] - assert 1 == 2\n"
        "FAILED (failures=1)\n"
    )
    assert failures_in_output(output) == [
        ("tests/test_a.py::test_x[a b]", "assert 1 == 2"),
        ("tests/test_b.py::test_y", None),
    ]


def test_failures_named_in_unittests_report() -> None:
    """unittest's report names each failing or erroring test (Python 3.11's full name, or the
    older class-only name with the method put back), with its traceback's last line."""
    output = (
        "test_add (tests.test_calc.T.test_add) ... FAIL\n"
        "test_div (tests.test_calc.T.test_div) ... ERROR\n"
        "\n"
        "======================================================================\n"
        "FAIL: test_add (tests.test_calc.T.test_add)\n"
        "----------------------------------------------------------------------\n"
        "Traceback (most recent call last):\n"
        '  File "tests/test_calc.py", line 6, in test_add\n'
        "    self.assertEqual(add(2, 3), 5)\n"
        "AssertionError: -1 != 5\n"
        "\n"
        "======================================================================\n"
        "ERROR: test_div (tests.test_calc.T)\n"
        "----------------------------------------------------------------------\n"
        "Traceback (most recent call last):\n"
        "ZeroDivisionError: division by zero\n"
        "\n"
        "----------------------------------------------------------------------\n"
        "Ran 3 tests in 0.001s\n"
        "\n"
        "FAILED (failures=1, errors=1)\n"
    )
    assert failures_in_output(output) == [
        ("tests.test_calc.T.test_add", "AssertionError: -1 != 5"),
        ("tests.test_calc.T.test_div", "ZeroDivisionError: division by zero"),
    ]


_RULE = "=" * 70 + "\n"
_DASHES = "-" * 70 + "\n"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            "FAIL: test_ilen (tests.test_more.IlenTests.test_ilen)\n"
            "Sanity-checks for ``ilen()``.\n" + _DASHES + "Traceback (most recent call last):\n"
            '  File "tests/test_more.py", line 537, in test_ilen\n'
            "    self.assertEqual(\n"
            "AssertionError: 12 != 11\n",
            "AssertionError: 12 != 11",
        ),
        (
            "FAIL: test_encode (tests.test_more.RunLengthTest.test_encode)\n"
            + _DASHES
            + "Traceback (most recent call last):\n"
            '  File "tests/test_more.py", line 3444, in test_encode\n'
            "    self.assertEqual(actual, expected)\n"
            "AssertionError: Lists differ: [(8, 101)] != [(8, 100)]\n\n"
            "First differing element 0:\n(8, 101)\n(8, 100)\n\n"
            "- [(8, 101)]\n?        ^\n\n+ [(8, 100)]\n?        ^\n\n",
            "AssertionError: Lists differ: [(8, 101)] != [(8, 100)]",
        ),
        (
            "FAIL: ilen (more_itertools.more)\n"
            "Doctest: more_itertools.more.ilen\n" + _DASHES + "Traceback (most recent call last):\n"
            '  File "doctest.py", line 2241, in runTest\n'
            "    raise self.failureException(self.format_failure(new.getvalue()))\n"
            "AssertionError: Failed doctest test for more_itertools.more.ilen\n"
            '  File "more_itertools/more.py", line 467, in ilen\n\n' + _DASHES + "Failed example:\n"
            "    ilen(x for x in range(10))\nExpected:\n    10\nGot:\n    11\n\n",
            "AssertionError: Failed doctest test for more_itertools.more.ilen",
        ),
        (
            "ERROR: test_x (t.T.test_x)\n" + _DASHES + "Traceback (most recent call last):\n"
            '  File "t.py", line 3, in helper\n    int("x")\n'
            "ValueError: invalid literal\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n"
            '  File "t.py", line 9, in test_x\n    helper()\n'
            "RuntimeError: helper failed\n",
            "RuntimeError: helper failed",
        ),
    ],
    ids=["docstring-under-heading", "assert-equal-diff", "doctest", "chained"],
)
def test_unittest_failure_message_is_the_exception_line(block: str, message: str) -> None:
    """A unittest failure's message is the exception that ended its traceback, whatever the
    report prints around it (the test's docstring, a diff, a doctest's example, a chain)."""
    output = _RULE + block + _RULE + "FAIL: test_z (t.T.test_z)\n" + _DASHES
    output += "Traceback (most recent call last):\nAssertionError: z\n\n" + _DASHES
    output += "Ran 9 tests in 0.1s\n\nFAILED (failures=2)\n"
    assert failures_in_output(output)[0][1] == message


def test_a_doctest_in_unittests_report_is_named_as_a_doctest() -> None:
    """A doctest that unittest ran (``load_tests`` adding a DocTestSuite) is named ``pkg.mod.f
    (doctest)``: its dotted name is a function of the project, which ``python -m unittest
    pkg.mod.f`` would call rather than test, so it must not look like a test id."""
    output = (
        _RULE + "FAIL: ilen (more_itertools.more)\nDoctest: more_itertools.more.ilen\n" + _DASHES
    )
    output += "Traceback (most recent call last):\nAssertionError: Failed doctest test\n\n"
    output += _DASHES + "Ran 9 tests in 0.1s\n\nFAILED (failures=1)\n"
    assert failures_in_output(output) == [
        ("more_itertools.more.ilen (doctest)", "AssertionError: Failed doctest test")
    ]
