"""The Mermaid renderer of a :class:`~fsm.view.diagram_model.DiagramModel`: a ``stateDiagram-v2``.

A pure function of the model, like the DOT renderer in :mod:`fsm.view.diagram_render`: the same
model gives the same bytes. Mermaid has no tooltips, so its edges keep their guards in the label;
ids are allocated uniquely and never collide with Mermaid's keywords.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from fsm.view.diagram_render import CONTROL, FAILURE, SUCCESS, control_label

if TYPE_CHECKING:
    from fsm.view.diagram_model import DiagramModel

__all__ = ["mermaid_text"]

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
    label = control_label(model)
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
