"""machine.yaml: it parses, names only registered functions, and bounds its loop."""

from __future__ import annotations

from pathlib import Path

from fsm_machines.skill_tuning.functions import registry

from fsm.model.definition import MachineSpec, guard_name, parse_definition

MACHINE_YAML = Path(__file__).parents[3] / "machines" / "skill_tuning" / "machine.yaml"


def _spec() -> MachineSpec:
    spec, _loaded, problems = parse_definition(MACHINE_YAML.read_text(encoding="utf-8"))
    assert problems == []
    assert spec is not None
    return spec


def test_definition_parses_without_problems() -> None:
    """The machine file passes the strict schema with zero problems."""
    spec = _spec()
    assert (spec.name, spec.module, spec.initial) == (
        "skill-tuning",
        "fsm_machines.skill_tuning.functions",
        "pending",
    )


def test_every_name_in_the_definition_is_registered() -> None:
    """Every guard, action, hook, codec and model the file names exists in the registry."""
    spec = _spec()
    guards = {guard_name(ref)[0] for t in spec.transitions for ref in t.guards}
    actions = {a for t in spec.transitions for a in t.actions}
    actions |= {
        a for c in (spec.control.commands.values() if spec.control else []) for a in c.actions
    }
    hooks = {name for name in spec.hooks.model_dump().values() if name}
    assert guards <= set(registry.guards)
    assert actions <= set(registry.actions)
    assert hooks <= set(registry.hooks)
    assert spec.state.codec in registry.codecs
    assert spec.document in registry.documents
    assert spec.options in registry.options_models


def test_storage_follows_the_spec() -> None:
    """Instances live in .workflow/.scratchpad/{id}/ with ids prefixed skill-tuning."""
    storage = _spec().storage
    assert storage.document == ".workflow/.scratchpad/{id}/state.json"
    assert storage.meta == ".workflow/.scratchpad/{id}/fsm"
    assert storage.id_prefix == "skill-tuning"


def test_termination_checks_come_first_in_order() -> None:
    """Errors are checked before iterations, both before any other transition; the iteration
    limit ends in completed only when the gate passed, else in failed."""
    first, second, third = _spec().transitions[:3]
    assert (first.event, first.source, first.dest, first.guards) == (
        "abort",
        "*",
        "failed",
        ["errors_exhausted"],
    )
    assert (second.event, second.source, second.dest, second.guards) == (
        "finish",
        "*",
        "completed",
        ["iterations_exhausted", "gate_passed"],
    )
    assert (third.event, third.source, third.dest, third.guards) == (
        "exhaust",
        "*",
        "failed",
        ["iterations_exhausted", "not gate_passed"],
    )


def test_only_a_passed_gate_leads_to_completed() -> None:
    """Every transition into the success state is guarded by gate_passed."""
    into_success = [t for t in _spec().transitions if t.dest == "completed"]
    assert into_success and all("gate_passed" in t.guards for t in into_success)


def test_the_loop_back_is_bounded_by_a_budget_guard() -> None:
    """The only transition back into the round carries a budget guard; so do the limit checks."""
    spec = _spec()
    [back] = [t for t in spec.transitions if t.dest == "running" and t.source != "pending"]
    assert any(registry.guards[guard_name(g)[0]].budget for g in back.guards)
    for name in ("errors_exhausted", "iterations_exhausted", "iterations_left"):
        assert registry.guards[name].budget


def test_final_states_are_tagged() -> None:
    """completed, failed and user_exit are the final states, tagged success and failure."""
    spec = _spec()
    assert {name for name, s in spec.states.items() if s.final} == {
        "completed",
        "failed",
        "user_exit",
    }
    assert spec.states["completed"].tags == ["success"]
    assert spec.states["failed"].tags == ["failure"]


def test_control_block_lives_on_status() -> None:
    """start/pause/resume/stop act on status; stop ends the instance in user_exit."""
    control = _spec().control
    assert control is not None
    assert (control.field, control.active) == ("status", "running")
    assert control.commands["stop"].state == "user_exit"
    assert control.commands["start"].sources == ["pending"]
