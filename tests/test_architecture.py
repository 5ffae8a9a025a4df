"""How fsm's modules depend on each other: layers that import only the layers below them, no
import circle anywhere, a public surface of small facades, and everything above the store
interface reaching documents and journals only through it.

The layers, bottom to top, are the table :data:`LAYERS`; docs/architecture.md draws them
(``scripts/architecture.py`` writes the picture from these same imports)."""

from __future__ import annotations

import ast
import html
import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import fsm

ROOT = Path(fsm.__file__).parent


def _load_architecture() -> ModuleType:
    """scripts/architecture.py, where the layer table is written once."""
    path = ROOT.parent / "scripts" / "architecture.py"
    spec = importlib.util.spec_from_file_location("fsm_architecture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


architecture = _load_architecture()
LAYERS = architecture.LAYERS
EXCEPTIONS = architecture.EXCEPTIONS
PUBLIC = architecture.PUBLIC
MODULES = architecture.MODULES
imports_of = architecture.imports_of
layer_of = architecture.layer_of
FILE_STORE = {
    "fsm.store.file_store",
    "fsm.store.file_swap",
    "fsm.store.file_repair",
    "fsm.store.file_watch",
}
"""The file store's modules."""
ABOVE_THE_STORE = [
    "fsm.engine.transaction",
    "fsm.engine.rules",
    "fsm.engine.instance",
    "fsm.engine.engine",
    "fsm.engine.control",
    "fsm.engine.recovery",
    "fsm.view.inspect",
    "fsm.view.listing",
    "fsm.view.listing_index",
    "fsm.cli.fleet",
    "fsm.serve.views",
    "fsm.serve.watch",
    "fsm.cli.commands",
]
"""Modules that use a store only through fsm.store.protocol's protocol."""


def layer_violations(module: str) -> list[str]:
    """What ``module`` imports against the layer order (a layer above its own, or the surface
    from inside a layer), less the written-down exceptions."""
    own = layer_of(module)
    if own is None:
        return []
    found = []
    for other in sorted(imports_of(module)):
        layer = layer_of(other)
        if (layer is None or layer > own) and (module, other) not in EXCEPTIONS:
            found.append(other)
    return found


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
        return real(module) | ({"fsm.engine.instance"} if module == "fsm.store.protocol" else set())

    monkeypatch.setattr(sys.modules[__name__], "imports_of", with_a_circle)
    circles = import_circles()
    assert any({"fsm.store.protocol", "fsm.engine.instance"} <= set(group) for group in circles)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) is not None))
def test_a_layer_imports_only_itself_and_the_layers_below(module: str) -> None:
    """A module of a layer imports its own layer and the layers below it, never a layer above
    and never the public surface (whose facades exist for users, not for fsm itself)."""
    assert layer_violations(module) == []


