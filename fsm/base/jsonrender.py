"""Rendering a document as indented JSON: the text ``json.dumps`` writes, in less time.

With an indent, ``json.dumps`` leaves its C encoder for a Python one that yields every
bracket, comma and indentation as a piece of its own; a step writes its document each time,
so that was most of the rendering of a persisted step. :func:`dumps_indented` writes the same
text (``ensure_ascii=False``, ``allow_nan=False``, the separators ``json`` uses with an indent)
for plain JSON data: dicts with string keys, lists, strings, ints, finite floats, booleans and
None, of those exact types. Anything else (a subclass, a tuple, a key that is not a string, NaN,
data nested past the recursion limit or referring to itself) is handed to ``json.dumps``, whose
text, or error, is what it always was.

One difference, on purpose: numbers are written as JavaScript's ``JSON.stringify`` writes them
(:func:`js_number`; ``0`` for ``0.0``), the spelling of the programs fsm shares documents with.
JSON does not tell ``0`` from ``0.0``; a dashboard that rewrites the document must not seem to
have changed it.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import Any

__all__ = ["dumps_indented", "integral_numbers", "js_number", "render_document"]


def render_document(data: Any, indent: int) -> str:
    """The text a document is written as: JSON indented by ``indent`` (0: one line), with a
    newline (ValueError when it is not strict JSON). Numbers are written as JavaScript writes
    them (:func:`js_number`): a document fsm shares with a program that reads and writes it
    with ``JSON.parse`` and ``JSON.stringify`` (the CCW dashboard) reads back in the same
    spelling, so its rewrite changes only what it meant to change. On one line (``indent``
    0) only floats without a fraction are so written."""
    if indent:
        return dumps_indented(data, indent) + "\n"
    return json.dumps(_integral(data), ensure_ascii=False, allow_nan=False) + "\n"


class _NotPlain(Exception):
    """The data holds something only ``json.dumps`` knows how to write (or to refuse)."""


def dumps_indented(data: Any, indent: int) -> str:
    """``json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)``, but floats
    written as JavaScript writes them (:func:`js_number`)."""
    out: list[str] = []
    try:
        _write(data, "\n", " " * indent, out)
    except (_NotPlain, RecursionError):
        return json.dumps(_integral(data), indent=indent, ensure_ascii=False, allow_nan=False)
    return "".join(out)


def _write(value: Any, newline: str, step: str, out: list[str]) -> None:
    """Append the text of ``value``, whose first line is indented by ``newline``'s spaces."""
    kind = type(value)
    if kind is str:
        out.append(encode_basestring(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        inner = newline + step
        separator = "," + inner
        opening = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out.append(opening)
            opening = separator
            out.append(encode_basestring(key) + ": ")
            _write(item, inner, step, out)
        out.append(newline + "}")
    elif kind is list:
        if not value:
            out.append("[]")
            return
        inner = newline + step
        separator = "," + inner
        opening = "[" + inner
        for item in value:
            out.append(opening)
            opening = separator
            _write(item, inner, step, out)
        out.append(newline + "]")
    elif kind is int:
        out.append(int.__repr__(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is float and math.isfinite(value):
        out.append(js_number(value))
    else:
        raise _NotPlain


def js_number(value: float) -> str:
    """The text JavaScript's ``JSON.stringify`` writes for the finite float ``value``: the same
    shortest digits as Python's ``repr``, but a float without a fraction as an integer (``0``,
    not ``0.0``; zeros after the digits from 1e16 on) below 1e21, and fixed notation from 1e-6
    on (``0.000015``, not ``1.5e-05``)."""
    if not value:
        return "0"
    text = float.__repr__(value)
    if "e" not in text:
        return text[:-2] if text.endswith(".0") else text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if power >= 21 or power < -6:
        return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    if power > 0:  # from 1e16 on: Python's exponent form, the shortest digits then zeros
        return sign + digits + "0" * (power + 1 - len(digits))
    return f"{sign}0.{'0' * (-power - 1)}{digits}"  # below 1e-4: Python's exponent form


def _integral(data: Any) -> Any:
    """:func:`integral_numbers` of ``data``, or ``data`` when it nests too deep or refers to
    itself (``json.dumps`` then says so)."""
    try:
        return integral_numbers(data)
    except RecursionError:
        return data


def integral_numbers(value: Any) -> Any:
    """``value`` with every float that has no fraction turned into the int it equals, below
    1e21 as :func:`js_number` writes it (shared where nothing changed)."""
    kind = type(value)
    if kind is float:
        if not value.is_integer() or not -1e21 < value < 1e21:
            return value
        # From 1e16 on, the integer a reader gets back from the text (shortest digits, then
        # zeros), not the float's exact value: both read back as this float.
        return int(value) if -1e16 < value < 1e16 else int(js_number(value))
    if kind is dict:
        changed = {key: integral_numbers(item) for key, item in value.items()}
        same = all(changed[key] is item for key, item in value.items())
        return value if same else changed
    if kind is list:
        items = [integral_numbers(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
