"""What a step changed: JSON Patches (RFC 6902) between two versions of a document.

Every journal record that leads to a new version of a document says what changed against the
version it replaced (:func:`changes_of`): the operations of a JSON Patch under the record's
``changes`` key, or, when the patch would be larger than :data:`PATCH_LIMIT` bytes, only the
paths it touches (JSON Pointers, RFC 6901) under ``changed``. A record that creates or rebuilds
a whole document (creation, recovery, a crash repair) holds the whole document: one ``add`` at
the root (path ``""``). Applying each record's patch to the version before it rebuilds every
version of the document from the journal (:class:`Rebuilt`), which ``fsm replay`` checks against
the recorded hashes and ``fsm serve`` shows as time travel.

:func:`diff` writes the patch a document's bytes can be rebuilt from, which is stricter than
equal JSON values: ``1`` and ``true`` differ (they are written differently), and so do two
objects with the same members in another order (a document is written in its keys'
order). An object whose members moved is patched by removing and adding the moved members
(members are added at the end, as an ``add`` does in every implementation that keeps insertion
order). ``1`` and ``1.0`` are one number, written alike (:func:`fsm.base.jsonrender.js_number`):
no operation says one became the other. The walk stops at values that are the same object (a
step's result shares everything it did not change with the version it came from), so a step's
diff costs what the step changed, not the size of the document.

Why not a library: ``jsonpatch`` (PyPI, BSD-3-Clause, maintained) makes patches that compare
values as Python does (``1 == 1.0 == True``, key order ignored), which do not rebuild the exact
bytes, and its applier builds an object per operation and copies the document, several times
what a replay of 100,000 records may spend. The tests check these patches against ``jsonpatch``
instead: its applier, an independent RFC 6902 implementation, rebuilds every new version from
them (``tests/test_patch.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_core import to_json

from fsm.base.errors import PatchError
from fsm.model.records import CHANGED, CHANGES

__all__ = [
    "CHANGED",
    "CHANGES",
    "PATCH_LIMIT",
    "PatchError",
    "applied",
    "apply",
    "changes_of",
    "copied",
    "diff",
    "escape",
    "paths_of",
    "pointer",
    "same",
    "split",
    "whole",
]

PATCH_LIMIT = 64 * 1024
"""Bytes of JSON a record's patch may take; above it the record keeps the changed paths only."""

_SCALARS = (str, int, float, bool, type(None))
_PLAIN = frozenset(_SCALARS)
_NUMBERS = frozenset({int, float})
"""An int and a float equal to it are one JSON number: documents are written with such a float
as the integer (:func:`fsm.base.jsonrender.js_number`), and no patch says one became the other."""


def escape(key: str) -> str:
    """A member name as a JSON Pointer token (``~`` and ``/`` escaped)."""
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key


def pointer(parts: Iterable[str | int]) -> str:
    """The JSON Pointer of a path of member names and array indexes (``[]``: ``""``)."""
    return "".join("/" + escape(str(part)) for part in parts)


_SPLIT: dict[str, list[str]] = {}


