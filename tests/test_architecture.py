"""How fsm's modules depend on each other: no import circle anywhere, and everything above the
store interface reaches documents and journals only through it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import fsm

ROOT = Path(fsm.__file__).parent
FILE_STORE = {"fsm.store", "fsm.file_swap", "fsm.file_repair", "fsm.file_watch"}
"""The file store's modules."""
ABOVE_THE_STORE = [
    "fsm.transaction",
    "fsm.rules",
    "fsm.instance",
    "fsm.engine",
    "fsm.control",
    "fsm.recovery",
    "fsm.inspect",
    "fsm.listing",
    "fsm.listing_index",
    "fsm.fleet",
    "fsm.serve.views",
    "fsm.serve.watch",
    "fsm.commands",
]
"""Modules that use a store only through fsm.storage's protocol."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def imports_of(module: str) -> set[str]:
    """The fsm modules ``module`` imports anywhere in its code (inside functions and under
    ``TYPE_CHECKING`` too: a circle of type hints is still a circle of the design). ``from
    fsm import jsonio`` imports ``fsm.jsonio``, not the package."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in MODULES else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in MODULES and name != module}


def import_circles() -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan's algorithm)."""
    graph = {module: imports_of(module) for module in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for module in sorted(graph):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return circles


def test_no_module_of_fsm_is_part_of_an_import_circle() -> None:
    """No group of fsm's modules imports each other: each layer can be read, tested and
    replaced without the ones above it."""
    assert import_circles() == []


def test_the_circle_finder_finds_a_circle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself sees a circle when there is one (a module importing one that imports
    it back)."""
    real = imports_of

    def with_a_circle(module: str) -> set[str]:
        return real(module) | ({"fsm.instance"} if module == "fsm.storage" else set())

    monkeypatch.setattr(sys.modules[__name__], "imports_of", with_a_circle)
    circles = import_circles()
    assert any({"fsm.storage", "fsm.instance"} <= set(group) for group in circles)


@pytest.mark.parametrize("module", ABOVE_THE_STORE)
def test_above_the_store_nothing_knows_the_file_store(module: str) -> None:
    """The transaction, the engine, the control plane and every reader (status, history,
    replay, ls, run --all, serve, recover) reach documents and journals through fsm.storage
    only: another store plugs in without touching them."""
    assert not imports_of(module) & FILE_STORE


def test_the_store_interface_imports_no_implementation() -> None:
    """fsm.storage, the protocol, depends on no store and nothing above it."""
    assert imports_of("fsm.storage") <= {"fsm.jsonio", "fsm.errors", "fsm.journal", "fsm.records"}


@pytest.mark.parametrize(
    "package", [p for p in (ROOT.parent / "machines").iterdir() if (p / "__init__.py").exists()]
)
def test_machines_use_the_public_helpers_not_the_file_store(package: Path) -> None:
    """Bundled machines write their side files through fsm.helpers, never fsm.store or
    fsm.files (which belong to the file store)."""
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        used = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not used & {"fsm.store", "fsm.files"}, path
