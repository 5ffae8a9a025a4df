"""Updates to JSON documents by dotted path, without mutating the original.

A document is plain JSON data (dicts, lists, strings, numbers, booleans, None). An update maps
dotted paths to new values; applying it copies only the dicts on the way to each path, so the
original and every earlier version stay intact (the seeds' "immutable update" rule) at a cost
proportional to the depth of the paths, not the size of the document.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Container, Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from fsm.base.jsonrender import integral_numbers

__all__ = [
    "MISSING",
    "apply_update",
    "bytes_hash",
    "canonical_hash",
    "canonical_hashes",
    "get_path",
    "keep_external",
    "to_json_value",
]


class _Missing:
    """The type of :data:`MISSING`; copies and pickles stay the one instance ``is`` compares to."""

    def __repr__(self) -> str:
        return "MISSING"

    def __copy__(self) -> _Missing:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Missing:
        return self

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Marks a path that does not exist in a document; as an update value it deletes the key."""


def to_json_value(value: Any) -> Any:
    """Turn an update value into JSON data (pydantic models are dumped whole, by alias)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return to_jsonable_python(value)


def get_path(doc: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` of ``doc``, or :data:`MISSING`."""
    current: Any = doc
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return MISSING
        current = current[part]
    return current


def apply_update(doc: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``doc`` with every dotted path of ``update`` set (MISSING deletes).

    Missing intermediate objects (or ``null`` ones) are created as empty objects.
    """
    result = dict(doc)
    for path, value in update.items():
        if value is MISSING and get_path(result, path) is MISSING:
            continue  # deleting what is not there must not create its parents
        parts = path.split(".")
        container = result
        for part in parts[:-1]:
            child = container.get(part)
            child = dict(child) if isinstance(child, Mapping) else {}
            container[part] = child
            container = child
        if value is MISSING:
            container.pop(parts[-1], None)
        else:
            container[parts[-1]] = to_json_value(value)
    return result


def keep_external(
    ours: Mapping[str, Any],
    base: Mapping[str, Any],
    theirs: Mapping[str, Any],
    paths: Iterable[str],
    known: Container[str] = (),
) -> dict[str, Any]:
    """Merge another writer's changes into ``ours``.

    ``base`` is the document the step started from and ``theirs`` the one found on disk at commit
    time. For each of ``paths`` that ``theirs`` changed relative to ``base``, their value wins.
    Top-level keys that are not ``known`` (fields of the document model) belong to other
    programs: whatever ``theirs`` did to one since ``base`` (added, changed, removed) is kept.
    """
    update: dict[str, Any] = {}
    for path in paths:
        their_value = get_path(theirs, path)
        if their_value != get_path(base, path):
            update[path] = their_value
    for key in theirs.keys() | base.keys():
        if key in known or key in update:
            continue
        their_value = theirs.get(key, MISSING)
        if their_value != base.get(key, MISSING):
            update[key] = their_value
    return apply_update(ours, update) if update else dict(ours)


def bytes_hash(raw: bytes) -> str:
    """SHA-256 of the bytes of a document as written, as ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""What ``json.dumps`` with these options would build on every call (a hash per step)."""


def canonical_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the document's canonical JSON (sorted keys, no spaces, a float without a
    fraction written as the integer it equals: JSON cannot tell ``0`` from ``0.0``, and a
    program that reads the document with JavaScript writes it back as ``0``), as
    ``sha256:<hex>``."""
    return canonical_hashes(doc)[0]


def canonical_hashes(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """:func:`canonical_hash`, then, when the document holds a float without a fraction, the
    hash of its canonical JSON with that float as Python writes it (``0.0``): what records
    written before numbers were made canonical hold."""
    data = _CANONICAL.encode(doc)
    first = "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()
    # Such a float is written with ".0" or, from 1e16 on, "e+" (a text may hold either too:
    # then the document is only encoded again).
    if ".0" not in data and "e+" not in data:
        return (first,)
    whole = _CANONICAL.encode(integral_numbers(doc))
    if whole == data:
        return (first,)
    return "sha256:" + hashlib.sha256(whole.encode("utf-8")).hexdigest(), first
