"""The hooks (create, on_error, summary) and the persisted error limit, through the engine."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.model import LoopState
from fsm_machines.ccw_loop.options import LoopOptions

from fsm.base.errors import DocumentInputError, MissingRequirementError
from tests.machines.ccw_loop.conftest import LOOP_ID, MACHINE_YAML, ccw_loop

BASH = {"task_id": "t1", "description": "run it", "tool": "bash", "mode": "write", "order": 0}
CREATED_BY_API = [
    "loop_id",
    "title",
    "description",
    "max_iterations",
    "status",
    "current_iteration",
    "created_at",
    "updated_at",
]
"""The keys of the seed's "Created by API" example, in its order."""


def test_create_hook_makes_a_dashboard_style_loop(loop_ws: Any) -> None:
    """fsm new gives status created, the engine's id, iteration 0 and no skill_state."""
    ctx = loop_ws.context("loop-v2-20260101T000000-deadbeef")
    doc = functions.new_loop(
        {"title": " Auth ", "description": "Add login", "max_iterations": 4}, ctx
    )
    dumped = doc.model_dump(mode="json", exclude_unset=True)
    assert dumped == {
        "loop_id": "loop-v2-20260101T000000-deadbeef",
        "title": "Auth",
        "description": "Add login",
        "max_iterations": 4,
        "status": "created",
        "current_iteration": 0,
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z",
    }


def test_fsm_new_writes_the_created_by_api_shape(cli: Any, tmp_path: Path) -> None:
    """fsm new writes exactly the keys of the seed's "Created by API" document, in its order (no
    skill_state, completed_at or failure_reason), under an id in the dashboard's format."""
    created = cli("new", str(MACHINE_YAML), "--set", "title=Auth", "--set", "max_iterations=4")
    assert created.code == 0, created.err
    loop_id = created.out.strip()
    assert re.fullmatch(r"loop-v2-\d{8}T\d{6}-[0-9a-f]{8}", loop_id)
    text = (tmp_path / ".workflow" / ".loop" / f"{loop_id}.json").read_text()
    raw = json.loads(text)
    assert list(raw) == CREATED_BY_API
    assert (raw["title"], raw["description"], raw["max_iterations"], raw["status"]) == (
        "Auth",
        "",
        4,
        "created",
    )
    assert text.startswith('{\n  "loop_id": ')


@pytest.mark.parametrize(
    "inputs",
    [
        {},
        {"title": "x", "max_iterations": 0},
        {"title": "x", "max_iterations": "5"},
        {"title": "x", "max_iterations": float("inf")},
        {"title": "x", "max_iterations": float("nan")},
        {"title": {"a": 1}},
        {"title": "x", "description": ["a"]},
        {"title": "x", "tags": "auth"},
        {"title": "x", "priority": 999},
        {"title": "x", "notes": {"a": 1}},
    ],
    ids=[
        "no-title",
        "zero-iterations",
        "not-a-number",
        "infinite-iterations",
        "nan-iterations",
        "object-title",
        "list-description",
        "tags-not-a-list",
        "unknown-priority",
        "object-notes",
    ],
)
def test_create_hook_rejects_bad_inputs(loop_ws: Any, inputs: dict[str, Any]) -> None:
    """Missing titles, bad or non-finite limits and values of the wrong type for the
    dashboard (an object as title, tags that are not a list) are input errors."""
    with pytest.raises(DocumentInputError):
        functions.new_loop(inputs, loop_ws.context())


def test_a_mistyped_input_is_refused_with_a_did_you_mean(loop_ws: Any) -> None:
    """An input key the loop does not take is refused by the engine, naming the closest one,
    and no master file is written."""
    instance = loop_ws.workspace().instance(ccw_loop(), LOOP_ID)
    with pytest.raises(DocumentInputError, match="did you mean 'max_iterations'"):
        instance.create({"title": "x", "max_iteration": 3})
    assert not instance.exists()


@pytest.mark.parametrize(
    ("typed", "title"),
    [("2024", "2024"), ("true", "true"), ("1.5", "1.5"), ("Fix parser", "Fix parser")],
    ids=["number", "boolean", "decimal", "text"],
)
def test_fsm_new_takes_a_scalar_title_as_the_text_typed(
    cli: Any, tmp_path: Path, typed: str, title: str
) -> None:
    """--set title=VALUE whose VALUE parses as a JSON scalar keeps the text, not Python's repr."""
    created = cli("new", str(MACHINE_YAML), "--set", f"title={typed}")
    assert created.code == 0, created.err
    raw = json.loads((tmp_path / ".workflow" / ".loop" / f"{created.out.strip()}.json").read_text())
    assert raw["title"] == title


