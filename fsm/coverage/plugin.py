"""``pytest --fsm-cov``: which edges of its machines a test suite takes, read from the journals.

Registered as a ``pytest11`` entry point, so installing fsm makes the options available; it does
nothing unless ``--fsm-cov`` is given (off, loading it costs the import of this module alone).
On, it watches every journal record the session's instances write, in any store
(:mod:`fsm.coverage.collect`), including ``fsm`` commands the tests run as subprocesses (through
an environment variable naming a file they append to), and at the end reports per machine:

* ``--fsm-cov`` or ``--fsm-cov=NAME,NAME``: the machines to report (default: every machine whose
  definition is not in the temporary folder);
* ``--fsm-cov-report=term-missing`` (default; ``term`` leaves out what is not taken),
  ``json:PATH`` (the stable report ``fsm diagram --coverage`` and ``fsm coverage --tests`` read),
  ``none``; repeatable;
* ``--fsm-cov-fail-under=N`` (edges, percent) or ``edges:100,guards:100``: the session fails
  when a reported machine is under it, and the lines say which edges are not taken;
* the ini option ``fsm_cov_fail_under`` (lines ``MACHINE edges:100,guards:90``) sets a threshold
  per machine, applied when ``--fsm-cov`` is on and the session created one of its instances
  (a run of a few test files does not fail for machines it never touched).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from fsm.coverage.collect import Collector

__all__ = ["FsmCoverage"]

_KEY = "fsm_coverage"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fsm-cov", "fsm machine coverage (edges taken, from the journals)")
    group.addoption(
        "--fsm-cov",
        nargs="?",
        const="",
        default=None,
        metavar="MACHINES",
        help="measure which declared edges of fsm machines the tests take (optionally only "
        "the machines named, comma-separated)",
    )
    group.addoption(
        "--fsm-cov-report",
        action="append",
        default=[],
        metavar="TYPE",
        help="term, term-missing (default), json:PATH or none; may be repeated",
    )
    group.addoption(
        "--fsm-cov-fail-under",
        default=None,
        metavar="MIN",
        help="fail when a machine's edge coverage is under MIN percent (or edges:N,guards:N)",
    )
    parser.addini(
        "fsm_cov_fail_under",
        type="linelist",
        default=[],
        help="per machine, with --fsm-cov: 'MACHINE edges:100,guards:90' (one line each)",
    )


def pytest_configure(config: pytest.Config) -> None:
    chosen = config.getoption("--fsm-cov")
    if chosen is None:
        return
    config.pluginmanager.register(FsmCoverage(config, chosen), _KEY)


class FsmCoverage:
    """The plugin's state while a session runs with ``--fsm-cov``."""

    def __init__(self, config: pytest.Config, chosen: str) -> None:
        from fsm.base.errors import FsmError
        from fsm.coverage.collect import Collector
        from fsm.coverage.report import Threshold
        from fsm.engine.observe import OWNER_PID, RECORDS_FILE

        self.names = [n.strip() for n in chosen.split(",") if n.strip()]
        self.reports: list[str] = config.getoption("--fsm-cov-report") or ["term-missing"]
        for kind in self.reports:
            if kind not in ("term", "term-missing", "none") and not kind.startswith("json:"):
                raise pytest.UsageError(f"--fsm-cov-report: unknown report type '{kind}'")
        fail_under = config.getoption("--fsm-cov-fail-under")
        try:
            self.threshold = None if fail_under is None else Threshold(fail_under)
            self.per_machine: dict[str, Threshold] = {}
            for line in config.getini("fsm_cov_fail_under"):
                name, _, text = line.strip().partition(" ")
                self.per_machine[name] = Threshold(text.strip())
        except FsmError as exc:
            raise pytest.UsageError(f"fsm coverage threshold: {exc}") from None
        self.collector: Collector = Collector()
        self.collector.start()
        descriptor, name = tempfile.mkstemp(prefix="fsm-cov-", suffix=".jsonl")
        os.close(descriptor)
        self.records_file = Path(name)
        self._environment = {RECORDS_FILE: name, OWNER_PID: str(os.getpid())}
        self._saved = {key: os.environ.get(key) for key in self._environment}
        os.environ.update(self._environment)
        self.report: dict[str, Any] | None = None
        self.failures: list[str] = []

    def _restore(self) -> None:
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from fsm.coverage.report import below, write_report

        self.collector.stop()
        self._restore()
        self.collector.read_file(self.records_file)
        self.records_file.unlink(missing_ok=True)
        self.report = report = self.collector.report(self.names)
        for kind in self.reports:
            if kind.startswith("json:"):
                write_report(report, Path(kind.removeprefix("json:")))
        if self.threshold is not None:
            self.failures = below(report, self.threshold)
        for label, data in report["machines"].items():
            # A label is the machine's name, or "name (path)" when two definitions share it.
            threshold = self.per_machine.get(label.split(" (", 1)[0])
            if threshold is not None:
                self.failures += below({"machines": {label: data}}, threshold)
        if self.failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from fsm.coverage.report import render_table

        report = self.report
        if report is None:
            return
        terms = [kind for kind in self.reports if kind.startswith("term")]
        if terms:
            terminalreporter.write_sep("-", "fsm machine coverage")
            if not report["machines"]:
                terminalreporter.write_line("no instance of a reported machine was created")
            else:
                table = render_table(report, missing="term-missing" in terms)
                terminalreporter.write_line(table)
        for kind in self.reports:
            if kind.startswith("json:"):
                terminalreporter.write_line(f"fsm coverage JSON written to {kind[5:]}")
        if self.failures:
            terminalreporter.write_line("FAIL Required fsm machine coverage not reached:", red=True)
            for line in self.failures:
                terminalreporter.write_line(f"  {line}", red=True)
        elif self.threshold is not None or self.per_machine:
            terminalreporter.write_line("Required fsm machine coverage reached.")