def test_the_layer_check_sees_an_import_upwards(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself fails a module of a low layer that imports a higher one, or a facade."""
    real = imports_of
    extra = {"fsm.model.records": {"fsm.engine.engine"}, "fsm.base.files": {"fsm.errors"}}

    def with_upward_imports(module: str) -> set[str]:
        return real(module) | extra.get(module, set())

    monkeypatch.setattr(sys.modules[__name__], "imports_of", with_upward_imports)
    assert layer_violations("fsm.model.records") == ["fsm.engine.engine"]
    assert layer_violations("fsm.base.files") == ["fsm.errors"]


def test_every_exception_to_the_layers_is_needed_and_says_why() -> None:
    """Each import allowed against the layer order still exists and has a reason."""
    for (module, other), reason in EXCEPTIONS.items():
        assert other in imports_of(module), (module, other)
        assert layer_of(other) is None or layer_of(other) > layer_of(module)  # type: ignore[operator]
        assert len(reason.split()) >= 5, (module, other)


def test_the_surface_is_small_facades() -> None:
    """The top-level modules only re-export names of the layers (a docstring, imports and
    ``__all__``; the package adds its lazy ``__getattr__``): a reader finds every line of code
    in the folder of its layer."""
    for name, path in MODULES.items():
        if name.count(".") != 1 or name.startswith("fsm.testing") or name in {"fsm.__main__"}:
            continue
        if layer_of(name) is not None:
            continue
        for node in ast.parse(path.read_text()).body:
            kinds = (ast.Import, ast.ImportFrom, ast.Expr)
            named_all = isinstance(node, ast.Assign) and [
                getattr(t, "id", None) for t in node.targets
            ] == ["__all__"]
            assert isinstance(node, kinds) or named_all, (name, node.lineno)


def _banned_in(folder: Path) -> set[str]:
    """The modules the ruff configuration of ``folder`` bans (TID251)."""
    config = tomllib.loads((folder / "ruff.toml").read_text())
    return set(config["lint"]["flake8-tidy-imports"]["banned-api"])


THIRD_PARTY_BANS = {"transitions", "pygraphviz"}
SURFACE_MODULES = sorted(
    n for n in MODULES if n.count(".") == 1 and layer_of(n) is None and n != "fsm.__main__"
)


@pytest.mark.parametrize(
    "package", [p for _, packages, _ in LAYERS for p in packages if p in MODULES], ids=str
)
def test_ruff_bans_in_each_layer_what_the_layer_may_not_import(package: str) -> None:
    """Each layer's folder has a ruff.toml banning exactly the layers above it and the public
    surface (with the project's own bans): ``ruff check`` refuses an upward import as it is
    written, and this table and the linter say the same thing."""
    own = layer_of(package)
    assert own is not None
    above = {p for _, packages, _ in LAYERS[own + 1 :] for p in packages}
    expected = above | set(SURFACE_MODULES) | {"fsm.testing"} | THIRD_PARTY_BANS
    assert _banned_in(MODULES[package].parent) == expected


@pytest.mark.parametrize("folder", ["machines", "examples"])
def test_ruff_bans_fsm_internals_in_machines_and_examples(folder: str) -> None:
    """Bundled machines and the examples may import fsm's public surface only: their ruff.toml
    bans every layer package."""
    expected = {p for _, packages, _ in LAYERS for p in packages} | THIRD_PARTY_BANS
    assert _banned_in(ROOT.parent / folder) == expected


def test_the_committed_picture_and_ruff_configs_are_current() -> None:
    """docs/architecture.dot and every layer's ruff.toml are what scripts/architecture.py
    writes from today's imports, and docs/architecture.svg draws that DOT file (its boxes and
    arrows): move a module or add an import between layers, and this fails until the script
    is rerun."""
    assert architecture.stale() == [], "stale: run scripts/architecture.py and commit"
    svg = (ROOT.parent / "docs" / "architecture.svg").read_text(encoding="utf-8")
    titles = set(re.findall(r"<title>(.*?)</title>", svg))
    drawn = {html.unescape(title) for title in titles} - {"layers"}
    expected = {name for name, _, _ in LAYERS} | {architecture.SURFACE}
    edges = [*architecture.layer_edges(), *architecture.stacking()]
    expected |= {f"{source}->{target}" for source, target in edges}
    assert drawn == expected, "stale: run scripts/architecture.py and commit"


@pytest.mark.parametrize("module", ABOVE_THE_STORE)
def test_above_the_store_nothing_knows_the_file_store(module: str) -> None:
    """The transaction, the engine, the control plane and every reader (status, history,
    replay, ls, run --all, serve, recover) reach documents and journals through fsm.store.protocol
    only: another store plugs in without touching them."""
    assert not imports_of(module) & FILE_STORE


def test_the_store_interface_imports_no_implementation() -> None:
    """fsm.store.protocol, the protocol, depends on no store and nothing above it."""
    assert imports_of("fsm.store.protocol") <= {
        "fsm.base.jsonio",
        "fsm.base.errors",
        "fsm.store.chain",
        "fsm.store.journal",
        "fsm.model.records",
    }


def _fsm_imports(path: Path) -> set[str]:
    """The fsm modules a file outside fsm imports (``from fsm import X`` counts as ``fsm``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "fsm" or name.startswith("fsm.")}


@pytest.mark.parametrize(
    "path",
    sorted(
        path
        for folder in ("machines", "examples")
        for path in (ROOT.parent / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    ),
    ids=lambda p: str(p.relative_to(ROOT.parent)),
)
def test_machines_and_examples_import_only_the_public_surface(path: Path) -> None:
    """Bundled machines and the examples use what a machine author outside this repository can
    use: the fsm package, its public modules (errors, context, registry, executor, outcome,
    helpers, ...) and fsm.testing, never a layer's module."""
    assert _fsm_imports(path) <= PUBLIC, path
