"""machine.yaml parses strictly and every name in it resolves in the registry."""

from __future__ import annotations

from pathlib import Path

from fsm_machines.ccw_loop import functions

from fsm.model.definition import MachineSpec, guard_name, parse_definition

MACHINE_YAML = Path(functions.__file__).with_name("machine.yaml")
WORK_EVENTS = {"develop", "fix", "validate", "debug"}


def _spec() -> MachineSpec:
    spec, _, problems = parse_definition(MACHINE_YAML.read_text())
    assert problems == []
    assert spec is not None
    return spec


def test_yaml_parses_without_problems() -> None:
    """The machine file passes the strict schema with zero problems."""
    spec = _spec()
    assert spec.name == "ccw-loop"
    assert spec.storage.document == "{state_dir}/{id}.json"
    assert spec.storage.id_prefix == "loop-v2"


def test_every_name_resolves() -> None:
    """Document, options, codec, guards, actions and hooks named in the YAML are registered."""
    spec = _spec()
    registry = functions.registry
    assert spec.document in registry.documents
    assert spec.options in registry.options_models
    assert spec.state.codec in registry.codecs
    guards = {guard_name(ref)[0] for t in spec.transitions for ref in t.guards}
    guards |= {name for group in spec.exclusive for name in group}
    assert guards <= set(registry.guards)
    actions = {a for t in spec.transitions for a in t.actions}
    assert spec.control is not None
    actions |= {a for c in spec.control.commands.values() for a in c.actions}
    assert actions <= set(registry.actions)
    hooks = {v for v in spec.hooks.model_dump().values() if v}
    assert hooks <= set(registry.hooks)


ITERATION_GUARDS = {"within_iteration_budget", "room_to_change", "room_to_run"}


def test_limit_guards_are_budget_guards() -> None:
    """The iteration and error limits are registered as budget guards."""
    guards = functions.registry.guards
    assert all(guards[name].budget for name in (*ITERATION_GUARDS, "within_error_budget"))


def test_every_work_transition_is_bounded() -> None:
    """Every develop/fix/validate/debug transition carries an iteration and the error budget;
    from the menu, develop and fix need room for the validation after them."""
    for transition in _spec().transitions:
        if transition.event not in WORK_EVENTS:
            continue
        guards = set(transition.guards)
        assert "within_error_budget" in guards
        assert guards & ITERATION_GUARDS
        if "menu" in transition.sources and transition.event in ("develop", "fix"):
            assert "room_to_change" in guards


def test_menu_choices_are_manual() -> None:
    """From the menu only the limits are automatic; the choices wait for a person."""
    automatic = {t.event for t in _spec().transitions if "menu" in t.sources and t.auto}
    assert automatic == {"give_up", "abort", "exhaust"}


def test_final_states_are_tagged() -> None:
    """completed is the success final state; failed and user_exit are failures."""
    states = _spec().states
    tags = {name: s.tags for name, s in states.items() if s.final}
    assert tags == {"completed": ["success"], "failed": ["failure"], "user_exit": ["failure"]}


def test_control_block_matches_the_dashboard() -> None:
    """start/pause/resume/stop accept exactly the statuses the dashboard API accepts."""
    spec = _spec()
    assert spec.control is not None
    commands = {name: (sorted(c.sources), c.dest) for name, c in spec.control.commands.items()}
    assert commands == {
        "start": (["created", "paused"], "running"),
        "pause": (["running"], "paused"),
        "resume": (["paused"], "running"),
        "stop": (["created", "paused", "running"], "failed"),
    }
    assert spec.control.owned == ["failure_reason", "completed_at"]
    # with the status and what it owns: every field the seeds call the API's
    assert spec.external_fields == [
        "loop_id",
        "title",
        "description",
        "max_iterations",
        "current_iteration",
        "created_at",
        "updated_at",
    ]
