"""The document a new instance starts with: the original skill-tuning skill's
initial state template, filled in.

The engine writes a model returned by ``create`` sparsely (only the fields that were set), but
the readers of ``state.json`` (CCW's orchestrator and dashboards, people) expect every key of
the original skill's template from the first write on. So ``create`` returns a plain dict: the
template, with the validated inputs and the instance's paths merged into it. The fields this machine
adds to the original skill (``phase``, ``completed_at``, ``final_report``) appear when an action
sets them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import TuningState

__all__ = ["initial_document", "seed_template"]


def seed_template() -> dict[str, Any]:
    """A fresh copy of the original skill's Initial State Template."""
    return {
        "status": "pending",
        "started_at": None,
        "updated_at": None,
        "target_skill": {
            "name": None,
            "path": None,
            "execution_mode": None,
            "phases": [],
            "specs": [],
        },
        "user_issue_description": "",
        "focus_areas": [],
        "diagnosis": {"context": None, "memory": None, "dataflow": None, "agent": None},
        "issues": [],
        "issues_by_severity": {"critical": 0, "high": 0, "medium": 0, "low": 0},
        "proposed_fixes": [],
        "applied_fixes": [],
        "pending_fixes": [],
        "iteration_count": 0,
        "max_iterations": 5,
        "quality_score": 0,
        "quality_gate": "fail",
        "completed_actions": [],
        "current_action": None,
        "action_history": [],
        "errors": [],
        "error_count": 0,
        "max_errors": 3,
        "work_dir": None,
        "backup_dir": None,
    }


def _merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = _merged(current, value)
        else:
            merged[key] = value
    return merged


def initial_document(values: Mapping[str, Any]) -> dict[str, Any]:
    """The template with ``values`` (nested, as the document holds them) merged in.

    The values are validated first (raises pydantic's ValidationError) and written as the model
    reads them (``"3"`` given for an integer is written as ``3``); keys the model does not know
    are kept.
    """
    given = TuningState.model_validate(values).model_dump(mode="json", exclude_unset=True)
    document = _merged(seed_template(), given)
    TuningState.model_validate(document)
    return document
