"""Documents are written byte for byte as ``json.dumps`` with an indent writes them, floats
excepted: they are written as JavaScript writes them."""

from __future__ import annotations

import enum
import json
import math
import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm.base.jsonrender import dumps_indented, integral_numbers, js_number

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
    """The text of json.dumps, but for the spelling of floats (the same numbers)."""
    written = dumps_indented(data, indent)
    floats: list[float] = []
    expected = _dumps(_marked(data, floats), indent)
    for number, value in enumerate(floats):
        expected = expected.replace(f'"@float{number}@"', js_number(value), 1)
    assert written == expected
    # ints read back as the floats they were written for (as JavaScript reads them)
    assert json.loads(written, parse_int=float) == json.loads(_dumps(data, 2), parse_int=float)


def _marked(value: Any, floats: list[float]) -> Any:
    """``value`` with each float replaced by a text naming it (its place in ``floats``)."""
    if type(value) is float:
        floats.append(value)
        return f"@float{len(floats) - 1}@"
    if type(value) is dict:
        return {key: _marked(item, floats) for key, item in value.items()}
    if type(value) is list:
        return [_marked(item, floats) for item in value]
    return value


JS_NUMBERS = [
    (0.0, "0"),
    (-0.0, "0"),
    (85.0, "85"),
    (100.0, "100"),
    (0.1, "0.1"),
    (95.5, "95.5"),
    (123.456, "123.456"),
    (1e16, "10000000000000000"),
    (1.5e20, "150000000000000000000"),
    (1e21, "1e+21"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.0001, "0.0001"),
    (1.5e-5, "0.000015"),
    (1e-6, "0.000001"),
    (1.5e-7, "1.5e-7"),
    (5e-324, "5e-324"),
    (-2.5e-8, "-2.5e-8"),
    (-1.5e-5, "-0.000015"),
]
"""Floats and what ``JSON.stringify`` writes for them (node 20)."""


@pytest.mark.parametrize(("number", "text"), JS_NUMBERS, ids=[t for _, t in JS_NUMBERS])
def test_floats_are_written_as_javascript_writes_them(number: float, text: str) -> None:
    """A document fsm shares with a JavaScript program is written in that program's spelling:
    0.0 as 0 (JSON does not tell them apart), and its rewrite changes nothing fsm wrote."""
    assert js_number(number) == text
    assert dumps_indented({"n": [number]}, 2) == '{\n  "n": [\n    ' + text + "\n  ]\n}"
    assert float(text) == number


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_floats_are_spelt_as_node_spells_them() -> None:
    """The table above, and a spread of floats, checked against node itself."""
    numbers = [n for n, _ in JS_NUMBERS] + [1.1 * 10.0**power for power in range(-12, 25)]
    script = "console.log(JSON.stringify(JSON.parse(require('fs').readFileSync(0, 'utf8'))))"
    done = subprocess.run(
        ["node", "-e", script], input=json.dumps(numbers).encode(), capture_output=True, check=True
    )
    assert done.stdout.decode().strip() == "[" + ",".join(map(js_number, numbers)) + "]"


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
    assert dumps_indented(data, 2) == _dumps(integral_numbers(data), 2)


@pytest.mark.parametrize("number", [math.nan, math.inf])
def test_numbers_json_refuses_are_refused_alike(number: float) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps_indented({"a": [number]}, 2)


def test_data_referring_to_itself_is_refused_alike() -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(looped, 2)
