"""fsm's layers, read from its real imports: the table, the import graph, and what is made of it.

The layer table (:data:`LAYERS`) is written here once. ``tests/test_architecture.py`` checks the
code against it (a layer imports only itself and the layers below; no import circle), and this
script writes what follows from it:

* ``docs/architecture.dot`` and ``docs/architecture.svg``: the picture of the layers and of the
  imports between them, drawn by fsm's own diagram rendering (:func:`fsm.view.diagram.render`);
* ``ruff.toml`` in each layer's folder, in ``machines/`` and in ``examples/``: ruff's
  ``banned-api`` (TID251) refusing, as the code is written, an import of a layer above, of the
  public surface from inside fsm, or of a layer's module from a machine or an example.

Run it after moving a module or adding an import between layers::

    .venv/bin/python scripts/architecture.py          # rewrite the files
    .venv/bin/python scripts/architecture.py --check  # exit 1 naming the stale ones

A test fails when a committed file differs from what this script writes.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
from collections import Counter
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE = REPOSITORY / "fsm"

LAYERS: list[tuple[str, tuple[str, ...], str]] = [
    ("base", ("fsm.base",), "errors, clock, JSON, files, ids, updates, logging set-up"),
    ("process", ("fsm.process",), "running programs: executor, agent CLIs, process trees"),
    ("model", ("fsm.model",), "what a machine is: definition, checks, registry, records"),
    ("store", ("fsm.store", "fsm.postgres"), "where documents and journals are kept"),
    ("engine", ("fsm.engine",), "the step, the transaction, control, retry, the workspace"),
    ("coverage", ("fsm.coverage",), "edges declared and taken: journals against definitions"),
    ("view", ("fsm.view",), "diagrams, listing, history, status, terminal output"),
    ("serve", ("fsm.serve",), "fsm serve: the web pages and their API"),
    ("cli", ("fsm.cli",), "the fsm command: one command table"),
]
"""The layers, bottom to top: name, packages, what they hold. A module imports its own layer and
the layers below it, never one above. Everything else in fsm (the top-level modules and
fsm.testing) is the public surface: it may import any layer, and no layer imports it."""

EXCEPTIONS: dict[tuple[str, str], str] = {
    ("fsm.cli.machine_commands", "fsm.testing.paths"): "fsm test-paths runs the testing kit's "
    "search for scenarios: the tests it writes are the kit's own harness and scripted answers",
}
"""Imports allowed against the layer order, (importer, imported) -> the reason."""

SURFACE = "surface"
"""The name of the public surface in the picture."""

PUBLIC = frozenset(
    {
        "fsm",
        "fsm.clock",
        "fsm.context",
        "fsm.errors",
        "fsm.executor",
        "fsm.helpers",
        "fsm.log",
        "fsm.outcome",
        "fsm.registry",
        "fsm.storage",
        "fsm.testing",
        "fsm.testing.contract",
        "fsm.testing.paths",
        "fsm.testing.postgres_cluster",
    }
)
"""What machine authors, store authors and scripts import: the modules of the surface that are
not private. Bundled machines and examples import nothing else."""

THIRD_PARTY_BANS = {
    "transitions": "Only fsm/engine/engine.py may import transitions.",
    "pygraphviz": "Only fsm/view/diagram.py may import pygraphviz.",
}
"""The project-wide bans of pyproject.toml, repeated in every ruff.toml (a nested ruff
configuration replaces the banned-api table it extends)."""


def modules() -> dict[str, Path]:
    """Every module of fsm by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(REPOSITORY).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports_in(path: Path, package: str, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` the file at ``path`` imports anywhere in its code (inside
    functions and under ``TYPE_CHECKING`` too: a circle of type hints is still a circle of the
    design). ``from fsm.base import jsonio`` imports ``fsm.base.jsonio``; ``package`` resolves
    relative imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in known}


def imports_of(module: str) -> set[str]:
    """The fsm modules ``module`` imports (see :func:`imports_in`), itself left out."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return imports_in(path, package, MODULES) - {module}


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the layer ``module`` belongs to; None for the surface."""
    for index, (_, packages, _) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return index
    return None


def layer_name(module: str) -> str:
    """The name of ``module``'s layer, or of the surface."""
    index = layer_of(module)
    return SURFACE if index is None else LAYERS[index][0]


def surface_modules() -> list[str]:
    """The top-level modules of the surface (fsm.testing's private modules left out)."""
    return sorted(n for n in MODULES if n.count(".") == 1 and layer_of(n) is None)


def banned_for(layer: int | None) -> dict[str, str]:
    """What the ruff.toml of a layer's folder bans, with the message ruff shows; ``None``: the
    folders outside fsm (machines, examples), which may import the surface only."""
    banned = dict(THIRD_PARTY_BANS)
    if layer is None:
        for name, packages, _ in LAYERS:
            for package in packages:
                banned[package] = f"{package} is fsm's {name} layer: import fsm's public modules"
        return banned
    name = LAYERS[layer][0]
    for above, packages, _ in LAYERS[layer + 1 :]:
        for package in packages:
            banned[package] = f"the {name} layer imports no layer above it ({above})"
    for module in [*surface_modules(), "fsm.testing"]:
        if module != "fsm.__main__":
            banned[module] = f"{module} is public surface: import the layer's module instead"
    return banned


def ruff_toml(layer: int | None, depth: int) -> str:
    """The text of a ruff.toml ``depth`` folders below the repository."""
    where = "outside fsm" if layer is None else f"the {LAYERS[layer][0]} layer"
    lines = [
        f"# Written by scripts/architecture.py from its layer table: the imports {where} may not",
        "# make. Edit the table there and rerun it, not this file.",
        f'extend = "{"../" * depth}pyproject.toml"',
        "",
        "[lint.flake8-tidy-imports.banned-api]",
    ]
    for name, message in sorted(banned_for(layer).items()):
        lines.append(f'"{name}".msg = "{message}"')
    return "\n".join(lines) + "\n"


def ruff_configs() -> dict[Path, str]:
    """Every ruff.toml this script writes, by path."""
    configs = {}
    for index, (_, packages, _) in enumerate(LAYERS):
        for package in packages:
            folder = REPOSITORY.joinpath(*package.split("."))
            if package in MODULES:
                configs[folder / "ruff.toml"] = ruff_toml(index, len(package.split(".")))
    for folder in ("machines", "examples"):
        configs[REPOSITORY / folder / "ruff.toml"] = ruff_toml(None, 1)
    return configs


def layer_edges() -> Counter[tuple[str, str]]:
    """How many module imports go from each layer (or the surface) to each other one."""
    edges: Counter[tuple[str, str]] = Counter()
    for module in MODULES:
        for other in imports_of(module):
            source, target = layer_name(module), layer_name(other)
            if source != target:
                edges[(source, target)] += 1
    return edges


def dot() -> str:
    """The picture of the layers: one box per layer listing its modules, bottom to top, and an
    arrow for each pair of layers with imports between them (labelled with how many)."""
    rows = [(SURFACE, (), "public facades, fsm.testing"), *LAYERS[::-1]]
    lines = [
        "digraph layers {",
        '  graph [rankdir=TB, nodesep=0.3, ranksep=0.35, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#f5f5f5", fontname="Helvetica",'
        " fontsize=10];",
        '  edge [color="#777777", fontname="Helvetica", fontsize=9];',
    ]
    for name, packages, summary in rows:
        members = sorted(
            m.rpartition(".")[2]
            for m in MODULES
            if layer_name(m) == name
            and not m.rpartition(".")[2].startswith("_")
            and m not in packages
        )
        if name == SURFACE:
            members = sorted(m.removeprefix("fsm.") for m in surface_modules())
        listed = _wrap(", ".join(members), 70)
        label = f"{name}: {summary}\\n{listed}"
        lines.append(f'  "{name}" [label="{label}"];')
    for above, below in stacking():
        lines.append(f'  "{above}" -> "{below}" [style=invis, weight=10];')
    for (source, target), count in sorted(layer_edges().items()):
        style = ', style=dashed, color="#bbbbbb"' if source == SURFACE else ""
        lines.append(f'  "{source}" -> "{target}" [label="{count}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def stacking() -> list[tuple[str, str]]:
    """The invisible arrows that stack the boxes, each layer above the one below it."""
    order = [SURFACE, *(name for name, _, _ in LAYERS[::-1])]
    return list(itertools.pairwise(order))


def _wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, joined by DOT's line break."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\\n".join(lines)


def outputs() -> dict[Path, str | None]:
    """Every file this script writes and its text (None for the SVG, checked by its DOT)."""
    return {REPOSITORY / "docs" / "architecture.dot": dot(), **ruff_configs()}


def write() -> None:
    """Write the DOT file, the SVG drawn from it, and the ruff.toml files."""
    from fsm.view.diagram import render

    for path, text in outputs().items():
        if text is not None:
            path.write_text(text, encoding="utf-8")
    (REPOSITORY / "docs" / "architecture.svg").write_bytes(render(dot(), "svg"))


def stale() -> list[Path]:
    """The files whose committed text differs from what :func:`write` would write."""
    return [
        path
        for path, text in outputs().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    """Write the files, or with ``--check`` say which are stale (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say which files are stale")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"stale: {path.relative_to(REPOSITORY)}", file=sys.stderr)
        return 1 if old else 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
