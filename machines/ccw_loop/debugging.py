"""Hypothesis-driven debugging of the failing tests of the last validation.

Each failing test becomes a hypothesis ("T failed at L: E; it fails again when run alone"), with
the error and the location taken from its trace. The evidence is gathered by running that test
alone, once: it fails again (pytest exits 1 reporting a failure) -> ``confirmed`` (a failure that
reproduced, which a fix task can target; one re-run shows it reproduces, not that it always
will, and the verdict says only what was seen); it passes -> ``rejected``: the test is flaky
(it failed, then passed with nothing changed), which the loop reports wherever it reports the
outcome; it cannot be run alone (a runner that cannot select one test, a test that is not
collected, a collection error, a timeout) -> ``inconclusive``; when the validation after that
round fails it again, the next round confirms it (it failed in two full runs), so that a test no
runner can select alone still reaches a fix.

A failing test keeps one hypothesis, and its id, across rounds (the hypothesis records the
test's ``suite`` and ``test`` name): a later round judges it again under the same id, new
failing tests get the next free ids, so fix tasks and their attempts stay attached to one
hypothesis.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from fsm.executor import Executor

from .model import EvidenceCriteria, Hypothesis, TestResult
from .reports import counts_from_output
from .testrun import rerun_command

__all__ = ["Location", "failure_location", "investigate"]

_PYTEST_FRAME = re.compile(r"^(?P<file>[^\s:]+\.\w+):(?P<line>\d+):(?: in (?P<func>\S+))?", re.M)
_TRACEBACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_TESTS_FAILED = 1
"""pytest's exit status when tests failed; others mean it could not run the test (2:
interrupted or a collection error, 4: usage error such as an unknown node id, 5: no test)."""


@dataclass(frozen=True)
class Location:
    """Where a failure was raised: ``file:func:line`` as the original skill's ``logging_point``."""

    file: str
    line: int
    func: str

    def __str__(self) -> str:
        return f"{self.file}:{self.func}:{self.line}"


def failure_location(trace: str | None, workspace: Path) -> Location | None:
    """The innermost frame of ``trace`` (pytest long repr or a Python traceback)."""
    if not trace:
        return None
    frames: list[tuple[int, Location]] = []
    for match in _TRACEBACK_FRAME.finditer(trace):
        frames.append((match.start(), _location(match, workspace)))
    for match in _PYTEST_FRAME.finditer(trace):
        frames.append((match.start(), _location(match, workspace)))
    if not frames:
        return None
    frames.sort(key=lambda frame: frame[0])
    return frames[-1][1]


def _location(match: re.Match[str], workspace: Path) -> Location:
    file = match.group("file")
    with contextlib.suppress(ValueError):  # a frame outside the workspace keeps its own path
        file = Path(file).resolve().relative_to(workspace.resolve()).as_posix()
    return Location(file, int(match.group("line")), match.group("func") or "<module>")


def investigate(
    failing: list[TestResult],
    *,
    ids: list[str],
    executor: Executor,
    test_command: str,
    workspace: Path,
    timeout: float,
) -> list[Hypothesis]:
    """One hypothesis per failing test (``ids[n]`` for ``failing[n]``), each judged by
    re-running that test alone."""
    hypotheses: list[Hypothesis] = []
    for rank, (test, hypothesis_id) in enumerate(zip(failing, ids, strict=True), start=1):
        error = (test.error_message or "failed without a message").strip().splitlines()[0][:300]
        location = failure_location(test.stack_trace, workspace)
        if location is not None and location.func == "<module>" and "::" in test.test_name:
            # pytest's "file:line: Error" frames name no function: in the test's own file it is
            # the test function
            func = test.test_name.rsplit("::", 1)[1].split("[", 1)[0]
            if test.test_name.startswith(location.file + "::"):
                location = Location(location.file, location.line, func)
        where = str(location) if location else test.test_name
        hypothesis = Hypothesis.model_validate(
            {
                "id": hypothesis_id,
                "description": f"{test.test_name} failed at {where}: {error}",
                "testable_condition": f"{test.test_name} fails again when run alone",
                "logging_point": where,
                "evidence_criteria": EvidenceCriteria(
                    confirm="the test fails again when run alone",
                    reject="the test passes when run alone (the failure is flaky)",
                ),
                "likelihood": rank,
                "status": "pending",
                "evidence": None,
                "verdict_reason": None,
                "test": test.test_name,
                "suite": test.suite,
            }
        )
        hypotheses.append(
            _judge(
                hypothesis,
                test,
                executor=executor,
                test_command=test_command,
                workspace=workspace,
                timeout=timeout,
            )
        )
    return hypotheses


def _judge(
    hypothesis: Hypothesis,
    test: TestResult,
    *,
    executor: Executor,
    test_command: str,
    workspace: Path,
    timeout: float,
) -> Hypothesis:
    command = rerun_command(test_command, test.test_name, workspace)
    known = {
        "test_name": test.test_name,
        "error_message": test.error_message,
        "stack_trace": (test.stack_trace or "")[-2000:] or None,
    }
    if command is None:
        return hypothesis.model_copy(
            update={
                "status": "inconclusive",
                "evidence": {**known, "rerun_command": None},
                "verdict_reason": "the test runner cannot run a single test, so the failure "
                "could not be reproduced in isolation",
            }
        )
    result = executor.shell(command, cwd=workspace, timeout=timeout)
    evidence = {
        **known,
        "rerun_command": command,
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
        "timed_out": result.timed_out,
        "output_tail": "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:]),
    }
    ran = counts_from_output(result.stdout + "\n" + result.stderr)
    if result.ok and ran is not None and ran.passed and not ran.failed:
        status, reason = (
            "rejected",
            "passed when run alone after failing in the full run: flaky (it fails only "
            "sometimes, or only together with other tests)",
        )
    elif result.exit_code == _TESTS_FAILED and ran is not None and ran.failed:
        status, reason = (
            "confirmed",
            f"failed in the full run and again when run alone once (exit {result.exit_code})",
        )
    else:
        status, reason = "inconclusive", f"could not re-run the test alone: {result.describe()}"
    return hypothesis.model_copy(
        update={"status": status, "evidence": evidence, "verdict_reason": reason}
    )
