"""Text renderers of a :class:`~fsm.diagram.DiagramModel`: DOT and Mermaid ``stateDiagram-v2``.

Both are pure functions of the model (and, for DOT, an optional run overlay): the same model
gives the same bytes, so committed diagrams diff cleanly. Styling lives here and nowhere else;
the engine never sees it. Helper node ids start with ``_`` (DOT) or are allocated uniquely
(Mermaid), so they never collide with state names, which start with a letter.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsm.diagram import DiagramEdge, DiagramModel, DiagramNode, RunOverlay

__all__ = ["dot_text", "mermaid_text"]

FONT = "Helvetica"
SUCCESS = ("#dff5e1", "#2e7d32")  # fill, border
FAILURE = ("#fbe0e0", "#c62828")
CONTROL = "#1f5fbf"
CURRENT = "#ffd54f"
DIMMED = "#b0b0b0"
INITIAL_ID = "_initial"
CONTROL_CLUSTER = "cluster_control"
LABEL_WIDTH = 32


def dot_text(model: DiagramModel, run: RunOverlay | None = None) -> str:
    """The model as DOT; with ``run``, visit counts, the current state and dimmed untaken edges."""
    title = f"{model.name} (v{model.version})\\n{_escape(model.description)}"
    if run is not None:
        title += f"\\ninstance in state {_escape(run.current_state)}"
    lines = [
        f"digraph {_quote(model.name)} {{",
        f'  graph [label="{title}", labelloc=t, fontname="{FONT}", compound=true, '
        "nodesep=0.4, ranksep=0.5];",
        f'  node [shape=box, style=rounded, fontname="{FONT}", fontsize=11];',
        f'  edge [fontname="{FONT}", fontsize=9];',
        f'  {INITIAL_ID} [shape=point, width=0.15, label="", tooltip="initial state"];',
    ]
    lines.extend(f"  {_quote(n.name)} [{_attrs(_node_attrs(n, run))}];" for n in model.nodes)
    lines.append(f"  {INITIAL_ID} -> {_quote(model.initial)};")
    loops = [e.source for e in model.edges if e.kind == "work" and e.source == e.dest]
    for edge in model.edges:
        if edge.kind == "work" and edge.source is not None:
            attrs = _edge_attrs(edge, run)
            if edge.source == edge.dest and loops.count(edge.source) > 1:
                # Graphviz nests a node's self-loops and sets their labels side by side with no
                # gap; trailing spaces keep "count [g]" and "spoil" from reading as one label.
                attrs["label"] += "   "
            lines.append(f"  {_quote(edge.source)} -> {_quote(edge.dest)} [{_attrs(attrs)}];")
    if model.statuses:
        lines.extend(_control_cluster(model, run))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_attrs(node: DiagramNode, run: RunOverlay | None) -> dict[str, str]:
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
    attrs["style"] = ",".join(styles)
    return attrs


def _edge_attrs(
    edge: DiagramEdge, run: RunOverlay | None, label: str | None = None
) -> dict[str, str]:
    text = edge.label if label is None else label
    attrs = {"label": _wrap(text), "tooltip": edge.description}
    if edge.transition is not None:
        attrs["id"] = f"t{edge.transition}_{edge.source}"
    elif edge.kind == "control":
        attrs["id"] = f"c_{edge.event}_{edge.source}" if edge.source else f"c_{edge.event}"
    if edge.kind == "control":
        attrs.update(style="dashed", color=CONTROL, fontcolor=CONTROL)
    elif not edge.auto:
        attrs["style"] = "dotted"
    if run is not None:
        taken = run.edge_count(edge)
        attrs["label"] = f"{attrs['label']} ×{taken}"
        if taken == 0:
            attrs.update(color=DIMMED, fontcolor=DIMMED)
        else:
            attrs["penwidth"] = "2"
    return attrs


def _control_cluster(model: DiagramModel, run: RunOverlay | None) -> list[str]:
    """The status layer in a dashed box, and one edge per state-moving command out of it."""
    label = _control_label(model)
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
    status_of = {e.event: e.dest for e in model.edges if e.layer == "status"}
    for edge in model.edges:
        if edge.kind == "control" and edge.layer == "state":
            attrs = _edge_attrs(edge, run, label=f"{edge.event} (from any state)")
            attrs.update(ltail=CONTROL_CLUSTER, constraint="false")
            anchor = _status_id(status_of.get(edge.event, model.statuses[0]))
            lines.append(f"  {anchor} -> {_quote(edge.dest)} [{_attrs(attrs)}];")
    return lines


def _wrap(text: str) -> str:
    """Break a long edge label over lines; long guard lists otherwise make very wide graphs."""
    if len(text) <= LABEL_WIDTH:
        return text
    return textwrap.fill(text, LABEL_WIDTH, break_long_words=False, break_on_hyphens=False)


def _status_id(status: str) -> str:
    return _quote(f"_status_{status}")


def _attrs(attrs: dict[str, str]) -> str:
    return ", ".join(f"{key}={_quote(value)}" for key, value in attrs.items())


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'


def _escape(text: str) -> str:
    """Escape for a DOT string: backslashes and quotes, and newlines as centred line breaks."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


