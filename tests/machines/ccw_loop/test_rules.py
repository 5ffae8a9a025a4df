"""The phase rules, as machine.yaml orders them: which transition an automatic step takes."""

from __future__ import annotations

from typing import Any

import pytest
from fsm_machines.ccw_loop.codec import LoopCodec
from fsm_machines.ccw_loop.model import LoopState

from fsm.view.inspect import status
from tests.machines.ccw_loop.conftest import ccw_loop

NOW = "2026-01-01T00:00:00.000Z"
TEST = "tests/test_calc.py::test_add"
COUNTS = {"passed": 2, "failed": 0, "skipped": 0, "total": 2, "source": "junit"}


def task(task_id: str, status: str = "pending", **extra: Any) -> dict[str, Any]:
    """A develop task in ``status``."""
    return {
        "id": task_id,
        "description": f"do {task_id}",
        "tool": "bash",
        "status": status,
        **extra,
    }


def hypothesis(hid: str, status: str = "confirmed") -> dict[str, Any]:
    """A hypothesis with ``status``."""
    return {
        "id": hid,
        "description": "d",
        "testable_condition": "c",
        "logging_point": "calc.py:add:2",
        "evidence_criteria": {"confirm": "fails", "reject": "passes"},
        "likelihood": 1,
        "status": status,
    }


def loop(
    *,
    tasks: list[dict[str, Any]] | None = None,
    actions: list[str] | None = None,
    passed: bool = False,
    confirmed: str | None = None,
    hypotheses: list[dict[str, Any]] | None = None,
    iteration: int = 0,
    max_iterations: int = 10,
    errors_in_a_row: int = 0,
    failing: list[str] | None = None,
    validated: dict[str, Any] | None = None,
    **top: Any,
) -> dict[str, Any]:
    """A running, initialised loop document with the given phase facts (``failing``: tests the
    last validation saw fail; ``validated``: more keys of its validate block)."""
    rows = [
        {"test_name": name, "suite": "tests.test_calc", "status": "failed", "duration_ms": 1.0}
        for name in failing or []
    ]
    return {
        "loop_id": "loop-v2-20260101T000000-0a1b2c3d",
        "title": "t",
        "description": "d",
        "max_iterations": max_iterations,
        "status": "running",
        "current_iteration": iteration,
        "created_at": NOW,
        "updated_at": NOW,
        "skill_state": {
            "current_action": "init",
            "last_action": None,
            "completed_actions": actions or [],
            "mode": "auto",
            "develop": {"total": 1, "completed": 0, "tasks": tasks or [], "last_progress_at": None},
            "debug": {
                "hypotheses_count": len(hypotheses or []),
                "hypotheses": hypotheses or [],
                "confirmed_hypothesis": confirmed,
                "iteration": 0,
                "last_analysis_at": None,
            },
            "validate": {
                "pass_rate": 0,
                "coverage": 0,
                "test_results": rows,
                "passed": passed,
                "failed_tests": failing or [],
                "last_run_at": None,
                **(validated or {}),
            },
            "errors": [],
            "consecutive_errors": errors_in_a_row,
        },
        **top,
    }


