"""Rendering a document as indented JSON: the text ``json.dumps`` writes, in less time.

With an indent, ``json.dumps`` leaves its C encoder for a Python one that yields every
bracket, comma and indentation as a piece of its own; a step writes its document each time,
so that was most of the rendering of a persisted step. :func:`dumps_indented` writes the same
text (``ensure_ascii=False``, ``allow_nan=False``, the separators ``json`` uses with an indent)
for plain JSON data: dicts with string keys, lists, strings, ints, finite floats, booleans and
None, of those exact types. Anything else (a subclass, a tuple, a key that is not a string, NaN,
data nested past the recursion limit or referring to itself) is handed to ``json.dumps``, whose
text, or error, is what it always was.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import Any

__all__ = ["dumps_indented", "render_document"]


def render_document(data: Any, indent: int) -> str:
    """The text a document is written as: JSON indented by ``indent`` (0: one line), with a
    newline (ValueError when it is not strict JSON)."""
    if indent:
        return dumps_indented(data, indent) + "\n"
    return json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"


class _NotPlain(Exception):
    """The data holds something only ``json.dumps`` knows how to write (or to refuse)."""


def dumps_indented(data: Any, indent: int) -> str:
    """``json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)``."""
    out: list[str] = []
    try:
        _write(data, "\n", " " * indent, out)
    except (_NotPlain, RecursionError):
        return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
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
        out.append(float.__repr__(value))
    else:
        raise _NotPlain