def split(path: str) -> list[str]:
    """The unescaped tokens of a JSON Pointer (PatchError when it is not one)."""
    tokens = _SPLIT.get(path)
    if tokens is not None:
        return tokens
    if path and not path.startswith("/"):
        raise PatchError(f"'{path}' is not a JSON Pointer (it must start with '/')")
    tokens = [
        token.replace("~1", "/").replace("~0", "~") if "~" in token else token
        for token in path.split("/")[1:]
    ]
    if len(_SPLIT) < 4096:
        _SPLIT[path] = tokens
    return tokens


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The operations that turn ``old`` into exactly ``new`` (see the module docstring)."""
    ops: list[dict[str, Any]] = []
    _diff(old, new, "", ops)
    return ops


def whole(document: Any) -> list[dict[str, Any]]:
    """The patch of a version made from nothing: the whole document added at the root."""
    return [{"op": "add", "path": "", "value": document}]


def changes_of(
    old: Any, new: Any, limit: int = PATCH_LIMIT, *, unjournaled: bool = False
) -> dict[str, Any]:
    """What a record says of a new version: ``{"changes": patch}`` from ``old`` (None: the
    version was made from nothing), or ``{"changed": paths}`` when the patch takes more than
    ``limit`` bytes of JSON. ``unjournaled``: the journal holds no version yet (``old`` was
    written by another program, a dashboard that created the document): the patch starts with
    ``old`` whole, so that every version can be rebuilt from the journal."""
    if old is None:
        ops = whole(new)
    elif unjournaled:
        ops = [*whole(old), *diff(old, new)]
    else:
        ops = diff(old, new)
    if _small(ops, limit):
        return {CHANGES: ops}
    return {CHANGED: paths_of(ops)}


def _small(ops: list[dict[str, Any]], limit: int) -> bool:
    # A step mostly sets a few short values: counted without serialising them.
    size = 0
    for op in ops:
        value = op.get("value")
        if value is not None and not isinstance(value, _SCALARS):
            return len(to_json(ops)) <= limit
        size += len(op["path"]) + (len(value) if type(value) is str else 24) + 32
    return size <= limit or len(to_json(ops)) <= limit


def paths_of(ops: Iterable[Mapping[str, Any]]) -> list[str]:
    """The paths a patch touches, each once, in order."""
    return list(dict.fromkeys(str(op.get("path", "")) for op in ops))


def same(one: Any, other: Any) -> bool:
    """True when two JSON values are written alike: same types (an int and a float equal to
    it are one number, written alike), same members in the same order (``==`` says
    ``1 == True`` and ignores the order of members)."""
    if one is other:
        return True
    kind = type(one)
    if kind is not type(other):
        return kind in _NUMBERS and type(other) in _NUMBERS and one == other
    if kind is dict:
        if len(one) != len(other) or list(one) != list(other):
            return False
        return all(same(value, other[key]) for key, value in one.items())
    if kind is list:
        return len(one) == len(other) and all(map(same, one, other))
    return bool(one == other)


def _diff(old: Any, new: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if old is new:
        return
    kind = type(old)
    if kind is dict and type(new) is dict:
        _diff_object(old, new, path, ops)
    elif kind is list and type(new) is list:
        _diff_array(old, new, path, ops)
    elif old != new or (kind is not type(new) and not (kind in _NUMBERS and type(new) in _NUMBERS)):
        ops.append({"op": "replace", "path": path, "value": new})


def _diff_object(
    old: dict[str, Any], new: dict[str, Any], path: str, ops: list[dict[str, Any]]
) -> None:
    keys = list(new)
    if keys == list(old):  # the usual case: the same members in the same order
        for key in keys:
            value = old[key]
            changed = new[key]
            if value is not changed:
                _diff(value, changed, f"{path}/{escape(key)}", ops)
        return
    # Members stay where they are when they begin ``new`` in ``old``'s order; the others
    # are removed and added again at the end, in ``new``'s order.
    position = {key: index for index, key in enumerate(old)}
    staying = 0
    last = -1
    for key in keys:
        index = position.get(key)
        if index is None or index < last:
            break
        last = index
        staying += 1
    stay = set(keys[:staying])
    for key in old:
        if key not in stay:
            ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
    for key in keys[:staying]:
        _diff(old[key], new[key], f"{path}/{escape(key)}", ops)
    for key in keys[staying:]:
        ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": new[key]})


def _diff_array(old: list[Any], new: list[Any], path: str, ops: list[dict[str, Any]]) -> None:
    common = min(len(old), len(new))
    for index in range(common):
        _diff(old[index], new[index], f"{path}/{index}", ops)
    for index in range(common, len(new)):
        ops.append({"op": "add", "path": f"{path}/{index}", "value": new[index]})
    for index in range(len(old) - 1, common - 1, -1):
        ops.append({"op": "remove", "path": f"{path}/{index}"})


def copied(value: Any) -> Any:
    """A copy of a JSON value that shares no list or object with it."""
    kind = type(value)
    if kind is dict:
        return {key: copied(item) for key, item in value.items()}
    if kind is list:
        return [copied(item) for item in value]
    return value


def apply(document: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """``document`` with the RFC 6902 operations ``ops`` applied (add, remove, replace, move,
    copy, test), changed in place where it can be: give it a document no one else holds (see
    :func:`copied`). Values taken from ``ops`` are copied. PatchError when an operation does not
    apply (a missing member, an index out of range, a failed test, an unknown operation)."""
    return applied(document, ops)[0]


def applied(document: Any, ops: Iterable[Mapping[str, Any]]) -> tuple[Any, bool]:
    """:func:`apply`, and whether the document changed (False when every operation set what
    was there already, written alike: a version equal to the one before has its hash)."""
    changed = False
    for op in ops:
        if type(op) is dict and op.get("op") == "replace" and "value" in op:
            # The usual operation: a member of objects set to a plain value (a step's counts,
            # statuses and stamps), without the general walk.
            value = op["value"]
            tokens = _SPLIT.get(op.get("path"))  # type: ignore[arg-type]
            if tokens and type(value) in _PLAIN:
                parent = document
                for token in tokens[:-1]:
                    parent = parent.get(token) if type(parent) is dict else None
                last = tokens[-1]
                if type(parent) is dict and last in parent:
                    old = parent[last]
                    if type(old) is not type(value) or old != value:
                        parent[last] = value
                        changed = True
                    continue
        if not isinstance(op, Mapping):
            raise PatchError(f"a patch operation must be an object, not {type(op).__name__}")
        name = op.get("op")
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"the '{name}' operation has no path")
        if name in {"replace", "add"}:
            tokens = split(path)
            value = _value(op)
            if name == "replace" or (tokens and type(_parent(document, tokens)) is dict):
                try:
                    if same(_get(document, tokens), value):
                        continue  # already so
                except PatchError:
                    if name == "replace":
                        raise
            changed = True
            if name == "add":
                document = _add(document, tokens, copied(value))
            else:
                document = _set(document, tokens, copied(value))
            continue
        changed = True
        if name == "remove":
            document = _remove(document, split(path))
        elif name in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"the '{name}' operation has no 'from'")
            value = _get(document, split(source))
            if name == "move":
                if path.startswith(source + "/"):
                    raise PatchError(f"cannot move '{source}' into its own member '{path}'")
                document = _remove(document, split(source))
            else:
                value = copied(value)
            document = _add(document, split(path), value)
        elif name == "test":
            if not _equal(_get(document, split(path)), _value(op)):
                raise PatchError(f"test failed at '{path}'")
        else:
            raise PatchError(f"unknown patch operation {name!r}")
    return document, changed


def _equal(one: Any, other: Any) -> bool:
    """Equal as RFC 6902's ``test`` compares: numbers by value, ``true`` is no number."""
    if isinstance(one, bool) or isinstance(other, bool):
        return type(one) is type(other) and one == other
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(_equal(v, other[k]) for k, v in one.items())
    if isinstance(one, list) and isinstance(other, list):
        return len(one) == len(other) and all(map(_equal, one, other))
    if isinstance(one, int | float) and isinstance(other, int | float):
        return one == other
    return type(one) is type(other) and one == other


