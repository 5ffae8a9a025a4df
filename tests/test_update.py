"""Dotted-path updates that never mutate their input, external-field merging, canonical hashes."""

from __future__ import annotations

import copy
import pickle
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from fsm.base.update import (
    MISSING,
    apply_update,
    canonical_hash,
    get_path,
    keep_external,
    to_json_value,
)


def _document() -> dict[str, Any]:
    return {
        "status": "running",
        "count": 1,
        "skill_state": {"current_action": "develop", "errors": [{"message": "x"}]},
        "context": {"limits": {"max_errors": 3}, "tags": ["a", "b"]},
        "title": "first",
    }


class _Point(BaseModel):
    x: int
    when: datetime


def test_apply_update_never_mutates_its_inputs() -> None:
    """Neither the document (at any depth) nor the update changes, whatever the update does."""
    doc = _document()
    update: dict[str, Any] = {
        "count": 2,
        "skill_state.current_action": "validate",
        "skill_state.errors": [],
        "context.limits.max_errors": MISSING,
        "context.tags": ["c"],
        "new.deep.path": {"k": [1]},
        "title": MISSING,
    }
    doc_before = copy.deepcopy(doc)
    update_before = copy.deepcopy(update)
    result = apply_update(doc, update)
    assert doc == doc_before
    assert update == update_before
    assert result == {
        "status": "running",
        "count": 2,
        "skill_state": {"current_action": "validate", "errors": []},
        "context": {"limits": {}, "tags": ["c"]},
        "new": {"deep": {"path": {"k": [1]}}},
    }


def test_changing_the_result_leaves_the_update_values_alone() -> None:
    """Values from the update are copied into the result, not shared with the caller."""
    value = {"k": [1]}
    result = apply_update({}, {"a": value})
    result["a"]["k"].append(2)
    assert value == {"k": [1]}


