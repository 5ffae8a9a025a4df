"""Diagrams of a machine: a small model built from the definition, then DOT, Mermaid and images.

The definition is first reduced to a :class:`DiagramModel` (states, transitions, control
commands), a pure function of the machine; the text renderers in :mod:`fsm.view.diagram_render` and
:mod:`fsm.view.diagram_mermaid` turn it into DOT and Mermaid, and :func:`render` turns DOT into SVG
or PNG in-process with pygraphviz (its 2.x wheels bundle Graphviz, so no system ``dot`` is
needed). This module is the only one that imports pygraphviz, and only inside :func:`render`, so
``import fsm.view.diagram`` stays cheap.

What is drawn, and why it looks the way it does:

* every state, with its description as the tooltip; a small point with an arrow marks the
  initial state; final states have a double border, success finals green, other finals (the
  ones the engine reports as failed) red;
* one edge per (transition, source state) in the model; the DOT renderer draws states that share
  transitions as one box with one edge per shared transition (see :mod:`fsm.view.diagram_render`),
  labels an edge with its event and keeps ``event [guard, not guard2]: description`` for the
  tooltip; a transition with ``auto: false`` (fired only by name) is dotted;
* control commands act on the lifecycle *status*, a layer beside the FSM state. Drawing ``stop``
  as an edge from every non-final state would bury the work graph, so the status layer is drawn
  once, in its own dashed blue box: its statuses, and one dashed edge per command and status it
  may be given in (``pause: running -> paused``). A command that also moves the FSM state (``stop``
  with ``state: failed``) gets ONE dashed edge from that box to the state, labelled
  ``stop (from any state)``; commands that keep the state (pause, resume, start) stay in the box.

DOT text is deterministic: states in the order the file declares them, edges by transition
index then source, control commands in the order start/pause/resume/stop; no timestamps. A
per-instance :class:`RunOverlay` (see :func:`overlay_from_journal`) adds visit counts, highlights
the current state and dims what was never taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fsm.base.errors import DiagramRenderError, InputError
from fsm.coverage.report import machine_section
from fsm.model.definition import CONTROL_COMMANDS
from fsm.model.migrations import MIGRATION
from fsm.model.records import (
    ControlRecord,
    CreateRecord,
    MigrateRecord,
    Record,
    RecoverRecord,
    RetryRecord,
    TransitionRecord,
)
from fsm.view.diagram_mermaid import mermaid_text
from fsm.view.diagram_model import DiagramEdge, DiagramModel, DiagramNode, RunOverlay
from fsm.view.diagram_render import dot_text

if TYPE_CHECKING:
    from fsm.model.machine import Machine

__all__ = [
    "FORMATS",
    "DiagramEdge",
    "DiagramModel",
    "DiagramNode",
    "DiagramRenderError",
    "DiagramReport",
    "RunOverlay",
    "count_visit",
    "diagram_model",
    "journal_records",
    "overlay_from_coverage",
    "overlay_from_journal",
    "render",
    "to_dot",
    "to_mermaid",
    "write_diagrams",
]

FORMATS = ("dot", "svg", "png", "mmd")
IMAGE_FORMATS = ("svg", "png")


@dataclass
class DiagramReport:
    """The files :func:`write_diagrams` wrote, and the formats it skipped with the reason."""

    written: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def diagram_model(machine: Machine) -> DiagramModel:
    """Reduce ``machine`` to what its diagram shows."""
    spec = machine.spec
    nodes = tuple(
        DiagramNode(
            name=name,
            description=state.description,
            initial=name == spec.initial,
            final=state.final,
            success=machine.is_success(name),
            failure=state.final and not machine.is_success(name),
        )
        for name, state in spec.states.items()
    )
    edges = [
        DiagramEdge(
            source=source,
            dest=transition.dest_from(source),
            event=transition.event,
            guards=tuple(guard.label for guard in transition.guards),
            auto=transition.auto,
            transition=transition.index,
            description=transition.description,
        )
        for transition in sorted(machine.transitions, key=lambda t: t.index)
        for source in transition.sources
    ]
    statuses: list[str] = []
    control = spec.control
    if control is not None:
        for command in CONTROL_COMMANDS:
            command_spec = control.commands.get(command)  # type: ignore[call-overload]
            if command_spec is None:
                continue
            for status in [*command_spec.sources, command_spec.dest]:
                if status not in statuses:
                    statuses.append(status)
            edges.extend(
                DiagramEdge(
                    source=status,
                    dest=command_spec.dest,
                    event=command,
                    kind="control",
                    layer="status",
                    description=command_spec.description,
                )
                for status in command_spec.sources
            )
            if command_spec.state is not None:
                edges.append(
                    DiagramEdge(
                        source=None,
                        dest=command_spec.state,
                        event=command,
                        kind="control",
                        description=command_spec.description,
                    )
                )
    return DiagramModel(
        name=spec.name,
        description=spec.description,
        version=str(spec.version),
        initial=spec.initial,
        nodes=nodes,
        edges=tuple(edges),
        control_field=control.field if control is not None else None,
        statuses=tuple(statuses),
    )


def overlay_from_journal(records: Iterable[Record], current_state: str) -> RunOverlay:
    """Count visits from journal records.

    A ``create``, ``recover`` or ``retry`` record, a ``transition`` record (self-loops included:
    the step ran in that state) and a ``control`` record that moved the state each count one
    visit of their ``dest``; ``error`` records and control commands that keep the state count
    none.
    """
    overlay = RunOverlay(current_state, {}, {}, {})
    for record in records:  # one at a time: a journal's records are never held at once
        count_visit(overlay, record)
    return overlay


def count_visit(overlay: RunOverlay, record: Record) -> None:
    """Add the visit ``record`` shows to ``overlay`` (see :func:`overlay_from_journal`)."""

    def bump(table: dict[Any, int], key: Any) -> None:
        table[key] = table.get(key, 0) + 1

    if isinstance(record, (CreateRecord, RecoverRecord, RetryRecord)):
        bump(overlay.state_visits, record.dest)
    elif isinstance(record, TransitionRecord):
        bump(overlay.edge_visits, record.transition)
        bump(overlay.edge_source_visits, (record.transition, record.source))
        bump(overlay.state_visits, record.dest)
    elif isinstance(record, MigrateRecord):
        _carry_over(overlay, record)
    elif isinstance(record, ControlRecord):
        bump(overlay.control_visits, record.event)
        if record.status_from is not None:
            bump(overlay.control_source_visits, (record.event, record.status_from))
        if record.dest != record.source:
            bump(overlay.state_visits, record.dest)


def journal_records(journal: Any) -> Iterator[Record]:
    """The records of ``journal`` fsm can read, first to last, one at a time (its
    ``entries()``: a long journal's records are never held in memory together)."""
    for _, record in journal.entries():
        if isinstance(record, Record):
            yield record


def _carry_over(overlay: RunOverlay, record: MigrateRecord) -> None:
    """Count what came before a migration under the names and transitions of the definition it
    migrated to (the migration's renames, and the transitions it found again); transitions the
    new definition no longer has are no longer counted."""
    details = record.extra.get(MIGRATION)
    if not isinstance(details, dict):
        return
    found_states, found_edges = details.get("states"), details.get("edges")
    states: dict[str, Any] = found_states if isinstance(found_states, dict) else {}
    edges: dict[str, Any] = found_edges if isinstance(found_edges, dict) else {}
    visits: dict[str, int] = {}
    for state, count in overlay.state_visits.items():
        renamed = states.get(state, state)
        if isinstance(renamed, str):
            visits[renamed] = visits.get(renamed, 0) + count
    overlay.state_visits = visits
    edge_visits: dict[int, int] = {}
    for index, count in overlay.edge_visits.items():
        moved = edges.get(str(index))
        if isinstance(moved, int):
            edge_visits[moved] = edge_visits.get(moved, 0) + count
    overlay.edge_visits = edge_visits
    by_source: dict[tuple[int, str], int] = {}
    for (index, source), count in overlay.edge_source_visits.items():
        moved, renamed = edges.get(str(index)), states.get(source, source)
        if isinstance(moved, int) and isinstance(renamed, str):
            by_source[moved, renamed] = by_source.get((moved, renamed), 0) + count
    overlay.edge_source_visits = by_source


def overlay_from_coverage(machine: Machine, report: Mapping[str, Any]) -> RunOverlay:
    """The counts of a coverage report (``pytest --fsm-cov-report=json:PATH``) for ``machine``:
    each edge and control command with how often the tests took it; states by the edges into
    them. InputError when the report has no section for the machine."""
    section = machine_section(report, machine.name, str(machine.path))
    overlay = RunOverlay("", {}, {}, {})
    overlay.state_visits[machine.spec.initial] = section["instances"]
    for edge in section["edges"]:
        index, count = edge["transition"], edge["count"]
        overlay.edge_source_visits[(index, edge["source"])] = count
        overlay.edge_visits[index] = overlay.edge_visits.get(index, 0) + count
        overlay.state_visits[edge["dest"]] = overlay.state_visits.get(edge["dest"], 0) + count
    for command in section["control"]:
        overlay.control_source_visits[(command["command"], command["from"])] = command["count"]
        total = overlay.control_visits.get(command["command"], 0) + command["count"]
        overlay.control_visits[command["command"]] = total
    for final in section["finals"]:  # a stop reaches one without an edge
        overlay.state_visits[final["state"]] = final["count"]
    summary = section["summary"]
    overlay.coverage = "tests took: " + ", ".join(
        f"{kind} {summary[kind]['taken']}/{summary[kind]['declared']}"
        for kind in ("edges", "guards", "control", "finals")
    )
    return overlay


def to_dot(machine: Machine, *, run: RunOverlay | None = None) -> str:
    """The machine as deterministic DOT text (with visit counts when ``run`` is given)."""
    return dot_text(diagram_model(machine), run)


def to_mermaid(machine: Machine) -> str:
    """The machine as a Mermaid ``stateDiagram-v2``."""
    return mermaid_text(diagram_model(machine))


def render(dot: str, fmt: Literal["svg", "png"]) -> bytes:
    """Lay out ``dot`` and draw it as SVG or PNG bytes, in-process (no ``dot`` on PATH needed)."""
    if fmt not in IMAGE_FORMATS:
        raise DiagramRenderError(f"cannot render '{fmt}': images are {' or '.join(IMAGE_FORMATS)}")
    try:
        import pygraphviz
    except ImportError as exc:
        raise DiagramRenderError(
            f"cannot render {fmt}: pygraphviz is not importable ({exc}); "
            "install it with pip install 'pygraphviz>=2' (its wheels bundle Graphviz)"
        ) from exc
    from fsm.view.diagram_render import quiet_fontconfig

    try:
        with quiet_fontconfig():
            drawn = pygraphviz.AGraph(string=dot).draw(format=fmt, prog="dot")
    except Exception as exc:  # any Graphviz failure means "no image", whatever its type
        detail = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        raise DiagramRenderError(f"cannot render {fmt}: Graphviz failed ({detail})") from exc
    if not isinstance(drawn, bytes) or not drawn:
        raise DiagramRenderError(f"cannot render {fmt}: Graphviz returned no {fmt} data")
    return drawn


def write_diagrams(
    machine: Machine, out_dir: Path, formats: Sequence[str] = FORMATS
) -> DiagramReport:
    """Write ``<out_dir>/<machine>.<fmt>`` for each format; list images that could not be drawn.

    DOT and Mermaid need nothing and are always written; when SVG or PNG cannot be rendered the
    format is reported in ``skipped`` with the reason instead of failing the whole call.
    """
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise InputError(
            f"unknown diagram format {', '.join(repr(f) for f in unknown)} "
            f"(use {', '.join(FORMATS)})"
        )
    dot = to_dot(machine)
    report = DiagramReport()
    out_dir.mkdir(parents=True, exist_ok=True)
    for fmt in dict.fromkeys(formats):
        path = out_dir / f"{machine.name}.{fmt}"
        if fmt == "dot":
            data = dot.encode("utf-8")
        elif fmt == "mmd":
            data = to_mermaid(machine).encode("utf-8")
        else:
            try:
                data = render(dot, "svg" if fmt == "svg" else "png")
            except DiagramRenderError as exc:
                report.skipped.append((fmt, str(exc)))
                continue
        path.write_bytes(data)
        report.written.append(path)
    return report