def test_fsm_new_refuses_an_infinite_limit_in_one_line(cli: Any, tmp_path: Path) -> None:
    """--set max_iterations=1e400 (infinity, which JSON cannot hold) exits 2 and writes nothing."""
    created = cli("new", str(MACHINE_YAML), "--set", "title=x", "--set", "max_iterations=1e400")
    assert created.code == 2
    assert created.err.strip().splitlines() == [
        "fsm: error: max_iterations must be a finite number, got inf"
    ]
    assert not (tmp_path / ".workflow").exists()


@pytest.mark.parametrize(
    ("failed_action", "action", "message"),
    [
        (None, "VALIDATE", "OSError: disk"),
        ("develop", "DEVELOP", "OSError: disk"),
        ("guard debug_due", "VALIDATE", "guard debug_due: OSError: disk"),
        ("validation", "VALIDATE", "validation: OSError: disk"),
    ],
    ids=["unknown", "action", "guard", "result-validation"],
)
def test_on_error_appends_to_errors(
    started: Any, failed_action: str | None, action: str, message: str
) -> None:
    """The error entry names the action that failed (or the step, for a guard or an invalid
    result) and extends the streak; nothing else changes."""
    loop = started()
    loop.fire("init")
    ctx = replace(
        loop.context(LoopOptions).for_transition("validate", "init", "validate"),
        failed_action=failed_action,
    )
    update = functions.record_error(loop.doc, ctx, OSError("disk"))
    assert set(update) == {"skill_state.errors", "skill_state.consecutive_errors", "updated_at"}
    assert (
        update["skill_state.errors"][-1]["action"],
        update["skill_state.errors"][-1]["message"],
    ) == (action, message)
    assert update["skill_state.consecutive_errors"] == 1


def test_on_error_without_skill_state_keeps_the_loop_created(loop_ws: Any, started: Any) -> None:
    """When init itself raises, the error (and the error limit) is kept and the loop still reads
    as created."""
    loop = started(max_errors=2)
    loop_ws.progress("").write_text("a file where the progress folder should be")
    assert loop.fire("init").outcome == "failed"
    assert loop.events() == ["init!"]
    assert loop.state == "created"
    state = loop.doc.skill_state
    assert [e.action for e in state.errors] == ["INIT"]
    assert (state.consecutive_errors, state.max_errors) == (1, 2)
    loop.assert_consistent()


def test_init_persists_the_error_limit(loop_ws: Any, started: Any) -> None:
    """init writes the effective max_errors into skill_state and develop.md."""
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started(max_errors=4)
    loop.fire("init")
    assert loop.data["skill_state"]["max_errors"] == 4
    assert "- Max errors: 4" in loop_ws.progress("develop.md").read_text()


def test_persisted_error_limit_outlives_the_option(loop_ws: Any, started: Any) -> None:
    """A loop keeps the limit it was initialised with when a later run has another option: fsm
    run refuses, naming the change (``--reconfigure`` would adopt it), and steps keep the
    persisted limit."""
    loop_ws.write_tasks(
        [{**BASH, "command": "false"}, {**BASH, "task_id": "t2", "command": "true"}]
    )
    started(max_errors=1).fire("init")
    loop = loop_ws.open(max_errors=5)
    with pytest.raises(MissingRequirementError, match="max_errors 1 is now 5"):
        loop.run()
    loop.step()
    loop.step()
    assert (loop.doc.status, loop.events()) == ("failed", ["init", "develop", "give_up"])
    assert "(max_errors 1)" in (loop.doc.failure_reason or "")
    LoopState.model_validate(loop.data)


def test_summary_hook_lines(loop_ws: Any, started: Any) -> None:
    """fsm status shows iteration, phase, per-phase progress and the error limit."""
    loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started()
    loop.fire("init")
    loop.fire("develop")
    lines = functions.status_lines(loop.doc)
    assert lines["iteration"] == "1/10"
    assert lines["develop"] == "1/1 tasks done (100%)"
    assert lines["validate"] == "not run"
    assert lines["errors"] == "0 (0 in a row of max 3)"


def test_summary_says_when_validation_is_older_than_the_code(loop_ws: Any, started: Any) -> None:
    """After a passing validation, a task that changed the code makes the validate line say the
    result predates it."""
    loop_ws.write_project()
    path = loop_ws.write_tasks([{**BASH, "command": "true"}])
    loop = started()
    for event in ("init", "develop", "validate"):
        loop.fire(event)
    assert functions.status_lines(loop.doc)["validate"] == "PASSED (2 passed)"
    with path.open("a") as handle:
        handle.write(json.dumps({**BASH, "task_id": "t2", "command": "echo >> calc.py"}) + "\n")
    loop.step()
    lines = functions.status_lines(loop.doc)
    assert lines["validate"] == "PASSED (2 passed), before the latest changes"
    assert lines["develop"] == "2/2 tasks done (100%)"
