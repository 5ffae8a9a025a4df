"""A coverage report: a machine's targets against a tally, as stable JSON and as a table.

The JSON (``formatVersion`` 1) has, per machine: its definition's path, a summary (taken of
declared, for edges, guard outcomes, control edges and final states), and every target with its
count and status, ``covered``, ``uncovered`` or ``unreachable`` (its source state cannot be
reached from the initial state over the declared graph). An edge not taken carries the reason
closest to the truth the journals allow, in this order: its source state was never reached; a
guard of it was never true there (the first in declared order); its actions raised every time
it was chosen; it was never tried there (an event nobody fired, or an earlier transition always
won). The same file is what ``fsm diagram --coverage`` draws and ``fsm coverage --tests`` joins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fsm.base.errors import FsmError
from fsm.coverage.tally import Edge, GuardTarget, Tally, Targets, targets_of
from fsm.model.machine import Machine

__all__ = [
    "FORMAT_VERSION",
    "Threshold",
    "below",
    "machine_report",
    "machine_section",
    "read_report",
    "render_table",
]

FORMAT_VERSION = 1
KINDS = ("edges", "guards", "control", "finals")


def _percent(taken: int, declared: int) -> float:
    return 100.0 if declared == 0 else round(100.0 * taken / declared, 1)


def _edge_reason(edge: Edge, machine: Machine, targets: Targets, tally: Tally) -> str:
    if edge.source not in targets.reachable:
        return f"state {edge.source} cannot be reached from {machine.spec.initial}"
    if edge.source not in tally.states and edge.source != machine.spec.initial:
        return f"state {edge.source} never reached"
    if (edge.source, edge.transition) in tally.evaluated:
        transition = machine.transitions[edge.transition]
        for guard in transition.guards:
            counts = tally.guards.get(GuardTarget(edge.source, edge.transition, guard.label))
            if counts is None:
                return f"guard `{guard.label}` never evaluated in state {edge.source}"
            if not counts[True]:
                return f"guard `{guard.label}` was never true in state {edge.source}"
        failed = [
            action
            for (source, _, index, action), _count in tally.errors.items()
            if source == edge.source and index == edge.transition
        ]
        if failed:
            return f"chosen in state {edge.source} but `{failed[0]}` raised every time"
    transition = machine.transitions[edge.transition]
    if not transition.auto:
        return f"event `{edge.event}` never fired in state {edge.source}"
    if not any(source == edge.source for source, _ in tally.evaluated):
        return f"no step ran in state {edge.source}"
    return f"never tried in state {edge.source}: {_earlier(edge, machine, tally)}"


def _earlier(edge: Edge, machine: Machine, tally: Tally) -> str:
    """Which earlier automatic transition from the edge's source was taken instead, and the
    guard of it that never failed there."""
    for other in machine.transitions[: edge.transition]:
        if edge.source not in other.sources or not other.auto:
            continue
        taken = Edge(edge.source, other.event, other.dest_from(edge.source), other.index)
        if not tally.edges.get(taken):
            continue
        never_false = [
            guard.label
            for guard in other.guards
            if not _count(tally, GuardTarget(edge.source, other.index, guard.label), False)
        ]
        why = f" (guard `{never_false[0]}` never false there)" if never_false else ""
        return f"{taken.text()} was always taken first{why}"
    return "an earlier transition was always taken"


def _count(tally: Tally, target: GuardTarget, result: bool) -> int:
    counts = tally.guards.get(target)
    return 0 if counts is None else counts[result]


def _status(covered: bool, source: str, targets: Targets) -> str:
    if covered:
        return "covered"
    return "uncovered" if source in targets.reachable else "unreachable"


def machine_report(machine: Machine, tally: Tally) -> dict[str, Any]:
    """The JSON report of ``machine`` against ``tally`` (see the module docstring)."""
    targets = targets_of(machine)
    edges = []
    for edge in targets.edges:
        count = tally.edges.get(edge, 0)
        entry: dict[str, Any] = {
            "source": edge.source,
            "event": edge.event,
            "dest": edge.dest,
            "transition": edge.transition,
            "count": count,
            "status": _status(count > 0, edge.source, targets),
        }
        if not count:
            entry["reason"] = _edge_reason(edge, machine, targets, tally)
        edges.append(entry)
    guards = []
    outcomes = 0
    for edge, target in targets.guards:
        counts = tally.guards.get(target)
        true = 0 if counts is None else counts[True]
        false = 0 if counts is None else counts[False]
        raised = 0 if counts is None else counts[None]
        outcomes += (true > 0) + (false > 0)
        guards.append(
            {
                "source": edge.source,
                "event": edge.event,
                "transition": edge.transition,
                "guard": target.guard,
                "true": true,
                "false": false,
                "raised": raised,
                "status": _status(true > 0 and false > 0, edge.source, targets),
            }
        )
    control = [
        {"command": command, "from": status, "count": tally.control.get((command, status), 0)}
        for command, status in targets.control
    ]
    finals = [{"state": state, "count": tally.finals.get(state, 0)} for state in targets.finals]
    errors = [
        {"source": source, "event": event, "transition": index, "failed": what, "count": count}
        for (source, event, index, what), count in sorted(tally.errors.items())
    ]
    summary = {
        "edges": [sum(1 for e in edges if e["count"]), len(edges)],
        "guards": [outcomes, 2 * len(guards)],
        "control": [sum(1 for c in control if c["count"]), len(control)],
        "finals": [sum(1 for f in finals if f["count"]), len(finals)],
    }
    return {
        "path": str(machine.path),
        "instances": len(tally.instances),
        "summary": {
            kind: {"taken": taken, "declared": declared, "percent": _percent(taken, declared)}
            for kind, (taken, declared) in summary.items()
        },
        "edges": edges,
        "guards": guards,
        "control": control,
        "finals": finals,
        "errors": errors,
    }


def full_report(machines: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The whole JSON document of ``machines`` (name -> :func:`machine_report`)."""
    return {"formatVersion": FORMAT_VERSION, "machines": dict(sorted(machines.items()))}


