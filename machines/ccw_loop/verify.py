"""Validate and debug: run the tests, judge them, and investigate the failures.

Validate passes iff the test command exited 0 and ``failed == 0 and passed > 0`` over every part
of the command (:mod:`~fsm_machines.ccw_loop.testrun`): zero tests is not a pass, skipped tests do
not count, and a non-zero exit is never a pass. A run that cannot be judged at all (the command
is missing, timed out, wrote no report, ran no tests) is a failed *action* (an error entry, part
of the ``max_errors`` streak), while a run whose tests fail is a successful action with a failed
validation. Besides the original skill's fields, ``skill_state.validate`` keeps the command's
``exit_code``, the ``counts`` (passed, failed, skipped, total, and their ``source``: the JUnit
report or the output's summary lines) and the one-line ``verdict``.
"""

from __future__ import annotations

import re
from typing import Any

from fsm.executor import changed_files, is_known, take_snapshot
from fsm.registry import Update

from . import attempts, baseline
from .bookkeeping import (
    develop_block,
    max_fix_attempts_of,
    progress_of,
    skill_state_of,
    work_done,
)
from .debugging import investigate
from .hypotheses import (
    fix_attempts,
    fix_target,
    has_failing_tests,
    hypothesis_for,
    tests_to_debug,
)
from .model import Hypothesis, LoopState, SkillState, TestResult
from .options import LoopContext
from .progress import ProgressFiles
from .reports import TestCounts
from .rules import phase_of_action
from .testrun import run_tests

__all__ = ["debug_failures", "validate_tests"]


def validate_tests(doc: LoopState, ctx: LoopContext) -> Update:
    """Run the test command, read its JUnit report and coverage, and record the verdict."""
    state = skill_state_of(doc)
    opts = ctx.options
    files = progress_of(doc, ctx)
    recovered = _interrupted_fix(doc, state, ctx, files)
    kept = baseline.load(files.folder)
    allowed = opts.allow_test_changes
    with baseline.tests_as_they_were(kept, ctx.workspace, ctx.instance_dir, allowed=allowed) as (
        where,
        differ,
    ):
        run = run_tests(
            ctx.executor,
            opts.test_command,
            workspace=ctx.workspace,
            report_dir=files.folder,
            timeout=opts.test_timeout,
            cwd=where,
        )
    restored = differ if where != ctx.workspace else []
    lost = baseline.weakened(kept, run.rows, run.counts) if kept is not None else []
    rows = _with_lost(run.rows, lost, state.validate_.test_results)
    passed = run.is_pass and not lost
    verdict = _verdict(run.verdict, run.is_pass, lost, restored)
    now = ctx.clock.iso()
    counts = run.counts or TestCounts(0, 0, 0)
    failed_tests = [row.test_name for row in rows if row.status == "failed"]
    block: dict[str, Any] = {
        **(state.validate_.model_extra or {}),
        "pass_rate": counts.pass_rate,
        "coverage": run.coverage,
        "test_results": [row.model_dump(mode="json") for row in rows],
        "passed": passed,
        "failed_tests": failed_tests,
        "last_run_at": now,
        "exit_code": run.result.exit_code,
        "counts": _counts_block(
            run.counts, run.source, stopped=run.stopped_early, uncollected=run.uncollected
        ),
        "verdict": verdict,
        "lost_tests": lost,
        "tests_restored": restored,
    }
    for key in ("lost_tests", "tests_restored"):
        if not block[key]:
            del block[key]  # said only when there are some, also in earlier runs' records
    run_number = 1 + sum(phase_of_action(a) == "validate" for a in state.completed_actions)
    record: dict[str, Any] = {
        "iteration": run_number,
        "loop_iteration": doc.current_iteration + 1,
        "timestamp": now,
        "command": run.command,
        "passed": passed,
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
        "exit_code": run.result.exit_code,
        "counts": block["counts"],
        "verdict": verdict,
        "error": run.error,
        **{key: block[key] for key in ("lost_tests", "tests_restored") if key in block},
    }
    files.record_validation(doc.current_iteration + 1, run_number, record, rows)
    ctx.log.info(
        "tests_validated",
        passed=passed,
        tests_passed=counts.passed,
        tests_failed=counts.failed,
        tests_skipped=counts.skipped,
        exit_code=run.result.exit_code,
        verdict=verdict,
        error=run.error,
    )
    update = {"skill_state.validate": block, **work_done(doc, "validate", now, run.error)}
    attempts.clear(files.folder)
    return {**update, **recovered}


