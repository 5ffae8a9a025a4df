"""The graph rules of ``fsm check``: one ``_check_*`` function per rule, each naming its states.

Two choices keep findings from being mere echoes of a problem already reported: when a
transition names an unknown state (:attr:`Graph.complete` is False) the reachability rules
(unreachable, no final state reachable) are skipped, since their answer depends on what the typo
was meant to be; and trap states are not reported again as states that cannot finish.

A cycle needs *automatic* transitions to spin by itself: one with ``auto: false`` fires only when
someone names its event, so unbounded cycles are looked for among automatic transitions only.
fsm does not try to tell which actions run agents or commands: any action may call
``ctx.executor``, and a cycle whose guards never change spins as well without one, so every
automatic cycle needs a (non-negated) budget guard or a transition with ``unbounded: "<why it
ends>"``; the finding names the actions the cycle runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from fsm.model._check_graph import Edge, Finding, Graph, Loc, components, reach

__all__ = ["RULES", "check_graph"]


def check_graph(graph: Graph) -> list[Finding]:
    """Every graph rule's findings, rule by rule."""
    return [finding for rule in RULES for finding in rule(graph)]


def _names(states: Iterable[str]) -> str:
    return ", ".join(f"'{s}'" for s in states)


def _is_trap(graph: Graph, state: str) -> bool:
    return not graph.spec.states[state].final and not graph.leaving.get(state)


def _check_unreachable(graph: Graph) -> list[Finding]:
    """States no path enters from ``initial`` (control commands' ``state`` count as entries)."""
    if not graph.complete:
        return []
    spec = graph.spec
    roots = [spec.initial]
    if spec.control is not None:
        roots += [c.state for c in spec.control.commands.values() if c.state is not None]
    seen = reach(roots, graph.successors)
    return [
        graph.finding(
            "unreachable",
            ("states", s),
            f"state '{s}' is unreachable: no path leads to it from the initial state "
            f"'{spec.initial}'",
        )
        for s in spec.states
        if s not in seen
    ]


def _check_traps(graph: Graph) -> list[Finding]:
    """Non-final states with no transition out: an instance entering one can never finish."""
    return [
        graph.finding(
            "trap",
            ("states", s),
            f"state '{s}' is not final but has no outgoing transition (a trap state: mark it "
            "final or add a way out)",
        )
        for s in graph.spec.states
        if _is_trap(graph, s)
    ]


def _check_final_outgoing(graph: Graph) -> list[Finding]:
    """Transitions leaving a final state: a final state ends the instance, they never fire."""
    findings = []
    for index, spec in enumerate(graph.spec.transitions):
        for position, source in enumerate(spec.sources):
            state = graph.spec.states.get(source)
            if state is not None and state.final:
                loc: Loc = ("transitions", index, "source")
                if isinstance(spec.source, list):
                    loc = (*loc, position)
                message = (
                    f"final state '{source}' has an outgoing transition (event '{spec.event}')"
                )
                findings.append(graph.finding("final-outgoing", loc, message))
    return findings


def _check_no_final_reachable(graph: Graph) -> list[Finding]:
    """States from which no final state can be reached (trap states are reported as such)."""
    states = graph.spec.states
    finals = [s for s, spec in states.items() if spec.final]
    if not finals:
        return [
            graph.finding(
                "no-final-reachable",
                ("states",),
                "the machine has no final state: no instance can ever finish",
            )
        ]
    if not graph.complete:
        return []
    entering: dict[str, set[str]] = {}
    for source in states:
        for target in graph.successors(source):
            entering.setdefault(target, set()).add(source)
    can_finish = reach(finals, lambda s: entering.get(s, ()))
    return [
        graph.finding(
            "no-final-reachable", ("states", s), f"no final state can be reached from state '{s}'"
        )
        for s in states
        if s not in can_finish and not _is_trap(graph, s)
    ]


def _groups(graph: Graph) -> dict[tuple[str, str], list[Edge]]:
    """Transitions by (state, event), in declared order."""
    groups: dict[tuple[str, str], list[Edge]] = {}
    for edge in graph.edges:
        for source in edge.sources:
            groups.setdefault((source, edge.event), []).append(edge)
    return groups


def _exclusive(a: Edge, b: Edge, groups: Sequence[Sequence[str]]) -> bool:
    """True when the guards of ``a`` and ``b`` are declared never to hold together."""
    for name_a, negated_a in a.guards:
        for name_b, negated_b in b.guards:
            if name_a == name_b and negated_a != negated_b:
                return True
            if (
                name_a != name_b
                and not negated_a
                and not negated_b
                and any(name_a in g and name_b in g for g in groups)
            ):
                return True
    return False


def _label(edge: Edge) -> str:
    guards = ", ".join(f"not {n}" if negated else n for n, negated in edge.guards)
    return f"transitions[{edge.index}] [{guards}]"


