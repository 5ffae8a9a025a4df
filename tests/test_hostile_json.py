"""Bounded JSON reading (fsm.base.jsonio): hostile texts are refused with a reason, never a
crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.base.jsonio import MAX_DEPTH, JsonError, _depth_exceeds, loads

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(DEEP, "nested deeper than 100 levels", id="100k-deep-array"),
        pytest.param('{"a":' * 100_000 + "1" + "}" * 100_000, "nested deeper", id="100k-deep-obj"),
        pytest.param("[" * 101 + "]" * 101, "nested deeper than 100 levels", id="101-deep"),
        pytest.param(
            '{"a": [' + '{"b": [' * 60 + "1" + "]}" * 60 + "]}", "nested deeper", id="mixed-121"
        ),
        pytest.param("1" * 5000, "a number too long to read", id="5000-digit-int"),
        pytest.param('{"n": -' + "9" * 4301 + "}", "a number too long", id="4301-digit-int"),
        pytest.param("[NaN]", "NaN is not a JSON number", id="nan"),
        pytest.param('{"x": Infinity}', "Infinity is not a JSON number", id="infinity"),
        pytest.param("-Infinity", "-Infinity is not a JSON number", id="minus-infinity"),
        pytest.param('{"a": ', "Expecting value at line 1 column 7", id="truncated"),
        pytest.param("", "Expecting value at line 1 column 1", id="empty"),
        pytest.param(b'{"a": "\xff"}', "not UTF-8 text (byte 7", id="not-utf8"),
        pytest.param("x" * 17, "larger than the limit of 16 bytes", id="too-large"),
    ],
)
def test_hostile_json_is_refused_with_a_reason(text: str | bytes, reason: str) -> None:
    """Each hostile text raises JsonError (a ValueError) whose one-line message says why."""
    max_bytes = 16 if "limit of 16 " in reason else 16 * 1024 * 1024
    with pytest.raises(JsonError) as caught:
        loads(text, max_bytes=max_bytes)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("[" * 100 + "]" * 100, None, id="exactly-100-deep"),
        pytest.param(json.dumps(["[" * 300, "{" * 300]), ["[" * 300, "{" * 300], id="brackets"),
        pytest.param(json.dumps({"a": '\\"[[[' * 200}), {"a": '\\"[[[' * 200}, id="escaped-quotes"),
        pytest.param(b'\xef\xbb\xbf{"a": 1}', {"a": 1}, id="utf8-bom"),
        pytest.param(json.dumps({"a": ["x"]}).encode("utf-16"), {"a": ["x"]}, id="utf16"),
        pytest.param("9" * 4300, int("9" * 4300), id="4300-digit-int"),
    ],
)
def test_ordinary_json_within_the_limits_reads(text: str | bytes, value: Any) -> None:
    """Text within the limits reads as json.loads would read it, brackets in strings included."""
    result = loads(text)
    if value is not None:
        assert result == value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_tricky_text = st.text(alphabet='[]{}"\\/bfnrtu \n\x1bé', max_size=8)
_values = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(
    value=_values,
    limit=st.integers(min_value=0, max_value=6),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 2]),
)
def test_depth_check_agrees_with_the_nesting(
    value: Any, limit: int, ascii_only: bool, indent: int | None
) -> None:
    """The fast depth check says "too deep" exactly when the value nests deeper than the limit,
    whatever brackets, quotes and escapes its strings hold."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert _depth_exceeds(text.encode("utf-8"), limit) == (_depth(value) > limit)
    assert _depth_exceeds(text, limit) == (_depth(value) > limit)


def test_default_depth_limit_is_100() -> None:
    """The documented limit: 100 levels read, 101 do not."""
    assert MAX_DEPTH == 100
    assert _depth(loads("[" * 100 + "]" * 100)) == 100
    with pytest.raises(JsonError):
        loads("[" * 101 + "]" * 101)
