"""The TuningState document: seed 004's template and types, and its consistency rule."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fsm_machines.skill_tuning.model import TuningState
from pydantic import ValidationError

SEED_INITIAL_STATE = """
{
  "status": "pending",
  "started_at": null,
  "updated_at": null,
  "target_skill": {
    "name": null,
    "path": null,
    "execution_mode": null,
    "phases": [],
    "specs": []
  },
  "user_issue_description": "",
  "focus_areas": [],
  "diagnosis": {
    "context": null,
    "memory": null,
    "dataflow": null,
    "agent": null
  },
  "issues": [],
  "issues_by_severity": {
    "critical": 0,
    "high": 0,
    "medium": 0,
    "low": 0
  },
  "proposed_fixes": [],
  "applied_fixes": [],
  "pending_fixes": [],
  "iteration_count": 0,
  "max_iterations": 5,
  "quality_score": 0,
  "quality_gate": "fail",
  "completed_actions": [],
  "current_action": null,
  "action_history": [],
  "errors": [],
  "error_count": 0,
  "max_errors": 3,
  "work_dir": null,
  "backup_dir": null
}
"""
"""The Initial State Template of seed 004, verbatim."""

ISSUE = {
    "id": "ISS-001",
    "type": "context_explosion",
    "severity": "high",
    "priority": 1,
    "location": {"file": "phases/01-collect.md", "line_start": 10, "line_end": 12, "phase": "01"},
    "description": "History accumulation without bound",
    "evidence": ["phases/01-collect.md:10: state.history.push(x)"],
    "root_cause": "No trimming",
    "impact": "Context overflow",
    "suggested_fix": "Sliding window",
    "related_issues": [],
}


def full_document() -> dict[str, Any]:
    """A document using every nested type of the seed's schema."""
    doc: dict[str, Any] = json.loads(SEED_INITIAL_STATE)
    doc.update(
        status="running",
        started_at="2026-01-14T12:59:13.000Z",
        updated_at="2026-01-14T13:00:00.000Z",
        target_skill={
            "name": "software-manual",
            "path": ".claude/skills/software-manual",
            "execution_mode": "autonomous",
            "phases": ["phases/orchestrator.md"],
            "specs": ["specs/quality-gates.md"],
        },
        diagnosis={
            "context": {
                "status": "completed",
                "issues_found": 1,
                "severity": "high",
                "execution_time_ms": 12,
                "details": {
                    "patterns_checked": ["history"],
                    "patterns_matched": ["history"],
                    "evidence": [
                        {
                            "file": "phases/01-collect.md",
                            "line": 10,
                            "pattern": "history",
                            "context": "state.history.push(x)",
                            "severity": "high",
                        }
                    ],
                    "recommendations": ["Sliding window"],
                },
            },
            "memory": None,
            "dataflow": None,
            "agent": None,
        },
        issues=[ISSUE],
        issues_by_severity={"critical": 0, "high": 1, "medium": 0, "low": 0},
        proposed_fixes=[
            {
                "id": "FIX-001",
                "issue_ids": ["ISS-001"],
                "strategy": "sliding_window",
                "description": "Keep the last 10 entries",
                "rationale": "Bounded context",
                "changes": [
                    {
                        "file": "phases/01-collect.md",
                        "action": "modify",
                        "old_content": "a",
                        "new_content": "b",
                        "diff": "-a\n+b\n",
                    }
                ],
                "risk": "low",
                "estimated_impact": "removes ISS-001",
                "verification_steps": ["re-run context diagnosis"],
            }
        ],
        applied_fixes=[
            {
                "fix_id": "FIX-001",
                "applied_at": "2026-01-14T13:00:00.000Z",
                "success": True,
                "backup_path": "backups/before-FIX-001",
                "verification_result": "pending",
                "rollback_available": True,
            }
        ],
        completed_actions=["action-init"],
        action_history=[
            {
                "action": "action-init",
                "started_at": "2026-01-14T12:59:13.000Z",
                "completed_at": "2026-01-14T12:59:14.000Z",
                "result": "success",
                "output_files": ["backups/software-manual-backup"],
            }
        ],
        errors=[
            {
                "action": "action-diagnose-memory",
                "message": "boom",
                "timestamp": "2026-01-14T12:59:15.000Z",
                "recoverable": True,
            }
        ],
        error_count=1,
        work_dir=".workflow/.scratchpad/skill-tuning-20260114125913",
        backup_dir=".workflow/.scratchpad/skill-tuning-20260114125913/backups",
    )
    return doc


