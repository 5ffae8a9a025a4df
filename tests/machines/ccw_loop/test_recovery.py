"""Recovering a loop whose master file is corrupt, from its progress files and task list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.options import LoopOptions
from fsm_machines.ccw_loop.recovery import salvage_api_fields

from fsm.engine.recovery import recover
from tests.machines.ccw_loop.conftest import LoopWorkspace

TASK = {
    "task_id": "t1",
    "description": "add mul",
    "tool": "bash",
    "mode": "write",
    "order": 0,
    "command": "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py",
}
PENDING = {**TASK, "task_id": "t2", "description": "later", "order": 1, "command": "true"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A loop that developed, failed validation, debugged, fixed and passed (built once: the
    tests only read its files)."""
    root = tmp_path_factory.mktemp("finished")
    loop_ws = LoopWorkspace(root / "ws", root / "bin")
    loop_ws.root.mkdir()
    loop_ws.write_project(bug=True)
    agent = loop_ws.write_agent(loop_ws.fix_add)
    loop_ws.write_tasks([TASK])
    loop_ws.new_loop()
    loop = loop_ws.open(agents={"codex": agent})
    assert loop.run().outcome == "completed"
    return loop


def _skill(raw: dict[str, Any]) -> dict[str, Any]:
    state = raw["skill_state"]
    return {
        "tasks": [
            (t["id"], t["status"], t["files_changed"], t.get("fixes"))
            for t in state["develop"]["tasks"]
        ],
        "actions": state["completed_actions"],
        "phase": state["current_action"],
        "debug": state["debug"],
        "validate": {k: v for k, v in state["validate"].items() if k != "coverage"},
    }


def test_skill_state_is_rebuilt_from_progress_files(finished: Any) -> None:
    """Tasks, action history, debug and validation come back as they were."""
    recovery = functions.recover(finished.context(LoopOptions), "{ not json")
    rebuilt = recovery.document.model_dump(mode="json", exclude_unset=True)
    assert _skill(rebuilt) == _skill(finished.data)
    assert rebuilt["current_iteration"] == finished.data["current_iteration"]
    assert rebuilt["title"] == finished.data["title"]


def test_unrecoverable_api_fields_are_reported(finished: Any) -> None:
    """max_iterations and the error history cannot be rebuilt, and the notes say so."""
    recovery = functions.recover(finished.context(LoopOptions), None)
    notes = "\n".join(recovery.notes)
    assert "max_iterations: could not be recovered" in notes
    assert "title: not in the corrupt file; taken from develop.md" in notes
    assert "status: taken from summary.md (completed)" in notes
    assert "skill_state.errors" in notes
    assert recovery.document.status == "completed"  # type: ignore[attr-defined]


def test_api_fields_are_salvaged_from_a_truncated_file(finished: Any) -> None:
    """The readable start of a half-written master file still gives the API fields."""
    text = json.dumps({**finished.data, "max_iterations": 7}, indent=2)
    truncated = text[: text.index('"skill_state"') + 40]
    recovery = functions.recover(finished.context(LoopOptions), truncated)
    doc = recovery.document
    assert (doc.max_iterations, doc.status, doc.created_at) == (
        7,
        "completed",
        finished.data["created_at"],
    )  # type: ignore[attr-defined]
    assert not any(n.startswith("max_iterations") for n in recovery.notes)


def test_unstarted_work_is_pending_and_status_paused(loop_ws: Any, started: Any) -> None:
    """Tasks that never ran come back pending, and an unknown status becomes paused."""
    loop_ws.write_project()
    loop_ws.write_tasks([TASK, PENDING])
    loop = started()
    loop.step()
    loop.step()
    recovery = functions.recover(loop.context(LoopOptions), "")
    doc = recovery.document
    state = doc.skill_state  # type: ignore[attr-defined]
    assert [(t.id, t.status) for t in state.develop.tasks] == [
        ("t1", "completed"),
        ("t2", "pending"),
    ]
    assert (doc.status, state.current_action, state.completed_actions) == (
        "paused",
        "develop",
        ["DEVELOP"],
    )  # type: ignore[attr-defined]
    assert "status: could not be recovered; set to paused (resume to continue)" in recovery.notes


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '{"title": "T", "status": "running", "max_iterations": 5, '
            '"skill_state": {"status": "x"',
            {"title": "T", "status": "running", "max_iterations": 5},
        ),
        ('{"title": 3, "status": "bogus", "max_iterations": 0}', {}),
        ("", {}),
    ],
    ids=["truncated", "invalid-values-dropped", "empty"],
)
def test_salvage_api_fields(raw: str, expected: dict[str, Any]) -> None:
    """Only top-level API values the model accepts are salvaged."""
    assert salvage_api_fields(raw) == expected


def test_error_limit_is_recovered_from_develop_md(finished: Any) -> None:
    """The persisted max_errors comes back from develop.md's header."""
    recovery = functions.recover(finished.context(LoopOptions), None)
    assert recovery.document.skill_state.max_errors == 3  # type: ignore[attr-defined]
    assert not any(n.startswith("skill_state.max_errors") for n in recovery.notes)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_recovered_loop_runs_to_completed(loop_ws: Any, started: Any, damage: str) -> None:
    """A master file corrupted mid-loop is rebuilt by fsm recover (the corrupt file kept aside,
    the losses noted), and the loop then continues to completed."""
    loop_ws.write_project(bug=True)
    loop_ws.write_tasks([TASK])
    loop = started(agents={"codex": loop_ws.write_agent(loop_ws.fix_add)})
    assert loop.run(max_steps=3).outcome == "limit"
    assert loop.events() == ["init", "develop", "validate"]
    master = loop.instance.store.paths(loop.instance.id).document
    text = master.read_text()
    damaged = text[: text.index('"skill_state"') + 50] if damage == "truncated" else "\0"
    master.write_text(damaged)
    report = recover(loop.instance)
    assert report.recovered and report.moved_aside is not None
    assert Path(report.moved_aside).read_text() == damaged
    notes = "\n".join(report.notes)
    assert "skill_state.errors: could not be recovered" in notes
    if damage == "garbage":
        assert "max_iterations: could not be recovered; set to the dashboard default 10" in notes
        assert "status: could not be recovered; set to paused" in notes
        loop.control("resume")
    else:
        assert "max_iterations" not in notes and "status" not in notes
    assert loop.state == "validate"
    assert loop.run().outcome == "completed"
    assert loop.events() == [
        *["init", "develop", "validate"],
        *["debug", "fix", "validate", "complete"],
    ]
    assert loop.doc.current_iteration == 5
    loop.assert_consistent()