RULES = [
    ("pending-task-develops", loop(tasks=[task("a", "completed"), task("b")]), "develop"),
    ("pending-beats-failed-validation", loop(tasks=[task("b")], actions=["VALIDATE"]), "develop"),
    ("all-done-validates", loop(tasks=[task("a", "completed")], actions=["DEVELOP"]), "validate"),
    (
        "failed-task-aborts",
        loop(tasks=[task("a", "failed")], actions=["DEVELOP"]),
        "abort",
    ),
    (
        "failed-fix-attempt-does-not-abort",
        loop(
            tasks=[task("a", "completed"), task("fix-H1", "failed", fixes="H1")],
            actions=["VALIDATE", "DEBUG", "DEVELOP"],
            confirmed="H1",
            hypotheses=[hypothesis("H1")],
        ),
        "validate",
    ),
    ("no-work-yet-validates", loop(), "validate"),
    ("passed-completes", loop(actions=["DEVELOP", "VALIDATE"], passed=True), "complete"),
    ("failed-debugs", loop(actions=["DEVELOP", "VALIDATE"], failing=[TEST]), "debug"),
    (
        "failed-naming-no-test-halts",
        loop(actions=["DEVELOP", "VALIDATE"], validated={"counts": COUNTS, "exit_code": 1}),
        "halt",
    ),
    ("not-judged-debugs", loop(actions=["DEVELOP", "VALIDATE"]), "debug"),
    (
        "confirmed-hypothesis-fixes",
        loop(actions=["VALIDATE", "DEBUG"], confirmed="H1", hypotheses=[hypothesis("H1")]),
        "fix",
    ),
    (
        "fixed-hypothesis-is-consumed",
        loop(
            tasks=[task("fix-H1", "completed", fixes="H1")],
            actions=["VALIDATE", "DEBUG", "DEVELOP"],
            confirmed="H1",
            hypotheses=[hypothesis("H1")],
        ),
        "validate",
    ),
    (
        "confirmed-but-passing-completes",
        loop(
            tasks=[task("fix-H1", "completed", fixes="H1")],
            actions=["DEBUG", "DEVELOP", "VALIDATE"],
            passed=True,
            confirmed="H1",
        ),
        "complete",
    ),
    ("nothing-confirmed-revalidates", loop(actions=["VALIDATE", "DEBUG"]), "validate"),
    ("claude-action-ids", loop(actions=["action-validate-with-file"], passed=True), "complete"),
    ("iteration-limit", loop(actions=["VALIDATE"], iteration=10, failing=[TEST]), "exhaust"),
    (
        "limit-after-pass-completes",
        loop(actions=["VALIDATE"], passed=True, iteration=10),
        "complete",
    ),
    ("error-limit", loop(tasks=[task("b")], errors_in_a_row=3), "give_up"),
    ("errors-below-limit", loop(tasks=[task("b")], errors_in_a_row=2), "develop"),
    (
        "fail-fast-task",
        loop(tasks=[task("a", "failed", on_error="fail_fast"), task("b")], actions=["DEVELOP"]),
        "abort",
    ),
    (
        "continue-task",
        loop(tasks=[task("a", "failed", on_error="continue"), task("b")], actions=["DEVELOP"]),
        "develop",
    ),
]


