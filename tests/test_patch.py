"""JSON Patches between versions of a document (fsm.model.patch): exact enough to rebuild the bytes,
checked against an independent RFC 6902 implementation (jsonpatch)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.base.jsonrender import render_document
from fsm.model.patch import (
    PATCH_LIMIT,
    PatchError,
    applied,
    apply,
    changes_of,
    diff,
    pointer,
    same,
    split,
)

KEYS = st.sampled_from(["a", "b", "c", "x/y", "t~1", "", "é", "0"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=5),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=20,
)
DOCS = st.dictionaries(KEYS, JSON, max_size=6)


def text(document: Any) -> str:
    """The bytes a document is written as (indent 2), which a rebuild must reproduce."""
    return render_document(document, 2)


@settings(max_examples=400, deadline=None)
@given(DOCS, DOCS)
def test_a_patch_rebuilds_the_exact_text_with_jsonpatch(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    """Applied by jsonpatch (an independent RFC 6902 implementation), the patch from one
    document to another gives the other's exact text: values, types and the order of members."""
    ops = diff(old, new)
    rebuilt = jsonpatch.apply_patch(copy.deepcopy(old), ops)
    assert text(rebuilt) == text(new)


@settings(max_examples=400, deadline=None)
@given(DOCS, DOCS)
def test_fsm_applies_its_patches_as_jsonpatch_does(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    """fsm's own applier gives what jsonpatch gives, and says whether anything changed."""
    ops = diff(old, new)
    mine, changed = applied(copy.deepcopy(old), ops)
    assert text(mine) == text(jsonpatch.apply_patch(copy.deepcopy(old), ops))
    assert changed == (text(old) != text(new))


@pytest.mark.parametrize(
    ("old", "new", "ops"),
    [
        pytest.param({"n": 1}, {"n": 1}, [], id="unchanged"),
        pytest.param({"n": 1}, {"n": 1.0}, [], id="int-to-float"),  # one number, written alike
        pytest.param(
            {"n": 1},
            {"n": True},
            [{"op": "replace", "path": "/n", "value": True}],
            id="int-to-bool",
        ),
        pytest.param(
            {"a": 1}, {"a": 1, "b": 2}, [{"op": "add", "path": "/b", "value": 2}], id="member-added"
        ),
        pytest.param(
            {"a": 1, "b": 2}, {"a": 1}, [{"op": "remove", "path": "/b"}], id="member-removed"
        ),
        pytest.param(
            {"a": 1, "b": 2},
            {"b": 2, "a": 1},
            [{"op": "remove", "path": "/a"}, {"op": "add", "path": "/a", "value": 1}],
            id="members-reordered",
        ),
        pytest.param(
            {"l": [1, 2, 3]},
            {"l": [1, 5]},
            [{"op": "replace", "path": "/l/1", "value": 5}, {"op": "remove", "path": "/l/2"}],
            id="array-shortened",
        ),
        pytest.param(
            {"l": [1]},
            {"l": [1, 2]},
            [{"op": "add", "path": "/l/1", "value": 2}],
            id="array-appended",
        ),
        pytest.param(
            {"a/b": {"c~d": 1}},
            {"a/b": {"c~d": 2}},
            [{"op": "replace", "path": "/a~1b/c~0d", "value": 2}],
            id="escaped-pointer",
        ),
    ],
)
def test_diff_says_exactly_what_changed(old: Any, new: Any, ops: list[dict[str, Any]]) -> None:
    """Each kind of change is one operation at its JSON Pointer (RFC 6901 escapes)."""
    assert diff(old, new) == ops


def test_unchanged_subtrees_are_not_walked() -> None:
    """A subtree shared by both versions (a step's result shares what it did not change) is
    skipped by identity, even when it holds values only a full walk could compare."""

    class Boom(dict[str, Any]):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("walked")

        __hash__ = None  # type: ignore[assignment]

    shared = Boom(big=list(range(10)))
    assert diff({"shared": shared, "n": 1}, {"shared": shared, "n": 2}) == [
        {"op": "replace", "path": "/n", "value": 2}
    ]


def test_a_large_change_keeps_only_its_paths() -> None:
    """Above the limit a record keeps the paths it changed, not the values."""
    big = "x" * (PATCH_LIMIT + 1)
    assert changes_of({"a": 1, "b": ""}, {"a": 2, "b": big}) == {"changed": ["/a", "/b"]}
    assert changes_of({"a": 1}, {"a": 2}) == {
        "changes": [{"op": "replace", "path": "/a", "value": 2}]
    }
    assert changes_of(None, {"a": 1}) == {"changes": [{"op": "add", "path": "", "value": {"a": 1}}]}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        pytest.param(
            [{"op": "replace", "path": "/nope", "value": 1}],
            "no member '/nope'",
            id="missing-member",
        ),
        pytest.param([{"op": "remove", "path": "/l/5"}], "out of range", id="index-out-of-range"),
        pytest.param(
            [{"op": "add", "path": "/l/01", "value": 1}], "not an array index", id="leading-zero"
        ),
        pytest.param([{"op": "test", "path": "/n", "value": 2}], "test failed", id="failed-test"),
        pytest.param(
            [{"op": "frobnicate", "path": "/n"}], "unknown patch operation", id="unknown-op"
        ),
        pytest.param(
            [{"op": "add", "path": "n", "value": 1}], "not a JSON Pointer", id="bad-pointer"
        ),
        pytest.param([{"op": "add", "path": "/n"}], "has no value", id="no-value"),
        pytest.param(["add"], "must be an object", id="not-an-object"),
    ],
)
def test_a_patch_that_does_not_apply_is_refused(ops: list[Any], message: str) -> None:
    """Operations that do not fit the document raise PatchError naming the problem."""
    with pytest.raises(PatchError, match=message):
        apply({"n": 1, "l": [1]}, ops)


def test_move_copy_and_test_follow_rfc_6902() -> None:
    """The operations fsm never writes but a patch may hold apply as the RFC says."""
    ops = [
        {"op": "test", "path": "/n", "value": 1.0},
        {"op": "copy", "from": "/n", "path": "/m"},
        {"op": "move", "from": "/l", "path": "/k"},
        {"op": "add", "path": "/k/-", "value": 2},
    ]
    assert apply({"n": 1, "l": [1]}, ops) == {"n": 1, "m": 1, "k": [1, 2]}


def test_values_taken_from_a_patch_are_copied() -> None:
    """Rebuilding never changes the patch it read (a later operation on an added object)."""
    ops = [
        {"op": "add", "path": "/o", "value": {"a": 1}},
        {"op": "replace", "path": "/o/a", "value": 2},
    ]
    assert apply({}, ops) == {"o": {"a": 2}}
    assert ops[0]["value"] == {"a": 1}


def test_pointers_round_trip() -> None:
    """A path of names and indexes is a JSON Pointer that splits back into it."""
    parts = ["a/b", "c~d", "", "0"]
    assert pointer(parts) == "/a~1b/c~0d//0"
    assert split(pointer(parts)) == parts
    assert split("") == []


def test_same_is_stricter_than_equal() -> None:
    """Values written differently are not the same, though Python says they are equal."""
    assert {"a": 1, "b": 2} == {"b": 2, "a": 1}
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same([1], [True])
    assert same(json.loads('{"a": [1, {"b": null}]}'), {"a": [1, {"b": None}]})