def _value(op: Mapping[str, Any]) -> Any:
    if "value" not in op:
        raise PatchError(f"the '{op.get('op')}' operation at '{op.get('path')}' has no value")
    return op["value"]


def _get(document: Any, tokens: list[str]) -> Any:
    current = document
    for depth, token in enumerate(tokens):
        if type(current) is dict:
            if token not in current:
                raise PatchError(f"no member '{pointer(tokens[: depth + 1])}'")
            current = current[token]
        elif type(current) is list:
            current = current[_index(current, token, tokens, depth)]
        else:
            raise PatchError(f"'{pointer(tokens[:depth])}' holds no members")
    return current


def _index(array: list[Any], token: str, tokens: list[str], depth: int, end: bool = False) -> int:
    if token == "-" and end:
        return len(array)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"'{pointer(tokens[: depth + 1])}' is not an array index")
    index = int(token)
    if index > len(array) or (index == len(array) and not end):
        raise PatchError(f"'{pointer(tokens[: depth + 1])}' is out of range")
    return index


def _parent(document: Any, tokens: list[str]) -> Any:
    parent = _get(document, tokens[:-1])
    if type(parent) not in (dict, list):
        raise PatchError(f"'{pointer(tokens[:-1])}' holds no members")
    return parent


def _add(document: Any, tokens: list[str], value: Any) -> Any:
    return _put(document, tokens, value, insert=True)


def _set(document: Any, tokens: list[str], value: Any) -> Any:
    return _put(document, tokens, value, insert=False)


def _put(document: Any, tokens: list[str], value: Any, *, insert: bool) -> Any:
    """``value`` at ``tokens``: a member set, or an array element inserted (``add``, where
    ``-`` is the end) or replaced."""
    if not tokens:
        return value
    parent = _parent(document, tokens)
    last = tokens[-1]
    if type(parent) is dict:
        parent[last] = value
    elif insert:
        parent.insert(_index(parent, last, tokens, len(tokens) - 1, end=True), value)
    else:
        parent[_index(parent, last, tokens, len(tokens) - 1)] = value
    return document


def _remove(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(document, tokens)
    last = tokens[-1]
    if type(parent) is dict:
        if last not in parent:
            raise PatchError(f"no member '{pointer(tokens)}'")
        del parent[last]
    else:
        del parent[_index(parent, last, tokens, len(tokens) - 1)]
    return document
