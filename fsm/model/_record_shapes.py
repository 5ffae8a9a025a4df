"""What :func:`fsm.model.records.parse_record` checks a record kind against, derived once from its
definition, and the per-field diagnosis of a record that fails the check."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from itertools import repeat
from operator import itemgetter
from typing import Any

from fsm.base.errors import JournalRecordError

__all__ = ["ABSENT", "Shape", "fits", "misfit", "shape_of", "unreadable_format"]

_NONE = type(None)
_STR = frozenset({str})
_PICK = itemgetter("transition", "guard", "result")
_DICT = frozenset({dict})
_GUARD_TYPES = frozenset((int, g, r) for g in (str, _NONE) for r in (bool, _NONE))
_WORDS = {str: "text", int: "an integer", float: "a number", bool: "true or false", _NONE: "null"}
_TEXTS = "a list of text"
_GUARDS = "a list of guard results"


class _Absent:
    """What a missing required field reads as: a type no field allows."""


ABSENT = _Absent()


def _texts_fit(value: Any) -> bool:
    return type(value) is list and _STR.issuperset(map(type, value))


def _guards_fit(value: Any) -> bool:
    # C-level passes only (no Python loop over the guards): this runs on every step record.
    try:
        return (
            type(value) is list
            and _DICT.issuperset(map(type, value))
            and _GUARD_TYPES.issuperset(map(tuple, map(map, repeat(type), map(_PICK, value))))
        )
    except KeyError:
        return False


@dataclass(frozen=True)
class Shape:
    """How to check and fill one kind, derived from its definition once."""

    cls: type[Any]
    """The record class (a dataclass of :mod:`fsm.model.records`)."""
    keys: tuple[str, ...]
    """The scalar fields, checked in one pass with :attr:`missing` and :attr:`allowed`."""
    missing: tuple[Any, ...]
    """What each reads as when absent: its default, or a value no type allows (required)."""
    allowed: tuple[frozenset[type], ...]
    lists: tuple[tuple[str, Callable[[Any], bool]], ...]
    known: frozenset[str]
    defaults: dict[str, Any]
    words: dict[str, str]


def _allowed(hint: Any) -> tuple[frozenset[type], str]:
    """The JSON value types a scalar field of type ``hint`` takes, and how to say so."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        found: set[type] = set()
        words = []
        for arg in typing.get_args(hint):
            allowed, word = _allowed(arg)
            found |= allowed
            words.append(word)
        return frozenset(found), " or ".join(words)
    if hint is float:
        return frozenset({int, float}), _WORDS[float]
    return frozenset({_NONE if hint is None else hint}), _WORDS[_NONE if hint is None else hint]


def shape_of(cls: type[Any], no_extra: Any, first_format: int) -> Shape:
    hints = typing.get_type_hints(cls)
    keys: list[str] = []
    missing: list[Any] = []
    allowed: list[frozenset[type]] = []
    lists: list[tuple[str, Callable[[Any], bool]]] = []
    words: dict[str, str] = {}
    defaults: dict[str, Any] = {"format": first_format, "extra": no_extra}
    for f in fields(cls):
        if f.name in ("kind", "extra"):
            continue
        default = f.default
        if default is not MISSING:
            defaults.setdefault(f.name, default)
        hint = hints[f.name]
        if typing.get_origin(hint) is Sequence:
            texts = typing.get_args(hint)[0] is str
            lists.append((f.name, _texts_fit if texts else _guards_fit))
            words[f.name] = _TEXTS if texts else _GUARDS
            continue
        types_, words[f.name] = _allowed(hint)
        keys.append(f.name)
        missing.append(ABSENT if default is MISSING else defaults[f.name])
        allowed.append(types_)
    return Shape(
        cls=cls,
        keys=tuple(keys),
        missing=tuple(missing),
        allowed=tuple(allowed),
        lists=tuple(lists),
        known=frozenset(f.name for f in fields(cls)) - {"extra"},
        defaults=defaults,
        words=words,
    )


def fits(shape: Shape, name: str, value: Any) -> bool:
    for list_name, check in shape.lists:
        if list_name == name:
            return check(value)
    return type(value) in shape.allowed[shape.keys.index(name)]


def misfit(data: dict[str, Any], shape: Shape) -> str:
    """Why ``data`` does not fit its kind: the first field that does not."""
    kind = shape.cls.KIND
    for name, absent in zip(shape.keys, shape.missing, strict=True):
        if absent is ABSENT and name not in data:
            return f"a '{kind}' record needs '{name}'"
    for name, word in shape.words.items():
        if name in data and not fits(shape, name, data[name]):
            shown = json.dumps(data[name], ensure_ascii=False, default=str)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            return f"a '{kind}' record needs '{name}' as {word}, not {shown}"
    return f"a '{kind}' record does not fit its kind"


def unreadable_format(version: Any, line: int, newest: int) -> JournalRecordError:
    """The error of a record in a format this fsm cannot read (a newer one, or nonsense)."""
    if type(version) is int and version > newest:
        return JournalRecordError(
            line,
            f"was written by a newer fsm (journal format {version}; this fsm reads formats 1 to "
            f"{newest}): upgrade fsm to read it",
        )
    shown = json.dumps(version, ensure_ascii=False, default=str)[:40]
    return JournalRecordError(line, f"has no journal format {shown} (formats are 1 to {newest})")
