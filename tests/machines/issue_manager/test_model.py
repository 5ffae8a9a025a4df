"""The state document: the seed's template, its validateState rules, the nested records."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.issue_manager.model import (
    ISSUE_STATUSES,
    IssueManagerDraft,
    IssueManagerState,
    IssueState,
    QueueItem,
    initial_template,
)
from pydantic import ValidationError

SEED_NAME = "003_584647730d4fe622.txt"
"""The seed document the issue-manager's document comes from (not part of this repository)."""

TEMPLATE_TEXT = """{ "status": "pending", "phase": "init", "work_dir": "", "issues": {},
"queue": [], "completed_actions": [], "context": { "total_issues": 0, "completed_count": 0,
"failed_count": 0 }, "errors": [], "created_at": "ISO-8601", "updated_at": "ISO-8601" }"""
"""The seed's initial state, copied verbatim (so the test runs without the seeds folder)."""

ISSUE_EXAMPLE = """{ "id": "ISS-xxx", "title": "Issue title", "status":
"registered|planning|planned|executing|completed|failed", "solution_id": "SOL-xxx-1",
"planned_at": "ISO-8601", "executed_at": "ISO-8601", "error": null }"""

QUEUE_EXAMPLE = """{ "item_id": "S-1", "issue_id": "ISS-xxx", "solution_id": "SOL-xxx-1",
"status": "pending|executing|completed|failed" }"""


def _seed_blocks(seed: Path) -> list[str]:
    return re.findall(r"```json(.*?)```", seed.read_text(encoding="utf-8"), re.DOTALL)


def _saved(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(TEMPLATE_TEXT)
    doc |= {
        "work_dir": ".workflow/.scratchpad/issue-manager-1",
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z",
    }
    return doc | changes


@pytest.mark.skipif(
    not os.environ.get("FSM_SEEDS_DIR"),
    reason="optional provenance check: the copies above are what the suite uses; set "
    "FSM_SEEDS_DIR to a folder of the seed documents to compare them with the originals",
)
def test_embedded_examples_match_the_seed_file() -> None:
    """The copies in this test are the seed's JSON blocks, whitespace aside (run only when
    FSM_SEEDS_DIR names the seeds' folder: no test needs a file outside the repository)."""
    seed = Path(os.environ["FSM_SEEDS_DIR"]) / SEED_NAME
    blocks = [json.loads(b) for b in _seed_blocks(seed)]
    assert blocks == [json.loads(t) for t in (TEMPLATE_TEXT, ISSUE_EXAMPLE, QUEUE_EXAMPLE)]


def test_initial_template_is_the_seed_template() -> None:
    """``initial_template()`` returns exactly the seed's initial state."""
    assert initial_template() == json.loads(TEMPLATE_TEXT)


def test_seed_template_parses_as_a_draft_unchanged() -> None:
    """The seed's template, placeholders and empty work_dir included, is a valid draft."""
    draft = IssueManagerDraft.model_validate_json(TEMPLATE_TEXT)
    assert (draft.status, draft.phase, draft.work_dir, draft.created_at) == (
        "pending",
        "init",
        "",
        "ISO-8601",
    )


def test_seed_template_is_not_a_saveable_document() -> None:
    """validateState rejects the template: its work_dir is empty and its times are placeholders."""
    with pytest.raises(ValidationError) as caught:
        IssueManagerState.model_validate_json(TEMPLATE_TEXT)
    message = str(caught.value)
    assert "Missing: work_dir" in message
    assert "created_at is not an ISO-8601 time: 'ISO-8601'" in message


def test_filled_template_is_saveable() -> None:
    """The template with a work_dir and real times passes validateState."""
    assert IssueManagerState.model_validate(_saved()).work_dir.endswith("issue-manager-1")


def _without(key: str) -> dict[str, Any]:
    doc = _saved()
    del doc[key]
    return doc


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(_without("status"), "status\n  Field required", id="missing-status"),
        pytest.param(_without("phase"), "phase\n  Field required", id="missing-phase"),
        pytest.param(_without("work_dir"), "work_dir\n  Field required", id="missing-work-dir"),
        pytest.param(_saved(work_dir=""), "Missing: work_dir", id="empty-work-dir"),
        pytest.param(_saved(status="done"), "status\n  Input should be", id="invalid-status"),
        pytest.param(_saved(status=""), "status\n  Input should be", id="empty-status"),
        pytest.param(_saved(phase="initialized"), "phase\n  Input should be", id="invalid-phase"),
        pytest.param(
            _saved(issues=[]),
            "issues\n  Input should be a valid dictionary",
            id="issues-not-object",
        ),
        pytest.param(
            _saved(queue={}), "queue\n  Input should be a valid list", id="queue-not-array"
        ),
        pytest.param(
            _saved(issues={"ISS-1": {"id": "ISS-2", "title": "t", "status": "registered"}}),
            "issues['ISS-1'] holds issue 'ISS-2'",
            id="issue-key-mismatch",
        ),
        pytest.param(
            _saved(queue=[{"item_id": "S-1", "issue_id": "ISS-9", "solution_id": "SOL-ISS-9-1"}]),
            "queue item S-1 names unknown issue 'ISS-9'",
            id="queue-unknown-issue",
        ),
        pytest.param(
            _saved(updated_at="yesterday"),
            "updated_at is not an ISO-8601 time",
            id="bad-updated-at",
        ),
    ],
)
def test_validate_state_rules(document: dict[str, Any], expected: str) -> None:
    """Every rule of the seed's validateState (and its consequences) rejects a bad document."""
    with pytest.raises(ValidationError) as caught:
        IssueManagerState.model_validate(document)
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    "status", ["pending", "running", "paused", "stopped", "completed", "failed"]
)
def test_status_enum_is_the_seeds_plus_paused_stopped_and_failed(status: str) -> None:
    """The seed's three statuses validate, and so do the control plane's paused and stopped and
    the failure end, failed."""
    assert IssueManagerState.model_validate(_saved(status=status)).status == status


