"""What a diagram shows, independent of the output format: its states, its edges and, for one
instance, where it is and how often its journal shows each state and edge taken. Built by
:mod:`fsm.view.diagram`, drawn by :mod:`fsm.view.diagram_render` (DOT) and
:mod:`fsm.view.diagram_mermaid`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DiagramEdge", "DiagramModel", "DiagramNode", "EdgeKind", "RunOverlay"]

EdgeKind = Literal["work", "control"]


@dataclass(frozen=True)
class DiagramNode:
    """One FSM state as drawn."""

    name: str
    description: str
    initial: bool = False
    final: bool = False
    success: bool = False
    failure: bool = False


@dataclass(frozen=True)
class DiagramEdge:
    """One drawn edge: a transition from one source, or a control command.

    ``layer`` is ``"state"`` for edges that end in an FSM state and ``"status"`` for control
    edges between lifecycle statuses. A control edge into a state has ``source=None``: it applies
    from every non-final state.
    """

    source: str | None
    dest: str
    event: str
    guards: tuple[str, ...] = ()
    kind: EdgeKind = "work"
    auto: bool = True
    transition: int | None = None
    layer: Literal["state", "status"] = "state"
    description: str = ""

    @property
    def label(self) -> str:
        """``event [guard, not guard2]``, with ``(manual)`` for a non-automatic transition."""
        text = f"{self.event} [{', '.join(self.guards)}]" if self.guards else self.event
        return text if self.auto else f"{text} (manual)"


@dataclass(frozen=True)
class DiagramModel:
    """What a diagram shows, independent of the output format."""

    name: str
    description: str
    version: str
    initial: str
    nodes: tuple[DiagramNode, ...]
    edges: tuple[DiagramEdge, ...]
    control_field: str | None = None
    statuses: tuple[str, ...] = ()

    def work_edges(self) -> list[DiagramEdge]:
        """The edges of transitions (not control commands)."""
        return [edge for edge in self.edges if edge.kind == "work"]


@dataclass
class RunOverlay:
    """Where one instance is and how often its journal shows each state and edge taken.

    ``edge_source_visits`` and ``control_source_visits`` split the counts by the state (or
    status) they were taken from, so a transition with several sources is counted per drawn edge;
    when they are empty, every edge of a transition shows the transition's total.
    """

    current_state: str
    state_visits: dict[str, int]
    edge_visits: dict[int, int]
    control_visits: dict[str, int]
    edge_source_visits: dict[tuple[int, str], int] = field(default_factory=dict)
    control_source_visits: dict[tuple[str, str], int] = field(default_factory=dict)
    coverage: str | None = None
    """Set when the counts are a test suite's coverage rather than one instance's journal: the
    title's line (edges and guard outcomes taken of declared); edges never taken are drawn red
    and dashed, and no state is current."""

    def edge_count(self, edge: DiagramEdge) -> int:
        """How many times the journal shows ``edge`` taken."""
        if edge.kind == "control":
            if edge.layer == "status" and self.control_source_visits and edge.source is not None:
                return self.control_source_visits.get((edge.event, edge.source), 0)
            return self.control_visits.get(edge.event, 0)
        index = -1 if edge.transition is None else edge.transition
        if edge.source is not None and any(key[0] == index for key in self.edge_source_visits):
            return self.edge_source_visits.get((index, edge.source), 0)
        return self.edge_visits.get(index, 0)
