"""Which failing tests the loop understands: one hypothesis per failing test, and its fixes.

A hypothesis is tied to its test by the ``test`` and ``suite`` keys debug writes, so a test that
keeps failing keeps its hypothesis (and id) across rounds. A test is *understood* once its
hypothesis is confirmed: it is not debugged again, its next fix attempt is due instead, until
``max_fix_attempts`` fix tasks were made for it. Fix tasks name their hypothesis in ``fixes``.

Without a fix agent (``fix_tool`` none) a failing test that debug did not find flaky is
*unexplained* (:func:`unexplained_tests`): the loop hands it over to a person, with
:func:`hand_over_reason` as its ``failure_reason``.

Documents written without those links (by CCW's skills, or fsm before it kept them) still
work: their ``confirmed_hypothesis`` is fixed once, as they expect.
"""

from __future__ import annotations

from .model import DevelopTask, Hypothesis, SkillState, TestResult

__all__ = [
    "failing_rows",
    "fix_attempts",
    "fix_target",
    "flaky_note",
    "flaky_tests",
    "hand_over_reason",
    "has_failing_tests",
    "hypothesis_for",
    "spent_test",
    "tests_to_debug",
    "understood_tests",
    "unexplained_tests",
]


def failing_rows(state: SkillState) -> list[TestResult]:
    """The failed test cases of the last validation."""
    return [row for row in state.validate_.test_results if row.status == "failed"]


def has_failing_tests(state: SkillState) -> bool:
    """The last validation reported failing tests that debug can investigate."""
    return bool(state.validate_.failed_tests) or bool(failing_rows(state))


def hypothesis_for(state: SkillState, row: TestResult) -> Hypothesis | None:
    """The hypothesis about the failing test ``row`` (one per test, kept across rounds)."""
    return next(
        (
            h
            for h in state.debug.hypotheses
            if h.model_extra
            and h.model_extra.get("test") == row.test_name
            and h.model_extra.get("suite", row.suite) == row.suite
        ),
        None,
    )


def flaky_tests(state: SkillState) -> list[str]:
    """Tests seen failing, then passing with nothing changed: those whose hypothesis debug
    rejected (the test passed when run alone), in hypothesis order."""
    names = []
    for hypothesis in state.debug.hypotheses:
        test = (hypothesis.model_extra or {}).get("test")
        if hypothesis.status == "rejected" and test and test not in names:
            names.append(str(test))
    return names


def flaky_note(state: SkillState) -> str:
    """``1 flaky test: T (failed, then passed when run alone)``, or "" when there is none."""
    names = flaky_tests(state)
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    plural = "s" if len(names) != 1 else ""
    return f"{len(names)} flaky test{plural}: {shown} (failed, then passed when run alone)"


def tests_to_debug(state: SkillState) -> list[TestResult]:
    """Failing tests of the last validation that no confirmed hypothesis explains yet (a test
    already understood is not debugged again: its next fix attempt is due instead)."""
    rows = []
    for row in failing_rows(state):
        hypothesis = hypothesis_for(state, row)
        if hypothesis is None or hypothesis.status != "confirmed":
            rows.append(row)
    return rows


def fix_attempts(state: SkillState, hypothesis_id: str) -> list[DevelopTask]:
    """The fix tasks made for ``hypothesis_id``, oldest first."""
    return [t for t in state.develop.tasks if t.extra("fixes") == hypothesis_id]


def _legacy_target(state: SkillState) -> Hypothesis | None:
    """A confirmed hypothesis of a document written without test links (CCW's skills, older
    fsm): it is fixed once, as those documents expect."""
    confirmed = state.debug.confirmed_hypothesis
    found = next((h for h in state.debug.hypotheses if h.id == confirmed), None)
    if found is None or (found.model_extra or {}).get("test") is not None:
        return None
    return None if fix_attempts(state, found.id) else found


def understood_tests(state: SkillState) -> list[tuple[TestResult, Hypothesis]]:
    """Failing tests of the last validation with a confirmed hypothesis, in hypothesis order."""
    pairs = []
    for row in failing_rows(state):
        hypothesis = hypothesis_for(state, row)
        if hypothesis is not None and hypothesis.status == "confirmed":
            pairs.append((row, hypothesis))
    order = {h.id: n for n, h in enumerate(state.debug.hypotheses)}
    return sorted(pairs, key=lambda pair: order[pair[1].id])


def fix_target(state: SkillState, max_attempts: int) -> Hypothesis | None:
    """The hypothesis the next fix is for: the first confirmed one whose test still fails and
    that has fix attempts left."""
    for _, hypothesis in understood_tests(state):
        if len(fix_attempts(state, hypothesis.id)) < max_attempts:
            return hypothesis
    return _legacy_target(state)


def spent_test(state: SkillState, max_attempts: int) -> tuple[TestResult, Hypothesis] | None:
    """A failing test whose hypothesis already had ``max_attempts`` fixes."""
    return next(
        (
            pair
            for pair in understood_tests(state)
            if len(fix_attempts(state, pair[1].id)) >= max_attempts
        ),
        None,
    )


def unexplained_tests(state: SkillState) -> list[TestResult]:
    """Failing tests of the last validation that debug did not find flaky (it confirmed them,
    could not judge them, or has not looked at them yet)."""
    unexplained = []
    for row in failing_rows(state):
        hypothesis = hypothesis_for(state, row)
        if hypothesis is None or hypothesis.status != "rejected":
            unexplained.append(row)
    return unexplained


def hand_over_reason(state: SkillState, debug_file: str = "debug.md") -> str:
    """``failure_reason`` of a loop without a fix agent whose validation failed (``debug_file``:
    where debug wrote its evidence, as the user should find it)."""
    rows = failing_rows(state)
    names = [row.test_name for row in rows] or list(state.validate_.failed_tests)
    count = len(names)
    listed = ", ".join(names[:3]) + (f" and {count - 3} more" if count > 3 else "")
    confirmed = sum(
        1
        for row in rows
        if (h := hypothesis_for(state, row)) is not None and h.status == "confirmed"
    )
    evidence = ""
    if confirmed:
        evidence = f"; debug confirmed {confirmed} by running {'it' if confirmed == 1 else 'them'}"
        evidence += f" alone (see {debug_file})"
    them = "it" if count == 1 else "them"
    return (
        f"validation failed: {count} test{'s' if count != 1 else ''} "
        f"fail{'s' if count == 1 else ''} ({listed}){evidence}; no fix agent is configured "
        f"(fix_tool none): fix {them} by hand or set fix_tool"
    )[:1000]
