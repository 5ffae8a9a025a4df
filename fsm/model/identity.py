"""Which definition of a machine an instance runs under: its identity, and where history keeps it.

A definition is known by three things:

* ``version``: the ``version:`` of its machine file, the author's promise of compatibility
  (instances of another version need a declared migration, :mod:`fsm.model.migrations`);
* ``graph``: 16 hex digits of the SHA-256 of the canonical definition (every key as parsed,
  defaults included, keys sorted, transitions in the order written) without what only explains
  it (descriptions, ``unbounded`` reasons), its version and its migrations. Editing a
  description or a comment keeps it; renaming a state, reordering transitions or changing a
  guard list changes it;
* ``code``: 16 hex digits of the SHA-256 of the machine module's Python files (their syntax
  trees without docstrings, so comments and docstrings do not count). Recorded for information
  only: a guard's body may change without changing what an instance can run, and a run never
  refuses on it.

The ``create`` record of every instance carries them under :data:`DEFINITION`; so does a
``migrate`` record, and the first step record under another graph of the same version. The
identity an instance runs under is the newest such record's (:func:`recorded_identity`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base import cache
from fsm.model.records import DEFINITION, version_named

if TYPE_CHECKING:
    from fsm.model.definition import MachineSpec
    from fsm.model.records import Record

__all__ = [
    "DEFINITION",
    "Identity",
    "code_digest",
    "graph_digest",
    "recorded_identity",
    "same_version",
    "version_named",
]


_EXPLAINING = frozenset({"description", "unbounded"})
"""Keys that explain a definition and change nothing it does."""


@dataclass(frozen=True)
class Identity:
    """A definition's version, graph digest and code digest (``code`` None: unknown)."""

    version: int | str
    graph: str
    code: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The object records keep under :data:`DEFINITION`."""
        out: dict[str, Any] = {"version": self.version, "graph": self.graph}
        if self.code is not None:
            out["code"] = self.code
        return out

    @classmethod
    def from_json(cls, value: Any) -> Identity | None:
        """The identity a record kept (None when the value is not one)."""
        if not isinstance(value, Mapping):
            return None
        version, graph, code = value.get("version"), value.get("graph"), value.get("code")
        if not isinstance(version, int | str) or isinstance(version, bool):
            return None
        if not isinstance(graph, str):
            return None
        return cls(version, graph, code if isinstance(code, str) else None)

    def label(self, machine: str) -> str:
        """``ccw-loop 1 (graph 3f2a91c0)``."""
        return f"{machine} {self.version} (graph {self.graph[:8]})"


def same_version(one: int | str, other: int | str) -> bool:
    """Whether two ``version:`` values are the same version (``1`` and ``"1"`` are)."""
    return str(one) == str(other)


def graph_digest(spec: MachineSpec) -> str:
    """The graph digest of a parsed definition (see the module docstring)."""
    data = spec.model_dump(mode="json", by_alias=True)
    for key in ("version", "migrations", "description"):
        data.pop(key, None)
    canonical = json.dumps(_without_explanations(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _without_explanations(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_explanations(v) for k, v in value.items() if k not in _EXPLAINING}
    if isinstance(value, list):
        return [_without_explanations(v) for v in value]
    return value


def code_digest(module: str, machine_file: Path) -> str | None:
    """The code digest of a machine's module (None when its files cannot be found or read).

    The files are the ``.py`` files of the module's folder: a machine's module usually imports
    the modules beside it (its models, its rules).
    """
    folder = _module_folder(module, machine_file)
    if folder is None:
        return None
    return _folder_digest(folder)


def _module_folder(module: str, machine_file: Path) -> Path | None:
    if module.endswith(".py"):
        return (machine_file.parent / module).resolve().parent
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if found is None or found.origin is None:
        return None
    return Path(found.origin).parent


@functools.cache
def _folder_digest(folder: Path) -> str | None:
    # Parsing a machine's modules costs ~150 ms (ccw-loop): the digest of the same bytes is
    # read back from the cache (fsm.base.cache).
    try:
        sources = [(file.name, file.read_bytes()) for file in sorted(folder.glob("*.py"))]
    except OSError:
        return None
    key = cache.digest("code-digest-1", *(part for pair in sources for part in pair))
    known = cache.read("code-digests", key)
    if known is not None:
        return known.decode("ascii", "replace")
    digest = hashlib.sha256()
    try:
        for name, source in sources:
            tree = ast.parse(source, name)
            digest.update(name.encode() + b"\0")
            digest.update(ast.dump(_without_docstrings(tree)).encode())
    except (SyntaxError, ValueError):
        return None
    found = digest.hexdigest()[:16]
    cache.write("code-digests", key, found.encode("ascii"))
    return found


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


def recorded_identity(records_backwards: Iterable[Record]) -> Identity | None:
    """The identity the newest record carrying one names (records newest first); None when no
    record does (an instance created before records said which definition)."""
    for record in records_backwards:
        extra = record.extra
        if extra and DEFINITION in extra:
            found = Identity.from_json(extra[DEFINITION])
            if found is not None:
                return found
    return None