def test_seed_initial_state_template_validates_unchanged() -> None:
    """The seed's Initial State Template, nulls included, is a valid TuningState."""
    doc = TuningState.model_validate(json.loads(SEED_INITIAL_STATE))
    assert doc.status == "pending"
    assert doc.target_skill.name is None
    assert doc.work_dir is None


def test_document_with_every_nested_type_validates() -> None:
    """A document using every nested type of the seed (Issue, Fix, AppliedFix...) validates."""
    doc = TuningState.model_validate(full_document())
    assert doc.proposed_fixes[0].changes[0].action == "modify"
    assert doc.diagnosis.context is not None
    assert doc.diagnosis.context.details.evidence[0].line == 10


def test_ccw_extra_fields_are_accepted() -> None:
    """Fields CCW writes outside its schema (docs diagnosis, gemini_analysis...) are kept."""
    raw = json.loads(SEED_INITIAL_STATE)
    raw["diagnosis"]["docs"] = None
    raw["diagnosis"]["token_consumption"] = None
    raw["gemini_analysis"] = {"status": "completed"}
    raw["final_report"] = None
    raw["requirement_analysis"] = None
    doc = TuningState.model_validate(raw)
    assert doc.model_extra == {
        "gemini_analysis": {"status": "completed"},
        "requirement_analysis": None,
    }


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(("issues_by_severity", "high"), 0, id="count-too-low"),
        pytest.param(("issues_by_severity", "low"), 1, id="count-without-issue"),
    ],
)
def test_severity_counts_must_match_issues(path: tuple[str, str], value: int) -> None:
    """A document whose issues_by_severity disagrees with its issues does not validate."""
    raw = full_document()
    raw[path[0]][path[1]] = value
    with pytest.raises(ValidationError, match="issues_by_severity"):
        TuningState.model_validate(raw)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("status", "paused", id="status-paused"),
        pytest.param("status", "user_exit", id="status-user-exit"),
    ],
)
def test_status_takes_the_control_values(field: str, value: str) -> None:
    """Status also takes paused and user_exit, which the control plane needs."""
    raw = json.loads(SEED_INITIAL_STATE)
    raw[field] = value
    assert TuningState.model_validate(raw).status == value


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        pytest.param(lambda d: d.update(status="stopped"), "status", id="unknown-status"),
        pytest.param(
            lambda d: d["issues"][0].update(type="docs"), "issues.0.type", id="unknown-issue-type"
        ),
        pytest.param(
            lambda d: d["proposed_fixes"][0].update(strategy="magic"),
            "proposed_fixes.0.strategy",
            id="unknown-strategy",
        ),
        pytest.param(
            lambda d: d["issues"][0].update(sevrity="low"), "issues.0.sevrity", id="typo-in-issue"
        ),
        pytest.param(lambda d: d.update(quality_score=101), "quality_score", id="score-above-100"),
    ],
)
def test_invalid_documents_are_rejected(mutate: Any, where: str) -> None:
    """Values outside the seed's enums, typos in nested types and out-of-range scores fail."""
    raw = copy.deepcopy(full_document())
    mutate(raw)
    with pytest.raises(ValidationError) as info:
        TuningState.model_validate(raw)
    assert where in {".".join(map(str, e["loc"])) for e in info.value.errors()}


def test_ccw_rolled_back_verification_result_is_accepted() -> None:
    """CCW's 'rolled_back' verification result is accepted on input."""
    raw = full_document()
    raw["applied_fixes"][0]["verification_result"] = "rolled_back"
    raw["applied_fixes"][0]["rollback_available"] = False
    doc = TuningState.model_validate(raw)
    assert doc.applied_fixes[0].verification_result == "rolled_back"
