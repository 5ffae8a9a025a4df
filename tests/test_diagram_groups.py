"""Readable diagrams: states sharing transitions are one box, each shared transition one edge."""

from __future__ import annotations

import re

import pytest

from fsm.model.discovery import open_machine, registered_machines
from fsm.view.diagram import RunOverlay, diagram_model, render, to_dot
from fsm.view.diagram_render import state_groups

PAGE_WIDTH_PT = 900
"""A page of 1,200 CSS pixels (96 per inch) is 900 points wide."""


def edge_lines(dot: str) -> dict[str, str]:
    """Every edge line of ``dot`` by its id."""
    found = {}
    for line in dot.splitlines():
        match = re.search(r'\bid="([^"]+)"', line)
        if match and "->" in line:
            found[match.group(1)] = line.strip()
    return found


def indexes(machine_name: str, source: list[str]) -> list[int]:
    machine = open_machine(machine_name)
    return [t.index for t in machine.transitions if sorted(t.sources) == sorted(source)]


def test_ccw_loop_phases_are_one_box() -> None:
    """init, develop, debug and validate share their transitions: they are drawn as one box."""
    groups = state_groups(diagram_model(open_machine("ccw-loop")))
    assert [group.states for group in groups] == [("init", "develop", "debug", "validate")]
    assert groups[0].transitions == frozenset(
        indexes("ccw-loop", ["init", "develop", "debug", "validate"])
    )


def test_ccw_loop_shared_transitions_are_drawn_once() -> None:
    """Each shared transition is one edge: out of the box to a state outside it, from the box's
    ``any`` point to a state inside it; none is drawn per source state any more."""
    machine = open_machine("ccw-loop")
    dot = to_dot(machine)
    edges = edge_lines(dot)
    shared = indexes("ccw-loop", ["init", "develop", "debug", "validate"])
    for index in shared:
        transition = machine.transitions[index]
        line = edges[f"t{index}"]
        assert line.startswith('"_any_0" -> '), line
        inside = transition.dest_from("init") in {"init", "develop", "debug", "validate"}
        assert ('ltail="cluster_states_0"' in line) != inside, line
        assert not any(key.startswith(f"t{index}_") for key in edges)
    from_box = [line for line in dot.splitlines() if line.strip().startswith('"_any_0" ->')]
    assert len(from_box) == len(shared) >= 9


def test_overlapping_source_lists_keep_their_own_edges() -> None:
    """issue-manager: the list shared by three transitions is the box; ``plan`` and ``list``,
    whose sources overlap it, are drawn per source state."""
    model = diagram_model(open_machine("issue-manager"))
    assert [group.states for group in state_groups(model)] == [("listing", "planning", "executing")]
    edges = edge_lines(to_dot(open_machine("issue-manager")))
    (plan,) = indexes("issue-manager", ["listing", "planning"])
    assert {f"t{plan}_listing", f"t{plan}_planning"} <= set(edges)


def test_boxed_states_keep_their_own_transitions() -> None:
    """counter: the three transitions from idle and counting make the box; ``spoil``, which
    leaves counting alone, stays an edge of counting."""
    from pathlib import Path

    from fsm.model.machine import load_machine

    counter = load_machine(Path(__file__).parent / "engine_machines" / "counter" / "machine.yaml")
    groups = state_groups(diagram_model(counter))
    assert [group.states for group in groups] == [("idle", "counting")]
    assert "t3_counting" in edge_lines(to_dot(counter))


def test_box_edge_shows_the_transition_total() -> None:
    """With a run overlay, a box edge counts the transition from every state of the box."""
    machine = open_machine("ccw-loop")
    develop = next(
        t.index for t in machine.transitions if t.event == "develop" and "init" in t.sources
    )
    overlay = RunOverlay(
        "develop",
        {"develop": 3},
        {develop: 3},
        {},
        edge_source_visits={(develop, "init"): 1, (develop, "develop"): 2},
    )
    line = edge_lines(to_dot(machine, run=overlay))[f"t{develop}"]
    assert 'label="develop ×3"' in line
    assert 'penwidth="2"' in line


@pytest.mark.parametrize("name", sorted(registered_machines()))
def test_bundled_diagrams_fit_a_page(name: str) -> None:
    """Every bundled machine's picture is at most a page wide (ccw-loop was 3,335 pt)."""
    svg = render(to_dot(open_machine(name)), "svg").decode("utf-8")
    match = re.search(r'<svg width="(\d+)pt"', svg)
    assert match is not None
    assert int(match.group(1)) <= PAGE_WIDTH_PT, f"{name} is {match.group(1)} pt wide"