def _with_lost(
    rows: list[TestResult], lost: list[str], before: list[TestResult]
) -> list[TestResult]:
    """``rows`` with each test the fix lost (``T: skipped ...``) as a failed row: it is a
    failing test for debug and the next fix, under its own id and suite (as the rows of the
    run ``before`` had it, which keeps its hypothesis)."""
    suites = {row.test_name: row.suite for row in before}
    named = {entry.split(": ", 1)[0]: entry for entry in lost if "::" in entry or ": " in entry}
    named = {name: entry for name, entry in named.items() if not entry.startswith("collected ")}
    if not named:
        return rows
    kept = [row for row in rows if row.test_name not in named]
    for name, entry in named.items():
        kept.append(
            TestResult(
                test_name=name,
                suite=suites.get(name, name.split("::", 1)[0]),
                status="failed",
                duration_ms=0,
                error_message=f"lost since the first fix: {entry.split(': ', 1)[1]}",
            )
        )
    return kept


def _verdict(verdict: str, is_pass: bool, lost: list[str], restored: list[str]) -> str:
    """The run's verdict, with the tests it lost and the test files it restored said."""
    if lost:
        shown = "; ".join(lost[:3]) + (f"; and {len(lost) - 3} more" if len(lost) > 3 else "")
        if is_pass:
            verdict = "failed: " + verdict.removeprefix("passed: ") + ", but"
        else:
            verdict += "; and"
        verdict += f" tests were lost since the first fix: {shown}"
    if restored:
        files = ", ".join(restored[:3]) + (
            f" and {len(restored) - 3} more" if len(restored) > 3 else ""
        )
        verdict += f" (validated against the tests as they were: {files} restored)"
    return verdict


def _interrupted_fix(
    doc: LoopState, state: SkillState, ctx: LoopContext, files: ProgressFiles
) -> dict[str, Any]:
    """The update that records a fix attempt a killed or crashed run left unrecorded: its task,
    failed, with the files it changed (they are what this validation judges), counted for its
    hypothesis. Empty when there is none."""
    attempt = attempts.interrupted_fix(files.folder, state)
    if attempt is None:
        return {}
    after = take_snapshot(ctx.executor, ctx.workspace, exclude=ctx.instance_dir)
    changed = changed_files(attempt.before, after, ctx.executor, ctx.workspace)
    now = ctx.clock.iso()
    fields: dict[str, Any] = {
        "status": "failed",
        "files_changed": changed,
        "completed_at": now,
        "error": f"interrupted: the run ended while agent {attempt.task.tool} worked on it "
        f"(started {attempt.started_at}); its changes are validated",
    }
    if not is_known(attempt.before, after):
        fields["changes_unknown"] = True
    task = attempt.task.model_copy(update=fields)
    hypothesis_id = task.extra("fixes")
    count = len(fix_attempts(state, str(hypothesis_id))) + 1
    hypotheses = [
        h.model_copy(update={"fix_attempts": count}) if h.id == hypothesis_id else h
        for h in state.debug.hypotheses
    ]
    ctx.log.warning("interrupted_fix_recorded", task=task.id, files_changed=changed)
    files.record_task(doc.current_iteration + 1, task, "", now)
    return {
        "skill_state.develop": develop_block(state.develop, [*state.develop.tasks, task]),
        "skill_state.debug.hypotheses": [h.model_dump(mode="json") for h in hypotheses],
    }


