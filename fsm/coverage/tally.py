"""What a machine declares (its coverage targets) and what journals show was taken (a tally).

The targets of a machine, read from its definition:

* **edges**: ``(source, event, dest, transition index)``, one per source state of each declared
  transition (``"*"`` and source lists expanded; ``"="`` resolved to the source);
* **guard outcomes**: both results of every guard at every edge that evaluates it (a guard
  after a false one is not evaluated: the engine stops at the first that fails);
* **control edges**: ``(command, status it is given in)``, one per declared source status;
* **final states**.

A :class:`Tally` counts, from journal records of any source (a test session's watcher, a
workspace's journals, a store), the edges taken, each guard's results, the control commands
given, the final states reached, the actions that raised, and the states seen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fsm.model.machine import Machine
from fsm.model.records import ControlRecord, CreateRecord, ErrorRecord, Record, TransitionRecord

__all__ = ["Edge", "GuardTarget", "Tally", "Targets", "targets_of"]


@dataclass(frozen=True, order=True)
class Edge:
    """A declared edge: a transition taken from one of its source states."""

    source: str
    event: str
    dest: str
    transition: int

    def text(self) -> str:
        """``source --event--> dest (#index)``."""
        return f"{self.source} --{self.event}--> {self.dest} (#{self.transition})"


@dataclass(frozen=True, order=True)
class GuardTarget:
    """A guard evaluated at an edge (its label: ``name`` or ``not name``)."""

    source: str
    transition: int
    guard: str


@dataclass(frozen=True)
class Targets:
    """What a machine declares that tests should take (see the module docstring)."""

    edges: tuple[Edge, ...]
    guards: tuple[tuple[Edge, GuardTarget], ...]
    control: tuple[tuple[str, str], ...]
    finals: tuple[str, ...]
    reachable: frozenset[str]
    """States reachable from the initial state over the declared edges and control commands."""


def targets_of(machine: Machine) -> Targets:
    """The coverage targets of ``machine``."""
    edges: list[Edge] = []
    guards: list[tuple[Edge, GuardTarget]] = []
    for transition in machine.transitions:
        for source in transition.sources:
            edge = Edge(source, transition.event, transition.dest_from(source), transition.index)
            edges.append(edge)
            guards.extend(
                (edge, GuardTarget(source, transition.index, guard.label))
                for guard in transition.guards
            )
    control: list[tuple[str, str]] = []
    moves: dict[str, set[str]] = {}
    spec = machine.spec.control
    if spec is not None:
        for command, declared in spec.commands.items():
            control.extend((command, status) for status in declared.sources)
            if declared.state is not None:
                # A command that sets the state may be given in any state.
                for state in machine.states:
                    moves.setdefault(state, set()).add(declared.state)
    for edge in edges:
        moves.setdefault(edge.source, set()).add(edge.dest)
    reachable = {machine.spec.initial}
    frontier = [machine.spec.initial]
    while frontier:
        for dest in moves.get(frontier.pop(), ()):
            if dest not in reachable:
                reachable.add(dest)
                frontier.append(dest)
    finals = tuple(name for name, state in machine.states.items() if state.final)
    return Targets(tuple(edges), tuple(guards), tuple(control), finals, frozenset(reachable))


@dataclass
class Tally:
    """Counts from journal records of one machine (see the module docstring)."""

    instances: set[str] = field(default_factory=set)
    edges: Counter[Edge] = field(default_factory=Counter)
    guards: dict[GuardTarget, Counter[bool | None]] = field(default_factory=dict)
    control: Counter[tuple[str, str]] = field(default_factory=Counter)
    finals: Counter[str] = field(default_factory=Counter)
    errors: Counter[tuple[str, str, int, str]] = field(default_factory=Counter)
    """(source, event, transition index, what failed: an action, a guard or validation)."""
    states: set[str] = field(default_factory=set)
    evaluated: set[tuple[str, int]] = field(default_factory=set)
    """(source, transition index) pairs whose guards were evaluated at least once."""

    def add(self, instance_id: str, records: Iterable[Record], finals: frozenset[str]) -> None:
        """Count ``records`` of ``instance_id`` (``finals``: the machine's final states)."""
        self.instances.add(instance_id)
        for record in records:
            self._add(record, finals)

    def _add(self, record: Record, finals: frozenset[str]) -> None:
        if isinstance(record, TransitionRecord | ErrorRecord):
            source = record.source
            self.states.add(source)
            self._guards(source, record.guards)
            if isinstance(record, TransitionRecord):
                self.edges[Edge(source, record.event, record.dest, record.transition)] += 1
                self.states.add(record.dest)
                if record.dest in finals:
                    self.finals[record.dest] += 1
            else:
                self.errors[(source, record.event, record.transition, record.action)] += 1
        elif isinstance(record, ControlRecord):
            if record.status_from is not None and record.event != "external":
                self.control[(record.event, record.status_from)] += 1
            self.states.update((record.source, record.dest))
            if record.dest != record.source and record.dest in finals:
                self.finals[record.dest] += 1
        elif isinstance(record, CreateRecord):
            self.states.add(record.dest)

    def _guards(self, source: str, evaluated: Iterable[Mapping[str, Any]]) -> None:
        for entry in evaluated:
            index = entry["transition"]
            self.evaluated.add((source, index))
            label = entry["guard"]
            if label is None:
                continue
            key = GuardTarget(source, index, label)
            counts = self.guards.get(key)
            if counts is None:
                counts = self.guards[key] = Counter()
            counts[entry["result"]] += 1

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts to these."""
        self.instances |= other.instances
        self.edges.update(other.edges)
        for key, counts in other.guards.items():
            self.guards.setdefault(key, Counter()).update(counts)
        self.control.update(other.control)
        self.finals.update(other.finals)
        self.errors.update(other.errors)
        self.states |= other.states
        self.evaluated |= other.evaluated
