"""The end-of-loop summary: ``skill_state.summary`` and ``summary.md``.

Written however the loop ends (completed, failed at a limit, user exit), so that a failed loop
explains itself as well as a completed one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .hypotheses import flaky_tests
from .model import LoopState, SkillState, Summary
from .rules import phase_of_action

__all__ = ["build_summary", "format_duration", "summary_markdown"]


def build_summary(doc: LoopState, state: SkillState, now: datetime) -> Summary:
    """Duration (ms since ``created_at``), iterations and the statistics of each phase."""
    tasks = state.develop.tasks
    done = sum(t.status == "completed" for t in tasks)
    runs = sum(phase_of_action(name) == "validate" for name in state.completed_actions)
    return Summary(
        duration=_duration_ms(doc.created_at, now),
        iterations=doc.current_iteration,
        develop={
            "total_tasks": len(tasks),
            "completed_tasks": done,
            "failed_tasks": sum(t.status == "failed" for t in tasks),
            "completion_rate": f"{done * 100 / len(tasks):.1f}" if tasks else "0",
        },
        debug={
            "iterations": state.debug.iteration,
            "hypotheses_tested": state.debug.hypotheses_count,
            "root_cause_found": state.debug.confirmed_hypothesis is not None
            or any(h.status == "confirmed" for h in state.debug.hypotheses),
            "fix_attempts": sum(t.extra("fixes") is not None for t in tasks),
            "flaky_tests": flaky_tests(state),
        },
        validate={
            "runs": runs,
            "passed": state.validate_.passed,
            "coverage": state.validate_.coverage,
            "failed_tests": len(state.validate_.failed_tests),
        },
    )


def summary_markdown(
    doc: LoopState, state: SkillState, summary: Summary, outcome: str, reason: str | None = None
) -> str:
    """summary.md: outcome (and the failure reason), statistics, failed tests, recommendations."""
    develop, debug, validate = summary.develop, summary.debug, summary.validate_
    lines = [
        f"# Loop summary: {doc.title}",
        "",
        f"- Loop ID: {doc.loop_id}",
        f"- Outcome: {outcome}",
        *([f"- Reason: {reason}"] if reason else []),
        f"- Duration: {format_duration(summary.duration)}",
        f"- Iterations: {summary.iterations} of {doc.max_iterations}",
        "",
        "## Development",
        "",
        f"- Tasks: {develop['completed_tasks']}/{develop['total_tasks']} completed "
        f"({develop['completion_rate']}%), {develop['failed_tasks']} failed",
        "",
        "## Debugging",
        "",
        f"- Rounds: {debug['iterations']}, hypotheses tested: {debug['hypotheses_tested']}",
        f"- Root cause found: {'yes' if debug['root_cause_found'] else 'no'}",
        f"- Fix attempts: {debug['fix_attempts']}",
        "- Flaky tests (failed, then passed when run alone): "
        + (", ".join(debug.get("flaky_tests") or []) or "none"),
        "",
        "## Validation",
        "",
        f"- Runs: {validate['runs']}, last run {'PASSED' if validate['passed'] else 'FAILED'}",
        f"- Pass rate: {state.validate_.pass_rate:.1f}%",
        *(
            [f"- Last verdict: {verdict}"]
            if (verdict := (state.validate_.model_extra or {}).get("verdict"))
            else []
        ),
        f"- Failed tests: {', '.join(state.validate_.failed_tests) or 'none'}",
        "",
        "## Recommendations",
        "",
        *[f"- {item}" for item in _recommendations(summary, state)],
        "",
    ]
    return "\n".join(lines)


def format_duration(milliseconds: float) -> str:
    """``1h 5m`` from an hour on, ``3m 20s`` from a minute on, else ``42s``."""
    seconds = int(milliseconds // 1000)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60}s"
    return f"{seconds}s"


def _recommendations(summary: Summary, state: SkillState) -> list[str]:
    items: list[str] = []
    develop: dict[str, Any] = summary.develop
    if develop["completed_tasks"] < develop["total_tasks"]:
        items.append("Finish or rework the tasks that did not complete.")
    if not state.validate_.passed:
        items.append("Fix the failing tests before merging.")
    if flaky_tests(state):
        items.append("Make the flaky tests deterministic: they failed once and then passed.")
    coverage = state.validate_.coverage
    if coverage is not None and 0 < coverage < 80:
        items.append("Raise test coverage above 80%.")
    if state.debug.iteration > 3 and state.debug.confirmed_hypothesis is None:
        items.append("Several debug rounds found no root cause: consider a refactor.")
    return items or ["Review the changes, update the documentation, and deploy."]


def _duration_ms(created_at: str, now: datetime) -> float:
    try:
        start = datetime.fromisoformat(created_at)
    except ValueError:
        return 0.0
    if start.tzinfo is None:
        return 0.0
    return max(0.0, round((now - start).total_seconds() * 1000))