def read_report(path: Path) -> dict[str, Any]:
    """A report written by ``--fsm-cov-report=json:PATH`` (FsmError when it is not one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FsmError(f"cannot read coverage report {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise FsmError(f"coverage report {path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("formatVersion") != FORMAT_VERSION:
        raise FsmError(
            f"{path} is not an fsm coverage report (formatVersion {FORMAT_VERSION} expected)"
        )
    machines = data.get("machines")
    if not isinstance(machines, dict):
        raise FsmError(f"{path} is not an fsm coverage report (no machines)")
    return data


def machine_section(report: Mapping[str, Any], name: str, path: str) -> Mapping[str, Any]:
    """The part of ``report`` about the machine ``name`` (defined at ``path``): under its name,
    or, when the report tells two definitions of that name apart, under ``name (path)``.
    FsmError naming the machines it has when there is none."""
    machines: Mapping[str, Any] = report["machines"]
    found: Mapping[str, Any] | None = machines.get(name) or machines.get(f"{name} ({path})")
    if found is None:
        have = ", ".join(machines) or "none"
        raise FsmError(f"the coverage report has no machine '{name}' (it has: {have})")
    return found


def _cell(summary: Mapping[str, Any], kind: str) -> str:
    part = summary[kind]
    return f"{part['taken']}/{part['declared']}"


def render_table(report: Mapping[str, Any], *, missing: bool = True) -> str:
    """The terminal table of ``report`` (``missing``: each edge not taken, with its reason)."""
    machines: Mapping[str, Any] = report["machines"]
    header = ("Machine", "Edges", "Guard outcomes", "Control", "Finals", "Errors", "Cover")
    rows = [header]
    for name, data in machines.items():
        summary = data["summary"]
        rows.append(
            (
                name,
                _cell(summary, "edges"),
                _cell(summary, "guards"),
                _cell(summary, "control"),
                _cell(summary, "finals"),
                str(sum(e["count"] for e in data["errors"])),
                f"{summary['edges']['percent']:.1f}%",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for position, row in enumerate(rows):
        cells = [
            row[0].ljust(widths[0]),
            *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)),
        ]
        lines.append("  ".join(cells).rstrip())
        if position == 0:
            lines.append("-" * len(lines[0]))
    if missing:
        for name, data in machines.items():
            gaps = _gaps(data)
            if gaps:
                lines.append("")
                lines.append(f"{name}: not taken")
                lines.extend(f"  {gap}" for gap in gaps)
    return "\n".join(lines)


def _edge_gaps(data: Mapping[str, Any]) -> list[str]:
    return [
        f"{e['source']} --{e['event']}--> {e['dest']} (#{e['transition']}): {e['reason']}"
        for e in data["edges"]
        if not e["count"]
    ]


def _gaps(data: Mapping[str, Any]) -> list[str]:
    gaps = _edge_gaps(data)
    for guard in data["guards"]:
        if guard["status"] == "covered":
            continue
        lacking = [side for side in ("true", "false") if not guard[side]]
        never = "never evaluated" if len(lacking) == 2 else f"never {lacking[0]}"
        gaps.append(
            f"guard `{guard['guard']}` at {guard['source']} --{guard['event']}--> "
            f"(#{guard['transition']}): {never}"
        )
    for command in data["control"]:
        if not command["count"]:
            gaps.append(f"control {command['command']} from status {command['from']}: never given")
    for final in data["finals"]:
        if not final["count"]:
            gaps.append(f"final state {final['state']}: never reached")
    return gaps


class Threshold:
    """``--fsm-cov-fail-under``: ``N`` (edges) or ``edges:100,guards:90`` (any of the kinds)."""

    def __init__(self, text: str) -> None:
        self.minimum: dict[str, float] = {}
        for part in text.split(","):
            kind, _, value = part.strip().rpartition(":")
            kind = kind or "edges"
            if kind not in KINDS:
                raise FsmError(f"unknown coverage kind '{kind}' (one of {', '.join(KINDS)})")
            try:
                self.minimum[kind] = float(value)
            except ValueError:
                raise FsmError(f"coverage threshold '{value}' is not a number") from None


def below(report: Mapping[str, Any], threshold: Threshold) -> list[str]:
    """One line per machine and kind under ``threshold``, naming what is not taken."""
    failures = []
    for name, data in report["machines"].items():
        for kind, minimum in threshold.minimum.items():
            percent = data["summary"][kind]["percent"]
            if percent < minimum:
                failures.append(f"{name} {kind} {percent:.1f}% < {minimum:g}%")
                if kind == "edges":
                    failures.extend(f"  {gap}" for gap in _edge_gaps(data))
    return failures


def write_report(report: Mapping[str, Any], path: Path) -> None:
    """Write ``report`` as JSON (sorted keys, two-space indent: stable for diffs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def machines_of(report: Mapping[str, Any]) -> Sequence[str]:
    """The machine names a report holds."""
    return list(report["machines"])