def _check_ambiguous(graph: Graph) -> list[Finding]:
    """Guarded transitions of one (state, event) that may both hold, with no fallback last."""
    pairs: dict[tuple[int, int], list[str]] = {}
    for (state, _), edges in _groups(graph).items():
        if any(not e.guards for e in edges):
            continue  # an unguarded fallback decides (or shadows what follows it)
        for i, first in enumerate(edges):
            for second in edges[i + 1 :]:
                if not _exclusive(first, second, graph.spec.exclusive):
                    pairs.setdefault((first.index, second.index), []).append(state)
    findings = []
    for (a, b), states in pairs.items():
        first, second = graph.edges[a], graph.edges[b]
        findings.append(
            graph.finding(
                "ambiguous",
                ("transitions", b),
                f"event '{second.event}' from state {_names(states)} has {_label(first)} and "
                f"{_label(second)}, whose guards are not declared mutually exclusive and no "
                "unguarded fallback last (declare them in 'exclusive:', use 'not <guard>', or "
                "add an unguarded transition last)",
            )
        )
    return findings


def _check_shadowed(graph: Graph) -> list[Finding]:
    """Transitions after an unguarded one of the same (state, event): they can never fire."""
    shadowed: dict[tuple[int, int], list[str]] = {}
    for (state, _), edges in _groups(graph).items():
        fallback = next((e for e in edges if not e.guards), None)
        if fallback is None:
            continue
        for edge in edges[edges.index(fallback) + 1 :]:
            shadowed.setdefault((edge.index, fallback.index), []).append(state)
    return [
        graph.finding(
            "shadowed",
            ("transitions", index),
            f"can never fire from state {_names(states)} on event "
            f"'{graph.edges[index].event}': the unguarded transitions[{by}] before "
            "it is always taken first",
        )
        for (index, by), states in shadowed.items()
    ]


def _check_unbounded_cycles(graph: Graph) -> list[Finding]:
    """Cycles of automatic transitions none of which has a budget guard: a loop without end."""
    loose = [e for e in graph.edges if e.auto and not e.bounded]
    following: dict[str, list[str]] = {}
    for edge in loose:
        for source in edge.sources:
            target = edge.target(source)
            if target is not None:
                following.setdefault(source, []).append(target)
    position = {state: n for n, state in enumerate(graph.spec.states)}
    findings = []
    found = components(list(position), lambda s: following.get(s, []))
    for component in sorted(found, key=lambda c: min(position[s] for s in c)):
        single = component[0]
        if len(component) == 1 and single not in following.get(single, []):
            continue  # a single state without a transition back to itself is no cycle
        members = set(component)
        inside = [
            e for e in loose if any(e.target(s) in members for s in e.sources if s in members)
        ]
        states = sorted(component, key=position.__getitem__)
        transitions = ", ".join(f"transitions[{e.index}]" for e in inside)
        actions = list(
            dict.fromkeys(a for e in inside for a in graph.spec.transitions[e.index].actions)
        )
        running = f", running {_names(actions)}" if actions else ""
        findings.append(
            graph.finding(
                "unbounded-cycle",
                ("transitions", inside[0].index),
                f"cycle through {'states' if len(states) > 1 else 'state'} {_names(states)} "
                f"({transitions}{running}) has no budget guard: a loop that can spin forever, "
                "running agents and commands at every turn (guard one of its transitions with a "
                'guard registered with budget=True, or say why it ends with unbounded: "..." '
                "on one of them)",
            )
        )
    return findings


def _check_untagged_finals(graph: Graph) -> list[Finding]:
    """Final states tagged neither success nor failure: the outcome of a run ending there."""
    return [
        graph.finding(
            "untagged-final",
            ("states", s),
            f"final state '{s}' is tagged neither 'success' nor 'failure' (its outcome is unknown)",
            level="warning",
        )
        for s, spec in graph.spec.states.items()
        if spec.final and not {"success", "failure"} & set(spec.tags)
    ]


def _check_storage_paths(graph: Graph) -> list[Finding]:
    """Storage paths that lead out of the workspace: absolute ones, ``..`` segments, NUL. Every
    ``fsm new`` of such a machine would be refused; placeholders filled from options are checked
    when the options are known (``fsm new``, ``fsm run``)."""
    storage = graph.spec.storage
    findings = []
    for key in ("document", "meta"):
        template = getattr(storage, key)
        if template is None:
            continue
        parts = template.replace("\\", "/").split("/")
        if template.startswith(("/", "\\")):
            why = "is absolute"
        elif ".." in parts:
            why = "climbs out with '..'"
        elif "\x00" in template:
            why = "holds a NUL character"
        else:
            continue
        findings.append(
            graph.finding(
                "storage-outside",
                ("storage", key),
                f"storage path '{template}' {why}: instance files stay inside the workspace "
                "(write it relative to the workspace, without '..')",
            )
        )
    return findings


RULES: tuple[Callable[[Graph], list[Finding]], ...] = (
    _check_unreachable,
    _check_traps,
    _check_final_outgoing,
    _check_no_final_reachable,
    _check_ambiguous,
    _check_shadowed,
    _check_unbounded_cycles,
    _check_untagged_finals,
    _check_storage_paths,
)
