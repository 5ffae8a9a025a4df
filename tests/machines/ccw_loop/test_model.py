"""The LoopState model: the seed examples, the Claude variants, and what is preserved."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fsm_machines.ccw_loop.model import LoopState, SkillState
from pydantic import ValidationError

# Verbatim copies of the two example documents of seed 001 (identical in seeds 000 and 002).
CREATED_BY_API = """
{
  "loop_id": "loop-v2-20260122-abc123",
  "title": "Implement user authentication",
  "description": "Add login/logout functionality",
  "max_iterations": 10,
  "status": "created",
  "current_iteration": 0,
  "created_at": "2026-01-22T10:00:00+08:00",
  "updated_at": "2026-01-22T10:00:00+08:00"
}
"""

AFTER_INIT = """
{
  "loop_id": "loop-v2-20260122-abc123",
  "title": "Implement user authentication",
  "description": "Add login/logout functionality",
  "max_iterations": 10,
  "status": "running",
  "current_iteration": 0,
  "created_at": "2026-01-22T10:00:00+08:00",
  "updated_at": "2026-01-22T10:00:05+08:00",

  "skill_state": {
    "current_action": "init",
    "last_action": null,
    "completed_actions": [],
    "mode": "auto",

    "develop": {
      "total": 3,
      "completed": 0,
      "current_task": null,
      "tasks": [
        { "id": "task-001", "description": "Create auth component", "status": "pending" }
      ],
      "last_progress_at": null
    },

    "debug": {
      "active_bug": null,
      "hypotheses_count": 0,
      "hypotheses": [],
      "confirmed_hypothesis": null,
      "iteration": 0,
      "last_analysis_at": null
    },

    "validate": {
      "pass_rate": 0,
      "coverage": 0,
      "test_results": [],
      "passed": false,
      "failed_tests": [],
      "last_run_at": null
    },

    "errors": []
  }
}
"""


@pytest.mark.parametrize("text", [CREATED_BY_API, AFTER_INIT], ids=["created-by-api", "after-init"])
def test_seed_examples_validate_unchanged(text: str) -> None:
    """Both seed example documents validate and dump back to exactly the same JSON."""
    raw = json.loads(text)
    doc = LoopState.model_validate(raw)
    assert doc.model_dump(mode="json", exclude_unset=True) == raw


def test_partial_seed_task_gets_defaults() -> None:
    """The seed's task with only id, description and status reads as a pending write task."""
    task = LoopState.model_validate_json(AFTER_INIT).skill_state.develop.tasks[0]  # type: ignore[union-attr]
    assert (task.tool, task.mode, task.files_changed, task.completed_at) == (
        None,
        "write",
        [],
        None,
    )


def test_unknown_fields_are_preserved_everywhere() -> None:
    """Fields the model does not know survive validation and dumping, at every level."""
    raw = json.loads(AFTER_INIT)
    raw["tags"] = ["auth"]
    raw["skill_state"]["dashboard_note"] = "x"
    raw["skill_state"]["develop"]["tasks"][0]["priority"] = 1
    raw["skill_state"]["validate"]["runner"] = "pytest"
    dumped = LoopState.model_validate(raw).model_dump(mode="json", exclude_unset=True)
    assert dumped == raw


@pytest.mark.parametrize(
    ("develop", "expected"),
    [
        ({"total_count": 4, "completed_count": 2, "tasks": []}, (4, 2, None)),
        (
            {"total": 4, "completed": 1, "current_task_id": "task-002", "tasks": []},
            (4, 1, "task-002"),
        ),
    ],
    ids=["claude-counters", "claude-current-task-id"],
)
def test_claude_develop_names_are_accepted(
    develop: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    """The Claude version's counter names read as the Codex ones, and dump in the Codex form."""
    state = SkillState.model_validate({"develop": develop})
    assert (state.develop.total, state.develop.completed, state.develop.current_task) == expected
    assert "total_count" not in state.develop.model_dump()


def test_claude_paused_action_reads_as_no_phase() -> None:
    """current_action "paused" (the Claude pause exit) is read as null, the Codex form."""
    state = SkillState.model_validate(
        {"current_action": "paused", "last_action": "action-debug-with-file"}
    )
    assert state.current_action is None


def test_validate_block_dumps_under_its_seed_name() -> None:
    """skill_state.validate is written as "validate", never as the Python name."""
    dumped = SkillState().model_dump(mode="json")
    assert "validate" in dumped
    assert "validate_" not in dumped


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("status", "pending"),
        ("max_iterations", 0),
        ("current_iteration", -1),
    ],
    ids=["status-not-in-enum", "zero-max-iterations", "negative-iteration"],
)
def test_invalid_api_fields_are_rejected(field: str, value: Any) -> None:
    """Values outside the seed's types and enums do not validate."""
    raw = json.loads(CREATED_BY_API)
    raw[field] = value
    with pytest.raises(ValidationError):
        LoopState.model_validate(raw)


def test_user_exit_status_is_accepted() -> None:
    """The Codex-only status user_exit is a valid status."""
    raw = {**json.loads(CREATED_BY_API), "status": "user_exit"}
    assert LoopState.model_validate(raw).status == "user_exit"