@pytest.mark.parametrize("status", ISSUE_STATUSES)
def test_seed_issue_example_validates_for_each_status(status: str) -> None:
    """The seed's IssueState example validates with each status of its enum."""
    issue = IssueState.model_validate(json.loads(ISSUE_EXAMPLE) | {"status": status})
    assert (issue.id, issue.solution_id, issue.error) == ("ISS-xxx", "SOL-xxx-1", None)


@pytest.mark.parametrize("status", ["pending", "executing", "completed", "failed"])
def test_seed_queue_item_example_validates_for_each_status(status: str) -> None:
    """The seed's queue item example validates with each status of its enum."""
    item = QueueItem.model_validate(json.loads(QUEUE_EXAMPLE) | {"status": status})
    assert (item.item_id, item.number) == ("S-1", 1)


@pytest.mark.parametrize("item_id", ["S-0", "S-", "Q-1", "S-01", "s-1"])
def test_queue_item_ids_are_s_dash_number(item_id: str) -> None:
    """Queue item ids have the form ``S-n`` with n from 1."""
    with pytest.raises(ValidationError):
        QueueItem(item_id=item_id, issue_id="ISS-1", solution_id="SOL-ISS-1-1")


def test_unknown_fields_are_kept() -> None:
    """Fields other tools wrote (a summary, an issue's labels) survive a round trip."""
    issue = {"id": "ISS-1", "title": "t", "status": "registered", "labels": ["bug"]}
    doc = IssueManagerState.model_validate(_saved(summary={"x": 1}, issues={"ISS-1": issue}))
    dumped = doc.model_dump(mode="json")
    assert dumped["summary"] == {"x": 1}
    assert dumped["issues"]["ISS-1"]["labels"] == ["bug"]


def test_next_item_is_the_first_unfinished_in_queue_order() -> None:
    """The next item is the first pending or interrupted (executing) one, FIFO."""
    issues = {i: {"id": i, "status": "planned"} for i in ("A", "B", "C")}
    queue = [
        {"item_id": "S-1", "issue_id": "A", "solution_id": "SOL-A-1", "status": "completed"},
        {"item_id": "S-2", "issue_id": "B", "solution_id": "SOL-B-1", "status": "executing"},
        {"item_id": "S-3", "issue_id": "C", "solution_id": "SOL-C-1", "status": "pending"},
    ]
    doc = IssueManagerState.model_validate(_saved(issues=issues, queue=queue))
    item = doc.next_item()
    assert item is not None
    assert item.item_id == "S-2"
