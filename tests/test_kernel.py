"""The engine's kernel (``transitions``) chooses and takes each step's transition.

The property test builds random machines and checks, for every state and trigger, that the
kernel takes exactly the transition of the declared-order rule (the first candidate whose guards
all hold), asks for the guards in the order the journal lists them (stopping at a transition's
first failing guard) and ends in the declared destination.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from fsm.base.errors import FsmError
from fsm.engine.engine import Engine, Kernel
from fsm.engine.instance import Instance
from fsm.model.definition import MachineSpec
from fsm.model.machine import GuardRef, Machine, Transition, resolve
from fsm.model.registry import Registry

GUARDS = ["g0", "g1", "g2"]
EVENTS = ["go", "skip", "halt"]


def _registry() -> Registry:
    registry = Registry()

    @registry.document
    class Doc(BaseModel):
        s: str = "s0"

    for name in GUARDS:
        # The test's attempt decides each guard's result; the functions only need to exist.
        registry.guard(name=name)(lambda doc, ctx: True)
    return registry


REGISTRY = _registry()


@st.composite
def machines(draw: st.DrawFn) -> Machine:
    """A machine of 2 to 5 states and up to 12 transitions with random events, sources,
    destinations (``=`` included), guards (negated ones included) and ``auto`` flags."""
    size = draw(st.integers(min_value=2, max_value=5))
    states = [f"s{i}" for i in range(size)]
    guard_refs = st.sampled_from([*GUARDS, *(f"not {g}" for g in GUARDS)])
    transitions = [
        {
            "event": draw(st.sampled_from(EVENTS)),
            "source": draw(st.lists(st.sampled_from(states), min_size=1, max_size=3, unique=True)),
            "dest": draw(st.sampled_from([*states, "="])),
            "guards": draw(st.lists(guard_refs, max_size=3)),
            "auto": draw(st.booleans()),
            "description": "a transition",
        }
        for _ in range(draw(st.integers(min_value=1, max_value=12)))
    ]
    spec = MachineSpec.model_validate(
        {
            "name": "random",
            "version": 1,
            "description": "a random machine",
            "module": "unused.py",
            "document": "Doc",
            "state": {"field": "s"},
            "initial": "s0",
            "storage": {"document": "{id}.json"},
            "states": {name: {"description": "a state"} for name in states},
            "transitions": transitions,
        }
    )
    machine, problems = resolve(spec, REGISTRY, Path("random.yaml"))
    assert machine is not None, problems
    return machine


@dataclass
class Scripted:
    """An attempt whose guards answer from a table; it records what the kernel asked."""

    results: dict[tuple[int, str], bool]
    asked: list[tuple[int, str]] = field(default_factory=list)
    entered: list[int] = field(default_factory=list)
    fail_in_actions: bool = False

    def guard(self, transition: Transition, guard: GuardRef) -> bool:
        self.asked.append((transition.index, guard.label))
        return self.results[(transition.index, guard.label)]

    def enter(self, transition: Transition) -> None:
        self.entered.append(transition.index)
        if self.fail_in_actions:
            raise RuntimeError("an action failed")


def declared_order(
    machine: Machine, state: str, event: str | None, results: dict[tuple[int, str], bool]
) -> tuple[Transition | None, list[tuple[int, str]]]:
    """The transition the engine's rule takes, and the guards it evaluates on the way."""
    asked: list[tuple[int, str]] = []
    for transition in machine.transitions:
        if state not in transition.sources:
            continue
        if (event is None and not transition.auto) or (
            event is not None and event != transition.event
        ):
            continue
        holds = True
        for guard in transition.guards:
            asked.append((transition.index, guard.label))
            if not results[(transition.index, guard.label)]:
                holds = False
                break
        if holds:
            return transition, asked
    return None, asked


@settings(max_examples=300, deadline=None)
@given(data=st.data(), machine=machines())
def test_the_kernel_takes_the_first_enabled_transition_in_declared_order(
    data: st.DataObject, machine: Machine
) -> None:
    """For every state and trigger, the kernel's choice, the guards it asks for and the state it
    ends in are those of the declared-order rule."""
    results = {
        (t.index, g.label): data.draw(st.booleans()) for t in machine.transitions for g in t.guards
    }
    kernel = Kernel(machine)
    for state in machine.states:
        for event in [None, *EVENTS]:
            attempt = Scripted(results)
            expected, asked = declared_order(machine, state, event, results)
            taken = kernel.take(state, event, attempt)
            assert taken is expected
            assert attempt.asked == asked
            if expected is None:
                assert attempt.entered == []
                assert kernel.state == state
            else:
                assert attempt.entered == [expected.index]
                assert kernel.state == expected.dest_from(state)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), machine=machines())
def test_an_action_that_raises_leaves_the_kernel_where_it_was(
    data: st.DataObject, machine: Machine
) -> None:
    """What the actions raise reaches the caller, and the kernel does not move."""
    results = {(t.index, g.label): True for t in machine.transitions for g in t.guards}
    kernel = Kernel(machine)
    state = data.draw(st.sampled_from(list(machine.states)))
    if not kernel.accepts(state, None):
        assert kernel.take(state, None, Scripted(results, fail_in_actions=True)) is None
        return
    with pytest.raises(RuntimeError, match="an action failed"):
        kernel.take(state, None, Scripted(results, fail_in_actions=True))
    assert kernel.state == state


def test_the_engine_step_is_the_kernel_s_move(make_counter: Any) -> None:
    """After a step, the engine's kernel is in the state the step wrote: the kernel took it."""
    from fsm.engine.control import ControlPlane

    instance: Instance = make_counter(limit=2)
    ControlPlane(instance).apply("start")
    engine = Engine(instance)
    result = engine.step()
    assert (result.source, result.state) == ("idle", "counting")
    assert engine.kernel.state == "counting"
    record = instance.journal.read().records[-1]
    assert (record["source"], record["dest"]) == ("idle", "counting")


def test_the_engine_takes_only_what_the_kernel_chooses(make_counter: Any) -> None:
    """A kernel that finds no enabled transition makes the step wait, whatever the guards
    would say: the engine does not choose on its own."""
    from fsm.engine.control import ControlPlane

    instance: Instance = make_counter(limit=2)
    ControlPlane(instance).apply("start")
    engine = Engine(instance)

    class Refusing(Kernel):
        def take(self, state: str, event: str | None, attempt: Any) -> Transition | None:
            return None

    engine.kernel = Refusing(instance.machine)
    assert engine.step().outcome == "waiting"
    assert engine.instance.load().state == "idle"


def test_a_kernel_move_the_machine_does_not_declare_is_an_internal_error(
    counter: Machine,
) -> None:
    """The kernel's move is checked against the declared destination: a kernel whose graph
    disagrees with the machine is reported, not followed."""
    kernel = Kernel(counter)
    (counted,) = [t for t in counter.transitions if t.event == "count"]
    for kernel_transition in kernel._machine.events["event:count"].transitions["idle"]:
        kernel_transition.dest = "done"
    results = {(counted.index, g.label): True for g in counted.guards}
    with pytest.raises(FsmError, match="internal error: the kernel moved from 'idle' to 'done'"):
        kernel.take("idle", "count", Scripted(results))