@pytest.mark.parametrize(
    ("doc", "update", "expected"),
    [
        pytest.param({}, {"a.b.c": 1}, {"a": {"b": {"c": 1}}}, id="missing-parents"),
        pytest.param({"a": None}, {"a.b": 1}, {"a": {"b": 1}}, id="null-parent"),
        pytest.param(
            {"a": {"x": 1}}, {"a.b.c": 2}, {"a": {"x": 1, "b": {"c": 2}}}, id="partly-existing"
        ),
        pytest.param({"a": 1}, {"a": None}, {"a": None}, id="set-to-null"),
    ],
)
def test_apply_update_creates_missing_intermediate_objects(
    doc: dict[str, Any], update: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Objects on the way to a path are created when missing or null; siblings are kept."""
    assert apply_update(doc, update) == expected


def test_missing_survives_copying_and_pickling() -> None:
    """A copied or unpickled update still deletes: MISSING stays the one sentinel."""
    update = {"title": MISSING}
    for copied in (copy.copy(update), copy.deepcopy(update), pickle.loads(pickle.dumps(update))):
        assert copied["title"] is MISSING
        assert "title" not in apply_update(_document(), copied)


@pytest.mark.parametrize(
    ("doc", "path", "expected"),
    [
        pytest.param({"a": 1, "b": 2}, "a", {"b": 2}, id="top-level"),
        pytest.param({"a": {"b": 1, "c": 2}}, "a.b", {"a": {"c": 2}}, id="nested"),
        pytest.param({"a": 1}, "zzz", {"a": 1}, id="absent-key"),
        pytest.param({"a": 1}, "x.y.z", {"a": 1}, id="absent-parents-not-created"),
    ],
)
def test_missing_deletes(doc: dict[str, Any], path: str, expected: dict[str, Any]) -> None:
    """MISSING as a value deletes the key; deleting what is not there changes nothing."""
    assert apply_update(doc, {path: MISSING}) == expected


def test_update_values_become_json() -> None:
    """Pydantic models and other values are stored as JSON data."""
    moment = datetime(2026, 1, 22, 10, 0, tzinfo=UTC)
    result = apply_update({}, {"p": _Point(x=1, when=moment), "t": (1, 2), "d": moment})
    assert result == {
        "p": {"x": 1, "when": "2026-01-22T10:00:00Z"},
        "t": [1, 2],
        "d": "2026-01-22T10:00:00Z",
    }
    assert to_json_value("s") == "s"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("count", 1),
        ("skill_state.current_action", "develop"),
        ("context.limits", {"max_errors": 3}),
        ("nowhere", MISSING),
        ("count.deeper", MISSING),
        ("context.tags.0", MISSING),
    ],
)
def test_get_path(path: str, expected: Any) -> None:
    """Dotted paths read nested objects; anything absent or not an object on the way is MISSING."""
    assert get_path(_document(), path) == expected


def test_keep_external_merges_their_changes_into_ours() -> None:
    """Their changed external paths win; our other changes stay; keys only they added are kept."""
    base = _document()
    ours = apply_update(base, {"count": 2, "context.limits.max_errors": 5, "status": "done"})
    theirs = apply_update(
        base,
        {
            "title": "renamed",
            "context.limits.max_errors": 9,
            "status": "paused",
            "note": "added by the dashboard",
        },
    )
    snapshots = [copy.deepcopy(d) for d in (ours, base, theirs)]
    merged = keep_external(
        ours,
        base,
        theirs,
        ["title", "context.limits.max_errors", "absent.x"],
        known={"count", "status", "context", "title"},
    )
    assert merged == {
        **ours,
        "title": "renamed",
        "context": {"limits": {"max_errors": 9}, "tags": ["a", "b"]},
        "note": "added by the dashboard",
    }
    assert merged["status"] == "done"
    assert [ours, base, theirs] == snapshots


def test_keep_external_keeps_what_they_do_to_keys_the_model_does_not_know() -> None:
    """A key another program added earlier (so base has it) and now changes or removes keeps
    their change; a key of the document model is fsm's and keeps ours."""
    base = {"count": 1, "note": "v1", "gone": 1, "mine": 1}
    ours = {"count": 2, "note": "v1", "gone": 1, "mine": 2}
    theirs = {"count": 1, "note": "v2", "mine": 3, "fresh": True}
    merged = keep_external(ours, base, theirs, [], known={"count", "mine"})
    assert merged == {"count": 2, "note": "v2", "mine": 2, "fresh": True}


def test_keep_external_keeps_our_change_when_theirs_is_unchanged() -> None:
    """An external path they did not touch keeps the value our step gave it."""
    base = _document()
    ours = apply_update(base, {"title": "ours"})
    assert keep_external(ours, base, base, ["title"]) == ours


def test_keep_external_applies_their_deletion() -> None:
    """An external path they deleted is deleted from ours too."""
    base = _document()
    theirs = apply_update(base, {"title": MISSING})
    assert "title" not in keep_external(base, base, theirs, ["title"])


def test_keep_external_does_not_resurrect_keys_we_deleted() -> None:
    """A top-level key our step removed is not brought back because theirs still has it."""
    base = _document()
    ours = apply_update(base, {"title": MISSING})
    assert keep_external(ours, base, base, []) == ours


def test_keep_external_without_changes_returns_an_equal_copy() -> None:
    """With nothing to merge, the result equals ours and is a new object."""
    ours = _document()
    merged = keep_external(ours, ours, ours, ["title"])
    assert merged == ours
    assert merged is not ours


def test_canonical_hash_is_independent_of_key_order() -> None:
    """Documents equal as JSON hash the same, whatever order their keys (at any depth) are in."""
    one = {"a": 1, "b": {"x": [1, 2], "y": "é"}}
    two = {"b": {"y": "é", "x": [1, 2]}, "a": 1}
    assert canonical_hash(one) == canonical_hash(two)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", canonical_hash(one))


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"a": 2, "b": {"x": [1, 2], "y": "é"}}, id="value"),
        pytest.param({"a": 1, "b": {"x": [2, 1], "y": "é"}}, id="list-order"),
        pytest.param({"a": 1, "b": {"x": [1, 2], "y": "é", "z": None}}, id="extra-null"),
    ],
)
def test_canonical_hash_differs_for_different_documents(other: dict[str, Any]) -> None:
    """Any change in content (list order included) changes the hash."""
    assert canonical_hash({"a": 1, "b": {"x": [1, 2], "y": "é"}}) != canonical_hash(other)
