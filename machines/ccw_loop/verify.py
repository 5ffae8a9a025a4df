"""Validate and debug: run the tests, judge them, and investigate the failures.

Validate passes iff ``failed == 0 and passed > 0``: zero tests is not a pass and skipped tests do
not count. A run that cannot be judged at all (the command is missing, timed out, wrote no report,
ran no tests) is a failed *action* (an error entry, part of the ``max_errors`` streak), while a
run whose tests fail is a successful action with a failed validation.
"""

from __future__ import annotations

from typing import Any

from fsm.context import Context
from fsm.registry import Update
from machines.ccw_loop.bookkeeping import options_of, progress_of, skill_state_of, work_done
from machines.ccw_loop.debugging import investigate
from machines.ccw_loop.model import LoopState
from machines.ccw_loop.reports import TestCounts
from machines.ccw_loop.rules import phase_of_action
from machines.ccw_loop.testrun import run_tests

__all__ = ["debug_failures", "validate_tests"]


def validate_tests(doc: LoopState, ctx: Context) -> Update:
    """Run the test command, read its JUnit report and coverage, and record the verdict."""
    state = skill_state_of(doc)
    opts = options_of(ctx)
    files = progress_of(doc, ctx)
    run = run_tests(
        ctx.executor,
        opts.test_command,
        workspace=ctx.workspace,
        report_dir=files.folder,
        timeout=opts.test_timeout,
    )
    now = ctx.clock.iso()
    counts = run.counts or TestCounts(0, 0, 0)
    failed_tests = [row.test_name for row in run.rows if row.status == "failed"]
    block: dict[str, Any] = {
        **(state.validate_.model_extra or {}),
        "pass_rate": counts.pass_rate,
        "coverage": run.coverage if run.coverage is not None else 0,
        "test_results": [row.model_dump(mode="json") for row in run.rows],
        "passed": run.is_pass,
        "failed_tests": failed_tests,
        "last_run_at": now,
    }
    run_number = 1 + sum(phase_of_action(a) == "validate" for a in state.completed_actions)
    record = {
        "iteration": run_number,
        "loop_iteration": doc.current_iteration + 1,
        "timestamp": now,
        "command": run.command,
        "passed": run.is_pass,
        "summary": {
            "total": counts.total,
            "passed": counts.passed,
            "failed": counts.failed,
            "skipped": counts.skipped,
            "pass_rate": counts.pass_rate,
            "duration_ms": run.result.duration_ms,
        },
        "tests": block["test_results"],
        "failures": failed_tests,
        "coverage": run.coverage,
        "error": run.error,
    }
    files.record_validation(doc.current_iteration + 1, run_number, record, run.rows)
    ctx.log.info(
        "tests_validated",
        passed=run.is_pass,
        tests_passed=counts.passed,
        tests_failed=counts.failed,
        tests_skipped=counts.skipped,
        error=run.error,
    )
    return {"skill_state.validate": block, **work_done(doc, "validate", now, run.error)}


def debug_failures(doc: LoopState, ctx: Context) -> Update:
    """Make a hypothesis per failing test and confirm or reject each by re-running it alone."""
    state = skill_state_of(doc)
    opts = options_of(ctx)
    now = ctx.clock.iso()
    failing = [row for row in state.validate_.test_results if row.status == "failed"]
    if not failing:
        message = "nothing to debug: the last validation recorded no failing test"
        if state.validate_.failed_tests:
            message += " with a trace (" + ", ".join(state.validate_.failed_tests[:5]) + ")"
        ctx.log.warning("debug_skipped", reason=message)
        return work_done(doc, "debug", now, message)
    new = investigate(
        failing[: opts.max_hypotheses],
        first_number=len(state.debug.hypotheses) + 1,
        executor=ctx.executor,
        test_command=opts.test_command,
        workspace=ctx.workspace,
        timeout=opts.test_timeout,
    )
    hypotheses = [*state.debug.hypotheses, *new]
    confirmed = next((h.id for h in new if h.status == "confirmed"), None)
    first = failing[0]
    block: dict[str, Any] = {
        **(state.debug.model_extra or {}),
        "active_bug": f"{first.test_name}: {_first_line(first.error_message)}"[:500],
        "hypotheses_count": len(hypotheses),
        "hypotheses": [h.model_dump(mode="json") for h in hypotheses],
        "confirmed_hypothesis": confirmed,
        "iteration": state.debug.iteration + 1,
        "last_analysis_at": now,
    }
    progress_of(doc, ctx).record_debug(
        doc.current_iteration + 1, state.debug.iteration + 1, block, new, now
    )
    ctx.log.info(
        "failures_debugged",
        hypotheses=len(new),
        confirmed=confirmed,
        rejected=sum(h.status == "rejected" for h in new),
    )
    return {"skill_state.debug": block, **work_done(doc, "debug", now)}


def _first_line(message: str | None) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else "failed"
