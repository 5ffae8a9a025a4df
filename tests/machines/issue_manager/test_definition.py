"""machine.yaml: strictly valid, every name registered, every loop bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fsm_machines.issue_manager import functions

from fsm.model.definition import MachineSpec, guard_name, parse_definition

MACHINE_YAML = Path(functions.__file__).with_name("machine.yaml")


@pytest.fixture(scope="module")
def spec() -> MachineSpec:
    """The parsed machine file."""
    parsed, _, problems = parse_definition(MACHINE_YAML.read_text(encoding="utf-8"))
    assert problems == []
    assert parsed is not None
    return parsed


def test_machine_file_has_no_problems() -> None:
    """The machine file parses with zero problems."""
    assert parse_definition(MACHINE_YAML.read_text(encoding="utf-8"))[2] == []


def test_every_name_is_registered(spec: MachineSpec) -> None:
    """Document, options, guards, actions, control actions and hooks all resolve."""
    registry = functions.registry
    assert spec.document in registry.documents
    assert spec.options in registry.options_models
    guards = {guard_name(g)[0] for t in spec.transitions for g in t.guards}
    actions = {a for t in spec.transitions for a in t.actions}
    assert spec.control is not None
    actions |= {a for c in spec.control.commands.values() for a in c.actions}
    hooks = {h for h in spec.hooks.model_dump().values() if h}
    assert guards - set(registry.guards) == set()
    assert actions - set(registry.actions) == set()
    assert hooks - set(registry.hooks) == set()
    assert hooks == {
        "create_instance",
        "record_error",
        "summarize",
        "record_history",
        "judge_outcome",
        "requirements",
        "reopen_issues",
    }


def _reaches(spec: MachineSpec, start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        state = todo.pop()
        if state == goal:
            return True
        if state in seen:
            continue
        seen.add(state)
        todo += [t.dest for t in spec.transitions if state in t.sources]
    return False


def test_every_transition_on_a_cycle_has_a_budget_guard(spec: MachineSpec) -> None:
    """A transition that can come back to its source carries a guard registered budget=True."""
    on_cycle = [t for t in spec.transitions if any(_reaches(spec, t.dest, s) for s in t.sources)]
    assert {t.event for t in on_cycle} == {"plan", "execute", "list"}
    for transition in on_cycle:
        budgets = [g for g in transition.guards if functions.registry.guards[g].budget]
        assert budgets, transition.event


def test_states_are_the_seed_phases_plus_failed(spec: MachineSpec) -> None:
    """The FSM states are the seed's phase enum plus failed; complete is the success end and
    failed the failure end."""
    assert list(spec.states) == ["init", "listing", "planning", "executing", "complete", "failed"]
    assert [name for name, s in spec.states.items() if s.final] == ["complete", "failed"]
    assert (spec.states["complete"].tags, spec.states["failed"].tags) == (["success"], ["failure"])


def test_only_a_backlog_with_every_issue_done_completes(spec: MachineSpec) -> None:
    """complete is guarded by every_issue_done and declared before fail, which takes the rest."""
    ends = [
        (t.event, t.dest, t.guards) for t in spec.transitions if t.dest in ("complete", "failed")
    ]
    assert ends == [("complete", "complete", ["every_issue_done"]), ("fail", "failed", [])]


def test_storage_and_control(spec: MachineSpec) -> None:
    """Instances live in .workflow/.scratchpad/{id}/; status is the control field."""
    assert spec.storage.document == ".workflow/.scratchpad/{id}/state.json"
    assert spec.storage.meta == ".workflow/.scratchpad/{id}/fsm"
    assert spec.storage.id_prefix == "issue-manager"
    assert spec.control is not None
    commands: dict[str, Any] = {
        name: (c.sources, c.dest, c.state) for name, c in spec.control.commands.items()
    }
    assert commands == {
        "start": (["pending"], "running", None),
        "pause": (["running"], "paused", None),
        "resume": (["paused", "stopped"], "running", None),
        "stop": (["pending", "running", "paused"], "stopped", None),
    }