MERMAID_KEYWORDS = frozenset(
    {
        "state",
        "note",
        "end",
        "direction",
        "class",
        "classdef",
        "style",
        "as",
        "hide",
        "scale",
        "click",
        "acctitle",
        "accdescr",
        "default",
        "fork",
        "join",
        "choice",
    }
)


def mermaid_text(model: DiagramModel) -> str:
    """The model as a Mermaid ``stateDiagram-v2`` (control commands in a ``control`` box)."""
    ids = _MermaidIds()
    state_ids = {node.name: ids.allocate(node.name) for node in model.nodes}
    title = json.dumps(f"{model.name} (v{model.version}): {model.description}", ensure_ascii=False)
    lines = ["---", f"title: {title}", "---", "stateDiagram-v2"]
    for node in model.nodes:
        sid = state_ids[node.name]
        if sid != node.name:
            lines.append(f'    state "{_mermaid_text(node.name)}" as {sid}')
        lines.append(f"    {sid} : {_mermaid_text(node.description)}")
    lines.append(f"    [*] --> {state_ids[model.initial]}")
    for edge in model.work_edges():
        if edge.source is not None:
            source, dest = state_ids[edge.source], state_ids[edge.dest]
            lines.append(f"    {source} --> {dest} : {_mermaid_text(edge.label)}")
    lines.extend(f"    {state_ids[node.name]} --> [*]" for node in model.nodes if node.final)
    if model.statuses:
        lines.extend(_mermaid_control(model, ids, state_ids))
    lines.append(f"    classDef success fill:{SUCCESS[0]},stroke:{SUCCESS[1]}")
    lines.append(f"    classDef failure fill:{FAILURE[0]},stroke:{FAILURE[1]}")
    for style in ("success", "failure"):
        names = [state_ids[n.name] for n in model.nodes if getattr(n, style)]
        if names:
            lines.append(f"    class {','.join(names)} {style}")
    return "\n".join(lines) + "\n"


def _mermaid_control(model: DiagramModel, ids: _MermaidIds, state_ids: dict[str, str]) -> list[str]:
    box = ids.allocate("control")
    label = _control_label(model)
    status_ids = {status: ids.allocate(f"status_{status}") for status in model.statuses}
    lines = [f'    state "{_mermaid_text(label)}" as {box} {{']
    lines.extend(f'        state "{_mermaid_text(s)}" as {sid}' for s, sid in status_ids.items())
    for edge in model.edges:
        if edge.kind == "control" and edge.layer == "status" and edge.source is not None:
            source, dest = status_ids[edge.source], status_ids[edge.dest]
            lines.append(f"        {source} --> {dest} : {_mermaid_text(edge.event)}")
    lines.append("    }")
    for edge in model.edges:
        if edge.kind == "control" and edge.layer == "state":
            text = _mermaid_text(f"{edge.event} (control, from any state)")
            lines.append(f"    {box} --> {state_ids[edge.dest]} : {text}")
    lines.append(f"    classDef control stroke:{CONTROL},color:{CONTROL},stroke-dasharray:5")
    lines.append(f"    class {','.join([box, *status_ids.values()])} control")
    return lines


class _MermaidIds:
    """Mermaid-safe ids (no dashes, no keywords), unique across the diagram."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def allocate(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", name)
        if base.lower() in MERMAID_KEYWORDS or not base[:1].isalpha():
            base = f"s_{base}"
        candidate, suffix = base, 2
        while candidate in self.used:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        self.used.add(candidate)
        return candidate


MERMAID_UNSAFE = re.compile(r'[#:;"{}]')


def _mermaid_text(text: str) -> str:
    """One line of Mermaid label text, with the characters its parser splits on as entity codes."""
    return MERMAID_UNSAFE.sub(lambda m: f"#{ord(m.group())};", " ".join(text.split()))


def _control_label(model: DiagramModel) -> str:
    field = f" (status field '{model.control_field}')" if model.control_field else ""
    return f"control commands{field}"
