"""The DOT renderer of a :class:`~fsm.view.diagram_model.DiagramModel` (Mermaid:
:mod:`fsm.view.diagram_mermaid`).

A pure function of the model (and an optional run overlay): the same model gives the same bytes,
so committed diagrams diff cleanly. Styling lives here and nowhere else; the engine never sees
it. Helper node ids start with ``_``, so they never collide with state names, which start with a
letter.

Readable at page width: states that share their transitions (the same source list, named by at
least two transitions) are drawn as one grey box, and each shared transition as ONE edge: out of
the box (a compound edge) when it leads elsewhere, from the box's ``any`` point when it leads to
a state inside. Edge labels are short (the event; a transition fired only by name is dotted):
the guards, ``(manual)`` and the description are the edge's tooltip.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsm.view.diagram_model import DiagramEdge, DiagramModel, DiagramNode, RunOverlay

__all__ = [
    "StateGroup",
    "control_label",
    "dot_text",
    "quiet_fontconfig",
    "state_groups",
]

FONT = "Helvetica"
SUCCESS = ("#dff5e1", "#2e7d32")  # fill, border
FAILURE = ("#fbe0e0", "#c62828")
CONTROL = "#1f5fbf"
CURRENT = "#ffd54f"
DIMMED = "#b0b0b0"
UNCOVERED = "#d32f2f"
GROUP = ("#f3f5f8", "#8a94a3")  # fill, border of a box of states sharing transitions
INITIAL_ID = "_initial"
CONTROL_CLUSTER = "cluster_control"
LABEL_WIDTH = 24
_STDERR_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_fontconfig() -> Iterator[None]:
    """Keep fontconfig's warnings off the terminal while Graphviz draws.

    The fontconfig bundled in the pygraphviz wheels is older than the font configuration of
    many systems and warns on stderr about every element it does not know
    (``Fontconfig warning: ... unknown element "reset-dirs"``), at every diagram command.
    Pointing ``FONTCONFIG_FILE`` at a configuration of its age does not help: that fontconfig
    also reads every file of the system's ``conf.avail`` folder, whatever it is told. So while
    a drawing runs, the process's stderr (file descriptor 2, where C libraries write) goes to a
    temporary file; afterwards every line of it but fontconfig's warnings is written to stderr
    as it came. Warnings are about the system's configuration, never about the diagram, and the
    fonts are the system's as before: the images do not change.
    """
    with _STDERR_LOCK:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):  # no stderr at all: nothing to keep quiet
            yield
            return
        try:
            with tempfile.TemporaryFile() as captured:
                os.dup2(captured.fileno(), 2)
                try:
                    yield
                finally:
                    with contextlib.suppress(OSError, ValueError):
                        sys.stderr.flush()
                    os.dup2(saved, 2)
                    captured.seek(0)
                    kept = [
                        line
                        for line in captured.read().splitlines(keepends=True)
                        if not line.startswith(b"Fontconfig warning:")
                    ]
                    if kept:
                        os.write(2, b"".join(kept))
        finally:
            os.close(saved)


@dataclass(frozen=True)
class StateGroup:
    """States drawn as one box because several transitions leave each of them alike."""

    cluster: str
    hub: str
    states: tuple[str, ...]
    transitions: frozenset[int]


def state_groups(model: DiagramModel) -> list[StateGroup]:
    """The boxes of states sharing transitions, most shared first; a state is in one box only.

    A source list becomes a box when two or more transitions name exactly it; when two such
    lists overlap, the one shared by more transitions (then the larger) wins and the other's
    transitions are drawn per source state.
    """
    sources: dict[int, list[str]] = {}
    for edge in model.work_edges():
        if edge.transition is not None and edge.source is not None:
            sources.setdefault(edge.transition, []).append(edge.source)
    shared: dict[frozenset[str], list[int]] = {}
    for index, names in sources.items():
        if len(names) > 1:
            shared.setdefault(frozenset(names), []).append(index)
    candidates = sorted(
        ((states, indexes) for states, indexes in shared.items() if len(indexes) > 1),
        key=lambda item: (-len(item[1]), -len(item[0]), min(item[1])),
    )
    groups: list[StateGroup] = []
    taken: set[str] = set()
    for states, indexes in candidates:
        if states & taken:
            continue
        taken |= states
        number = len(groups)
        members = tuple(node.name for node in model.nodes if node.name in states)
        groups.append(
            StateGroup(f"cluster_states_{number}", f"_any_{number}", members, frozenset(indexes))
        )
    return groups


def dot_text(model: DiagramModel, run: RunOverlay | None = None) -> str:
    """The model as DOT; with ``run``, visit counts, the current state and dimmed untaken edges."""
    title = f"{model.name} (v{model.version})\\n{_escape(_wrap(model.description, 90))}"
    if run is not None and run.coverage is not None:
        title += f"\\n{_escape(run.coverage)}"
    elif run is not None:
        title += f"\\ninstance in state {_escape(run.current_state)}"
    lines = [
        f"digraph {_quote(model.name)} {{",
        f'  graph [label="{title}", labelloc=t, fontname="{FONT}", compound=true, '
        "nodesep=0.2, ranksep=0.45];",
        f'  node [shape=box, style=rounded, fontname="{FONT}", fontsize=11];',
        f'  edge [fontname="{FONT}", fontsize=9];',
        f'  {INITIAL_ID} [shape=point, width=0.15, label="", tooltip="initial state"];',
    ]
    groups = state_groups(model)
    grouped = {state: group for group in groups for state in group.states}
    for node in model.nodes:
        if node.name not in grouped:
            lines.append(f"  {_quote(node.name)} [{_attrs(_node_attrs(node, run))}];")
    nodes = {node.name: node for node in model.nodes}
    for group in groups:
        lines.extend(_group_box(group, nodes, run))
    lines.append(f"  {INITIAL_ID} -> {_quote(model.initial)};")
    lines.extend(_work_edges(model, groups, run))
    if model.statuses:
        lines.extend(_control_cluster(model, run))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _group_box(
    group: StateGroup, nodes: dict[str, DiagramNode], run: RunOverlay | None
) -> list[str]:
    members = ", ".join(group.states)
    hub = {
        "shape": "circle",
        "label": "any",
        "width": "0.3",
        "fixedsize": "true",
        "fontsize": "8",
        "color": GROUP[1],
        "fontcolor": GROUP[1],
        "tooltip": f"any state in this box ({members})",
    }
    lines = [
        f"  subgraph {group.cluster} {{",
        f'    graph [label="", style="rounded,filled", fillcolor="{GROUP[0]}", '
        f'color="{GROUP[1]}", tooltip="{_escape(members)}: they share their transitions"];',
        f"    {_quote(group.hub)} [{_attrs(hub)}];",
    ]
    lines.extend(
        f"    {_quote(name)} [{_attrs(_node_attrs(nodes[name], run, grouped=True))}];"
        for name in group.states
    )
    lines.append("  }")
    return lines


def _work_edges(model: DiagramModel, groups: list[StateGroup], run: RunOverlay | None) -> list[str]:
    """One edge per shared transition of a box, one per source state for the others."""
    group_of = {index: group for group in groups for index in group.transitions}
    loops = [
        e.source for e in model.work_edges() if e.source == e.dest and e.transition not in group_of
    ]
    lines: list[str] = []
    drawn: set[int] = set()
    for edge in model.work_edges():
        if edge.source is None:
            continue
        group = group_of.get(edge.transition) if edge.transition is not None else None
        if group is None:
            attrs = _edge_attrs(edge, run)
            if edge.source == edge.dest and loops.count(edge.source) > 1:
                # Graphviz nests a node's self-loops and sets their labels side by side with no
                # gap; trailing spaces keep "count" and "spoil" from reading as one label.
                attrs["label"] += "   "
            lines.append(f"  {_quote(edge.source)} -> {_quote(edge.dest)} [{_attrs(attrs)}];")
            continue
        assert edge.transition is not None  # a grouped edge comes from a transition
        if edge.transition in drawn:
            continue
        drawn.add(edge.transition)
        count = run.edge_visits.get(edge.transition, 0) if run is not None else None
        attrs = _edge_attrs(edge, run, count=count)
        attrs["id"] = f"t{edge.transition}"
        if run is not None and run.coverage is not None:
            # One drawn edge stands for every source of the box: name those never taken from.
            missed = [
                source
                for source in group.states
                if (edge.transition, source) in run.edge_source_visits
                and not run.edge_source_visits[(edge.transition, source)]
            ]
            if missed:
                attrs["label"] += _wrap(f" (never from {', '.join(missed)})")
                attrs.update(color=UNCOVERED, fontcolor=UNCOVERED, style="dashed")
        if edge.dest not in group.states:
            attrs["ltail"] = group.cluster
        lines.append(f"  {_quote(group.hub)} -> {_quote(edge.dest)} [{_attrs(attrs)}];")
    return lines


def _node_attrs(
    node: DiagramNode, run: RunOverlay | None, *, grouped: bool = False
) -> dict[str, str]:
    attrs = {"label": node.name, "tooltip": node.description}
    styles = ["rounded"]
    if node.final:
        attrs["peripheries"] = "2"
    if node.success or node.failure:
        fill, border = SUCCESS if node.success else FAILURE
        styles.append("filled")
        attrs.update(fillcolor=fill, color=border)
    if run is not None:
        visits = run.state_visits.get(node.name, 0)
        attrs["label"] = f"{node.name}\n×{visits}"
        if node.name == run.current_state:
            styles = ["rounded", "filled", "bold"]
            attrs.update(fillcolor=CURRENT, penwidth="3")
        elif visits == 0:
            attrs["fontcolor"] = DIMMED
    if grouped and "filled" not in styles:
        # The box of grouped states is grey; its members stay white, like every other state.
        styles.append("filled")
        attrs["fillcolor"] = "white"
    attrs["style"] = ",".join(styles)
    return attrs


def _edge_attrs(
    edge: DiagramEdge,
    run: RunOverlay | None,
    label: str | None = None,
    count: int | None = None,
) -> dict[str, str]:
    """Short label, guards and description as the tooltip, and the run's count when given."""
    text = edge.event if label is None else label
    tooltip = f"{edge.label}: {edge.description}" if edge.description else edge.label
    attrs = {"label": _wrap(text), "tooltip": tooltip, "labeltooltip": tooltip}
    if edge.transition is not None:
        attrs["id"] = f"t{edge.transition}_{edge.source}"
    elif edge.kind == "control":
        attrs["id"] = f"c_{edge.event}_{edge.source}" if edge.source else f"c_{edge.event}"
    if edge.kind == "control":
        attrs.update(style="dashed", color=CONTROL, fontcolor=CONTROL)
    elif not edge.auto:
        attrs["style"] = "dotted"
    if run is not None:
        taken = run.edge_count(edge) if count is None else count
        attrs["label"] = f"{attrs['label']} ×{taken}"
        if taken == 0 and run.coverage is not None:
            attrs.update(color=UNCOVERED, fontcolor=UNCOVERED, style="dashed", penwidth="2")
        elif taken == 0:
            attrs.update(color=DIMMED, fontcolor=DIMMED)
        else:
            attrs["penwidth"] = "2"
    return attrs


