"""Documents are written byte for byte as ``json.dumps`` with an indent writes them."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm.base.jsonrender import dumps_indented

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


def _dumps(data: Any, indent: int) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)


@given(_json, st.sampled_from([1, 2, 4]))
def test_same_text_as_json_dumps(data: Any, indent: int) -> None:
    assert dumps_indented(data, indent) == _dumps(data, indent)


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


@pytest.mark.parametrize(
    "data",
    [
        {"tuple": (1, 2)},
        {1: "int key", "b": [True, None]},
        {"enum": Colour.RED, "text": Name("x")},
        {"nested": [{"a": {}}, [], [[]], -0.0, 1e300, "\u2028 \x00 \ud800"]},
    ],
)
def test_what_is_not_plain_json_is_written_by_json(data: Any) -> None:
    assert dumps_indented(data, 2) == _dumps(data, 2)


@pytest.mark.parametrize("number", [math.nan, math.inf])
def test_numbers_json_refuses_are_refused_alike(number: float) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_indented({"a": [number]}, 2)


def test_data_referring_to_itself_is_refused_alike() -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(looped, 2)
