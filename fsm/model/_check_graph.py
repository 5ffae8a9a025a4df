"""A machine file as the graph ``fsm check`` reasons about, and the finding a rule reports.

:class:`Graph` is a small view of a :class:`~fsm.model.definition.MachineSpec`, not of a loaded
:class:`~fsm.model.machine.Machine`, so that the rules also run on a file whose names do not all
resolve: ``fsm check`` reports every problem at once. A transition naming an unknown state stays
an edge with no known target, and the graph remembers that it is not ``complete``. A guard whose
budget is unknown (its name does not resolve, or the module did not import) counts as a budget
guard, so that a typo in a guard name is reported once and not echoed as an unbounded cycle. A
budget guard bounds a transition only when it is not negated (``not within_budget`` holds once
the budget is spent), and a transition with ``unbounded: "<reason>"`` counts as bounded: its
author says why the cycle ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from fsm.model.definition import MachineSpec, format_location, guard_name
from fsm.model.registry import GuardInfo
from fsm.model.yaml_loader import LoadedYaml

__all__ = ["Edge", "Finding", "Graph", "components", "finding_line", "graph_of", "reach"]

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Finding:
    """One problem: where (``file:line`` or the file), how bad, what, and which rule found it."""

    path: str
    level: Literal["error", "warning"]
    message: str
    check: str

    def render(self) -> str:
        """``path: level: message``, the line ``fsm check`` prints."""
        return f"{self.path}: {self.level}: {self.message}"


def finding_line(finding: Finding) -> int:
    """The line a finding points at (0 for the whole file), to order findings by."""
    _, _, tail = finding.path.rpartition(":")
    return int(tail) if tail.isdigit() else 0


@dataclass(frozen=True)
class Edge:
    """A transition as the rules see it; ``dest`` None means ``"="`` (stay in the source)."""

    index: int
    event: str
    sources: tuple[str, ...]
    dest: str | None
    dest_known: bool
    guards: tuple[tuple[str, bool], ...]
    bounded: bool
    auto: bool

    def target(self, source: str) -> str | None:
        """Where the transition leads from ``source`` (None when its dest is unknown)."""
        if not self.dest_known:
            return None
        return source if self.dest is None else self.dest


@dataclass
class Graph:
    """What the rules need of a machine: its spec, its transitions as edges, and its lines."""

    spec: MachineSpec
    edges: list[Edge]
    lines: LoadedYaml | None
    file: str
    complete: bool
    """False when some transition (or ``initial``) names a state that does not exist."""
    leaving: dict[str, list[Edge]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for edge in self.edges:
            for source in edge.sources:
                self.leaving.setdefault(source, []).append(edge)

    def finding(
        self, check: str, loc: Loc, message: str, level: Literal["error", "warning"] = "error"
    ) -> Finding:
        """A finding at ``loc`` (``states.develop``), its location leading the message."""
        line = self.lines.line_of(loc) if self.lines is not None else None
        path = f"{self.file}:{line}" if line is not None else self.file
        return Finding(path, level, f"{format_location(loc)}: {message}", check)

    def successors(self, state: str) -> list[str]:
        """The known states that transitions lead to from ``state``."""
        found = (e.target(state) for e in self.leaving.get(state, ()))
        return [s for s in found if s is not None]


def graph_of(
    spec: MachineSpec, guards: Mapping[str, GuardInfo] | None, lines: LoadedYaml | None, file: str
) -> Graph:
    """The graph of ``spec``; ``guards`` (None when the module did not import) gives budgets."""
    states = spec.states
    complete = spec.initial in states
    edges: list[Edge] = []
    for index, t in enumerate(spec.transitions):
        # "*" is every non-final state, as the loader expands it. A transition never leaves a
        # final state (the instance ends there), so final sources are no edges of the graph:
        # the final-outgoing rule reports them from the spec.
        named = list(states) if t.sources == ["*"] else t.sources
        sources = tuple(dict.fromkeys(s for s in named if s in states and not states[s].final))
        complete = complete and all(s in states for s in named)
        dest = None if t.dest == "=" else t.dest
        dest_known = dest is None or dest in states
        complete = complete and dest_known
        refs = tuple(guard_name(g) for g in t.guards)
        # A negated budget guard holds once the budget is spent: it ends nothing.
        bounded = t.unbounded is not None or any(
            guards is None or n not in guards or (guards[n].budget and not negated)
            for n, negated in refs
        )
        edges.append(Edge(index, t.event, sources, dest, dest_known, refs, bounded, t.auto))
    return Graph(spec, edges, lines, file, complete)


def reach(roots: Iterable[str], step: Callable[[str], Iterable[str]]) -> set[str]:
    """Every node reachable from ``roots`` by ``step`` (iterative: machines may be large)."""
    seen = set(roots)
    todo = list(seen)
    while todo:
        for nxt in step(todo.pop()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def components(nodes: Sequence[str], successors: Callable[[str], list[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative so that large machines do not recurse)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in nodes:
        if root in index:
            continue
        enter(root)
        work = [(root, iter(successors(root)))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    enter(child)
                    work.append((child, iter(successors(child))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    components.append(component)
    return components