@pytest.mark.parametrize(("raw", "event"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_phase_rule(loop_ws: Any, raw: dict[str, Any], event: str) -> None:
    """An automatic step from a phase state takes the first rule that applies."""
    assert loop_ws.automatic_event(raw) == event


@pytest.mark.parametrize("phase", ["init", "develop", "debug", "validate"])
def test_rules_do_not_depend_on_the_phase(loop_ws: Any, phase: str) -> None:
    """The same facts select the same action whatever the current phase is."""
    raw = loop(actions=["DEVELOP", "VALIDATE"], failing=[TEST])
    raw["skill_state"]["current_action"] = phase
    assert loop_ws.automatic_event(raw) == "debug"


def test_created_loop_initialises(loop_ws: Any) -> None:
    """A dashboard-created loop without skill_state starts with init."""
    raw = loop()
    del raw["skill_state"]
    assert loop_ws.automatic_event(raw) == "init"


def test_repeated_init_failures_end_failed(loop_ws: Any) -> None:
    """A loop whose init failed max_errors times (errors kept, not initialised) gives up."""
    raw = loop(errors_in_a_row=3)
    raw["skill_state"].update(current_action=None, completed_actions=[])
    assert LoopCodec().read(LoopState.model_validate(raw)) == "created"
    assert loop_ws.automatic_event(raw) == "give_up"


@pytest.mark.parametrize(
    ("persisted", "option", "event"),
    [(None, 3, "develop"), (None, 2, "give_up"), (2, 3, "give_up"), (3, 2, "develop")],
    ids=["option-below", "option-reached", "persisted-reached", "persisted-wins"],
)
def test_error_limit_is_the_persisted_one(
    loop_ws: Any, persisted: int | None, option: int, event: str
) -> None:
    """skill_state.max_errors bounds the streak; the option applies only when none is
    persisted."""
    raw = loop(tasks=[task("b")], errors_in_a_row=2)
    if persisted is not None:
        raw["skill_state"]["max_errors"] = persisted
    assert loop_ws.automatic_event(raw, max_errors=option) == event


def test_interactive_menu_takes_no_automatic_step(loop_ws: Any) -> None:
    """In the menu only the limits fire automatically; everything else waits for a choice."""
    raw = loop(tasks=[task("b")])
    raw["skill_state"]["mode"] = "interactive"
    assert LoopCodec().read(LoopState.model_validate(raw)) == "menu"
    assert loop_ws.automatic_event(raw, mode="interactive") is None
    raw["current_iteration"] = 10
    assert loop_ws.automatic_event(raw, mode="interactive") == "exhaust"


CODEC_READS = [
    ("no-skill-state", {"skill_state": None}, "created"),
    ("completed", {"status": "completed"}, "completed"),
    ("stopped", {"status": "failed"}, "failed"),
    ("user-exit", {"status": "user_exit"}, "user_exit"),
    ("paused-keeps-phase", {"status": "paused"}, "debug"),
]


@pytest.mark.parametrize(
    ("change", "state"), [r[1:] for r in CODEC_READS], ids=[r[0] for r in CODEC_READS]
)
def test_codec_reads_status_and_phase(change: dict[str, Any], state: str) -> None:
    """Final statuses are final states; otherwise the phase of skill_state is the state."""
    raw = loop(actions=["DEBUG"])
    raw["skill_state"]["current_action"] = "debug"
    raw.update(change)
    assert LoopCodec().read(LoopState.model_validate(raw)) == state


@pytest.mark.parametrize(
    ("last_action", "state"),
    [("action-debug-with-file", "debug"), ("VALIDATE", "validate"), ("action-init", "init")],
)
def test_codec_reads_claude_null_action_from_last_action(last_action: str, state: str) -> None:
    """A Claude orchestrator file (current_action null) is in the phase of its last action."""
    raw = loop()
    raw["skill_state"].update(current_action=None, last_action=last_action)
    assert LoopCodec().read(LoopState.model_validate(raw)) == state


@pytest.mark.parametrize(
    ("state", "update"),
    [
        ("develop", {"skill_state.current_action": "develop"}),
        ("completed", {"status": "completed", "skill_state.current_action": "complete"}),
        ("failed", {"status": "failed"}),
        ("user_exit", {"status": "user_exit"}),
        ("menu", {}),
    ],
)
def test_codec_writes_states(state: str, update: dict[str, Any]) -> None:
    """Writing a state sets the phase, or the final status."""
    assert LoopCodec().write(LoopState.model_validate(loop()), state) == update


TEST_ADD = "tests/test_calc.py::test_add"


def failing_in(raw: dict[str, Any], *failing: str) -> dict[str, Any]:
    """``raw`` whose last validation failed with the tests ``failing``."""
    raw["skill_state"]["validate"].update(
        test_results=[
            {
                "test_name": name,
                "suite": "tests.test_calc",
                "status": "failed",
                "duration_ms": 1.0,
                "error_message": "assert -1 == 5",
            }
            for name in failing
        ],
        failed_tests=list(failing),
    )
    return raw


def about(hid: str, test: str, status: str = "confirmed") -> dict[str, Any]:
    """A hypothesis about the failing ``test``."""
    return {**hypothesis(hid, status), "test": test, "suite": "tests.test_calc"}


def fix(hid: str, attempt: int, status: str = "completed") -> dict[str, Any]:
    """Fix attempt ``attempt`` for hypothesis ``hid``."""
    suffix = f"-{attempt}" if attempt > 1 else ""
    return task(f"fix-{hid}{suffix}", status, fixes=hid, attempt=attempt)


DONE = task("a", "completed")
UNDERSTOOD_RULES = [
    (
        "understood-test-is-fixed-not-debugged",
        failing_in(
            loop(
                tasks=[DONE, fix("H1", 1)],
                actions=["VALIDATE", "DEBUG", "DEVELOP", "VALIDATE"],
                hypotheses=[about("H1", TEST_ADD)],
            ),
            TEST_ADD,
        ),
        "fix",
    ),
    (
        "new-failure-is-debugged-first",
        failing_in(
            loop(
                tasks=[DONE, fix("H1", 1)],
                actions=["VALIDATE", "DEBUG", "DEVELOP", "VALIDATE"],
                hypotheses=[about("H1", TEST_ADD)],
            ),
            TEST_ADD,
            "tests/test_calc.py::test_add_zero",
        ),
        "debug",
    ),
    (
        "rejected-test-failing-again-is-debugged-again",
        failing_in(
            loop(
                tasks=[DONE],
                actions=["VALIDATE", "DEBUG", "VALIDATE"],
                hypotheses=[about("H1", TEST_ADD, "rejected")],
            ),
            TEST_ADD,
        ),
        "debug",
    ),
    (
        "spent-attempts-abandon",
        failing_in(
            loop(
                tasks=[DONE, fix("H1", 1), fix("H1", 2), fix("H1", 3)],
                actions=["DEBUG", "DEVELOP", "VALIDATE"],
                hypotheses=[about("H1", TEST_ADD)],
            ),
            TEST_ADD,
        ),
        "abandon",
    ),
    (
        "failed-fix-is-retried-at-once",
        failing_in(
            loop(
                tasks=[DONE, fix("H1", 1, "failed")],
                actions=["VALIDATE", "DEBUG", "DEVELOP"],
                hypotheses=[about("H1", TEST_ADD)],
            ),
            TEST_ADD,
        ),
        "fix",
    ),
    (
        "last-failed-fix-abandons",
        failing_in(
            loop(
                tasks=[
                    DONE,
                    fix("H1", 1, "failed"),
                    fix("H1", 2, "failed"),
                    fix("H1", 3, "failed"),
                ],
                actions=["VALIDATE", "DEBUG", "DEVELOP", "DEVELOP", "DEVELOP"],
                hypotheses=[about("H1", TEST_ADD)],
            ),
            TEST_ADD,
        ),
        "abandon",
    ),
]


@pytest.mark.parametrize(
    ("raw", "event"), [r[1:] for r in UNDERSTOOD_RULES], ids=[r[0] for r in UNDERSTOOD_RULES]
)
def test_understood_tests_rule(loop_ws: Any, raw: dict[str, Any], event: str) -> None:
    """A failing test with a confirmed hypothesis gets its next fix attempt instead of another
    debug round, until max_fix_attempts; failing tests nobody understands are debugged."""
    if raw["skill_state"]["develop"]["tasks"][-1]["status"] == "failed":
        raw["skill_state"]["develop"]["current_task"] = raw["skill_state"]["develop"]["tasks"][-1][
            "id"
        ]
    assert loop_ws.automatic_event(raw) == event


BUDGET_RULES = [
    ("develop-needs-two", loop(tasks=[task("b")], iteration=9), "exhaust"),
    ("develop-fits", loop(tasks=[task("b")], iteration=8), "develop"),
    ("validate-needs-one", loop(tasks=[DONE], actions=["DEVELOP"], iteration=9), "validate"),
    (
        "fix-needs-two",
        failing_in(
            loop(
                tasks=[DONE],
                actions=["VALIDATE", "DEBUG"],
                hypotheses=[about("H1", TEST_ADD)],
                iteration=9,
            ),
            TEST_ADD,
        ),
        "exhaust",
    ),
    ("debug-needs-three", failing_in(loop(actions=["VALIDATE"], iteration=8), TEST_ADD), "exhaust"),
    ("debug-fits", failing_in(loop(actions=["VALIDATE"], iteration=7), TEST_ADD), "debug"),
    ("complete-needs-none", loop(actions=["VALIDATE"], passed=True, iteration=10), "complete"),
]


@pytest.mark.parametrize(
    ("raw", "event"), [r[1:] for r in BUDGET_RULES], ids=[r[0] for r in BUDGET_RULES]
)
def test_budget_reserves_the_validation(loop_ws: Any, raw: dict[str, Any], event: str) -> None:
    """A develop or fix starts only with an iteration left for its validation, a debug round
    only with room for a fix and its validation; otherwise the loop ends at the limit."""
    assert loop_ws.automatic_event(raw) == event


def test_menu_offers_no_change_that_cannot_be_validated(loop_ws: Any) -> None:
    """In the menu with one iteration left, develop is not offered; validate still is."""
    raw = loop(tasks=[task("b")], iteration=9)
    raw["skill_state"]["mode"] = "interactive"
    loop_ws.write_document(raw)
    instance = loop_ws.workspace(mode="interactive").instance(ccw_loop(), raw["loop_id"])
    offered = [e.event for e in status(instance).events if e.enabled and not e.auto]
    assert "develop" not in offered and "validate" in offered