def _control_cluster(model: DiagramModel, run: RunOverlay | None) -> list[str]:
    """The status layer in a dashed box, and one edge per state-moving command out of it."""
    label = control_label(model)
    lines = [
        f"  subgraph {CONTROL_CLUSTER} {{",
        f'    graph [label="{_escape(label)}", style="dashed,rounded", color="{CONTROL}", '
        f'fontcolor="{CONTROL}", fontsize=10];',
        f'    node [shape=box, style="rounded,dashed", color="{CONTROL}", fontcolor="{CONTROL}", '
        "fontsize=9, height=0.3];",
    ]
    lines.extend(
        f'    {_status_id(status)} [label="{_escape(status)}", tooltip="status {_escape(status)}"];'
        for status in model.statuses
    )
    for edge in model.edges:
        if edge.kind == "control" and edge.layer == "status" and edge.source is not None:
            source, dest = _status_id(edge.source), _status_id(edge.dest)
            lines.append(f"    {source} -> {dest} [{_attrs(_edge_attrs(edge, run))}];")
    lines.append("  }")
    # Below the work graph rather than beside it: the picture stays as narrow as the graph.
    top = _status_id(model.statuses[0])
    lines.extend(
        f'  {_quote(node.name)} -> {top} [style="invis"];' for node in model.nodes if node.final
    )
    status_of = {e.event: e.dest for e in model.edges if e.layer == "status"}
    for edge in model.edges:
        if edge.kind == "control" and edge.layer == "state":
            attrs = _edge_attrs(edge, run, label=f"{edge.event} (from any state)")
            attrs.update(ltail=CONTROL_CLUSTER, constraint="false")
            anchor = _status_id(status_of.get(edge.event, model.statuses[0]))
            lines.append(f"  {anchor} -> {_quote(edge.dest)} [{_attrs(attrs)}];")
    return lines


def _wrap(text: str, width: int = LABEL_WIDTH) -> str:
    """Break long text over lines, so that no label widens the graph much."""
    if len(text) <= width:
        return text
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def _status_id(status: str) -> str:
    return _quote(f"_status_{status}")


def _attrs(attrs: dict[str, str]) -> str:
    return ", ".join(f"{key}={_quote(value)}" for key, value in attrs.items())


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'


def _escape(text: str) -> str:
    """Escape for a DOT string: backslashes and quotes, and newlines as centred line breaks."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def control_label(model: DiagramModel) -> str:
    """The title of the box of control commands."""
    field = f" (status field '{model.control_field}')" if model.control_field else ""
    return f"control commands{field}"