def debug_failures(doc: LoopState, ctx: LoopContext) -> Update:
    """Judge the failing tests nobody understands yet, each by re-running it alone; a test keeps
    one hypothesis (and its id) across rounds."""
    state = skill_state_of(doc)
    opts = ctx.options
    now = ctx.clock.iso()
    failing = tests_to_debug(state)
    if not failing:
        message = "nothing to debug: the last validation recorded no failing test"
        if has_failing_tests(state):
            message = "nothing to debug: every failing test already has a confirmed hypothesis"
            if not state.validate_.test_results:
                shown = ", ".join(state.validate_.failed_tests[:5])
                message = f"nothing to debug: no failing test has a trace ({shown})"
        ctx.log.warning("debug_skipped", reason=message)
        return work_done(doc, "debug", now, message)
    failing = failing[: opts.max_hypotheses]
    known = [hypothesis_for(state, row) for row in failing]
    ids = _hypothesis_ids(state, known)
    kept = baseline.load(progress_of(doc, ctx).folder)
    allowed = opts.allow_test_changes
    # re-run alone on the tests the validation ran: an assertion a fix weakened is no flake
    with baseline.tests_as_they_were(kept, ctx.workspace, ctx.instance_dir, allowed=allowed) as (
        where,
        _,
    ):
        judged = investigate(
            failing,
            ids=ids,
            executor=ctx.executor,
            test_command=opts.test_command,
            workspace=where,
            timeout=opts.test_timeout,
        )
    for index, old in enumerate(known):
        attempts = (old.model_extra or {}).get("fix_attempts") if old is not None else None
        if attempts is not None:
            judged[index] = judged[index].model_copy(update={"fix_attempts": attempts})
        if old is not None and old.status == judged[index].status == "inconclusive":
            judged[index] = _failed_twice(judged[index])
    by_id = {h.id: h for h in judged}
    hypotheses = [by_id.pop(h.id, h) for h in state.debug.hypotheses] + list(by_id.values())
    debug = state.debug.model_copy(update={"hypotheses": hypotheses})
    target = fix_target(state.model_copy(update={"debug": debug}), max_fix_attempts_of(doc, ctx))
    first = failing[0]
    block: dict[str, Any] = {
        **(state.debug.model_extra or {}),
        "active_bug": f"{first.test_name}: {_first_line(first.error_message)}"[:500],
        "hypotheses_count": len(hypotheses),
        "hypotheses": [h.model_dump(mode="json") for h in hypotheses],
        "confirmed_hypothesis": target.id if target is not None else None,
        "iteration": state.debug.iteration + 1,
        "last_analysis_at": now,
    }
    progress_of(doc, ctx).record_debug(
        doc.current_iteration + 1, state.debug.iteration + 1, block, judged, now
    )
    ctx.log.info(
        "failures_debugged",
        hypotheses=len(judged),
        confirmed=sum(h.status == "confirmed" for h in judged),
        rejected=sum(h.status == "rejected" for h in judged),
    )
    return {"skill_state.debug": block, **work_done(doc, "debug", now)}


def _failed_twice(hypothesis: Hypothesis) -> Hypothesis:
    """A test that cannot be re-run alone, seen failing in the full run of a validation after
    the debug round that could not judge it: it reproduced (under the whole suite), which a fix
    can target. Without this, such a test is debugged again every round and never fixed."""
    why = str(hypothesis.verdict_reason or "").removeprefix("could not re-run the test alone: ")
    return hypothesis.model_copy(
        update={
            "status": "confirmed",
            "verdict_reason": (
                "failed in two full runs (the validation after a debug round failed it again); "
                f"it could not be re-run alone: {why}"
            )[:1000],
        }
    )


def _counts_block(
    counts: TestCounts | None, source: str | None, *, stopped: bool = False, uncollected: int = 0
) -> dict[str, Any] | None:
    """The counts as ``skill_state.validate.counts`` keeps them (None when unknown);
    ``stopped``, only when true: the runner stopped at the first failures (or at collection
    errors), so the counts are of the tests that ran before; ``uncollected``, only when some
    were: the test modules that could not be collected, counted among the failed."""
    if counts is None:
        return None
    block: dict[str, Any] = {
        "passed": counts.passed,
        "failed": counts.failed,
        "skipped": counts.skipped,
        "total": counts.total,
        "source": source,
    }
    if stopped:
        block["stopped"] = True
    if uncollected:
        block["uncollected"] = uncollected
    return block


def _hypothesis_ids(state: SkillState, known: list[Hypothesis | None]) -> list[str]:
    """The id each failing test's hypothesis has: its existing one, else the next free ``Hn``."""
    numbers = [int(h.id[1:]) for h in state.debug.hypotheses if re.fullmatch(r"H\d+", h.id)]
    free = max([len(state.debug.hypotheses), *numbers], default=0) + 1
    ids: list[str] = []
    for hypothesis in known:
        if hypothesis is not None:
            ids.append(hypothesis.id)
        else:
            ids.append(f"H{free}")
            free += 1
    return ids


def _first_line(message: str | None) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else "failed"
