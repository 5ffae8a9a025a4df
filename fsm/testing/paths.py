"""Generated paths: for each edge of a machine, the shortest scripted scenario that takes it.

:func:`explore` searches, breadth first, over what a test may do to an instance (creation inputs,
automatic steps, manual events, control commands) and what its actions' agents and commands may
answer (:class:`Answers`: options per call, with defaults for agents, shell commands and programs:
exit 0 with a file edited or with none, exit 1, a timeout). Every path runs from scratch on the
real engine, in memory (:class:`~fsm.testing.MemoryStorage`), with a
:class:`~fsm.testing.ScriptedExecutor`. Answers are chosen call by call: a path's calls beyond its
script take their first option, and each later option of each such call becomes a sibling path.

Documents are abstracted by the state, the control status and the values of the guards of the
transitions leaving the state: a path reaching an abstract state already seen is not branched
again, only stepped on (up to ``loop_limit`` times: a budget loop runs until its guard flips).
The search ends when every edge is taken, or at ``depth`` moves, ``runs`` paths or ``seconds``;
what it did not take it names, with the reason :mod:`fsm.coverage.report` gives.

:func:`write_tests` turns the shortest path to each edge into a plain pytest test: a harness,
the scripted answers, the moves, then the path and the document the search saw, asserted.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fsm.base.errors import FsmError
from fsm.coverage.tally import Edge, Tally, targets_of
from fsm.model.machine import Machine
from fsm.model.records import ControlRecord, TransitionRecord
from fsm.store.memory import MemoryStorage
from fsm.testing._driver import Driver
from fsm.testing._harness import Harness
from fsm.testing._path_model import (
    DEFAULT_ANSWERS,
    Answers,
    Exploration,
    Move,
    Option,
    Scenario,
    agent_says,
    edits,
)
from fsm.testing._path_writer import write_tests
from fsm.testing._scripted import Answer, Call, Reply, ScriptedExecutor

__all__ = [
    "DEFAULT_ANSWERS",
    "Answers",
    "Exploration",
    "Option",
    "Scenario",
    "agent_says",
    "edits",
    "explore",
    "input_variants",
    "write_tests",
]


@dataclass
class _Run:
    calls: list[tuple[int, int]] = field(default_factory=list)
    """(rule, option) of each call, in order."""


class _Replay:
    """Runs one path on a fresh harness."""

    def __init__(self, exploration: Exploration, path: Scenario) -> None:
        self.x = exploration
        self.path = path
        self.run = _Run()
        executor = ScriptedExecutor()
        # The last rule added answers first: defaults first, the machine's own after them.
        for index in reversed(range(len(exploration.answers))):
            rule = exploration.answers[index]
            chooser = self._chooser(index)
            if rule.kind == "agent":
                executor.on_agent(rule.tool, chooser, match=rule.match)
            elif rule.kind == "shell":
                executor.on_shell(chooser, match=rule.match)
            else:
                executor.on_run(chooser, match=rule.match, program=rule.tool)
        self.harness: Harness[Any] = Harness(
            exploration.machine, storage=MemoryStorage(), executor=executor
        )

    def _chooser(self, rule: int) -> Answer:
        def choose(call: Call) -> Reply | None:
            position = len(self.run.calls)
            choices = self.path.choices
            option = choices[position] if position < len(choices) else 0
            self.run.calls.append((rule, option))
            answer = self.x.answers[rule].options[option].answer()
            return answer(call) if callable(answer) else answer

        return choose

    def play(self) -> Driver[Any] | None:
        """The driver after the path's moves; None when a move was refused."""
        for name, text in self.x.files.items():
            target = self.harness.root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        try:
            driver = self.harness.create(self.x.inputs[self.path.inputs])
            for move in self.path.moves:
                if move[0] == "step":
                    driver.step()
                elif move[0] == "fire":
                    driver.fire(move[1])
                else:
                    driver.control(move[1])
        except FsmError:
            return None
        return driver

    def close(self) -> None:
        self.harness.close()


def _abstract(machine: Machine, driver: Driver[Any]) -> tuple[Any, ...]:
    """State, status and the values of the guards deciding at the state."""
    loaded = driver.instance.peek()
    ctx = driver.instance.context()
    vector: list[bool | None] = []
    for transition in machine.transitions_from(loaded.state):
        tctx = ctx.for_transition(
            transition.event, loaded.state, transition.dest_from(loaded.state)
        )
        for guard in transition.guards:
            try:
                vector.append(guard.holds(loaded.doc, tctx))
            except Exception:  # a guard that raises decides too: its value is "raised"
                vector.append(None)
    return (loaded.state, loaded.status, tuple(vector))


def _moves(machine: Machine, driver: Driver[Any]) -> list[Move]:
    loaded = driver.instance.peek()
    moves: list[Move] = [("step",)]
    manual = [t.event for t in machine.transitions_from(loaded.state) if not t.auto]
    moves.extend(("fire", event) for event in dict.fromkeys(manual))
    control = machine.spec.control
    if control is not None and not machine.is_final(loaded.state):
        moves.extend(
            ("control", command)
            for command, spec in control.commands.items()
            if loaded.status in spec.sources
        )
    return moves


def explore(
    machine: Machine,
    *,
    inputs: Sequence[Mapping[str, Any]] | None = None,
    files: Mapping[str, str] | None = None,
    answers: Sequence[Answers] = (),
    depth: int = 30,
    runs: int = 5000,
    seconds: float = 60.0,
    loop_limit: int = 30,
    key: Callable[[Any], Hashable] | None = None,
) -> Exploration:
    """Search for the shortest scripted path to each edge of ``machine`` (module docstring).

    ``inputs``: creation inputs to try (each a root of the search; default:
    :func:`input_variants`); ``files``: written into the
    workspace before creating (a path relative to it -> its text); ``answers``: the machine's
    own answer options, tried before :data:`DEFAULT_ANSWERS`. ``key``: a function of the
    document refining the abstract state (each set of inputs is searched apart already).
    """
    x = Exploration(
        machine,
        [dict(i) for i in inputs] if inputs is not None else input_variants(machine),
        dict(files or {}),
        (*answers, *DEFAULT_ANSWERS),
        {},
        Tally(),
    )
    declared = targets_of(machine)
    targets = set(declared.edges)
    commands = set(declared.control)
    finals = frozenset(name for name, state in machine.states.items() if state.final)
    started = time.monotonic()
    queue = deque(Scenario(index, (), ()) for index in range(len(x.inputs)))
    seen: set[tuple[Any, ...]] = set()
    while queue and not (targets <= set(x.best) and commands <= set(x.control)):
        if x.runs >= runs or time.monotonic() - started > seconds:
            x.truncated = True
            break
        path = queue.popleft()
        x.runs += 1
        replay = _Replay(x, path)
        try:
            driver = replay.play()
            if driver is None:
                continue
            records = driver.records()
            x.tally.add(str(x.runs), records, finals)
            calls = replay.run.calls
            states = driver.path()
            for record in records:
                if isinstance(record, TransitionRecord):
                    edge = Edge(record.source, record.event, record.dest, record.transition)
                    if edge not in x.best:
                        x.best[edge] = (path, list(calls), states, driver.data)
                elif isinstance(record, ControlRecord) and record.status_from is not None:
                    given = (record.event, record.status_from)
                    if given in commands and given not in x.control:
                        x.control[given] = (path, list(calls), states, driver.data)
            # Siblings: each later option of each call the path did not script.
            for position in range(len(path.choices), len(calls)):
                rule, _ = calls[position]
                padding = (0,) * (position - len(path.choices))
                for option in range(1, len(x.answers[rule].options)):
                    queue.append(
                        Scenario(path.inputs, path.moves, (*path.choices, *padding, option))
                    )
            if machine.is_final(driver.state) or len(path.moves) >= depth:
                continue
            abstract = (path.inputs, *_abstract(machine, driver))
            if key is not None:
                abstract += (key(driver.doc),)
            fixed = (*path.choices, *(0,) * (len(calls) - len(path.choices)))
            if abstract in seen:
                if path.moves and path.repeats < loop_limit and len(records) > path.before:
                    again = (*path.moves, ("step",))
                    queue.append(
                        Scenario(path.inputs, again, fixed, path.repeats + 1, len(records))
                    )
                continue
            seen.add(abstract)
            queue.extend(
                Scenario(path.inputs, (*path.moves, move), fixed, 0, len(records))
                for move in _moves(machine, driver)
            )
        finally:
            replay.close()
    x.seconds = time.monotonic() - started
    return x


def input_variants(machine: Machine) -> list[dict[str, Any]]:
    """Creation inputs worth trying when none are given: the defaults, then, one field at a
    time, an integer at its lower bound, a flag flipped, a list emptied. A field without a
    default makes no variant (give ``inputs``)."""
    model = machine.inputs_model
    if model is None:
        return [{}]
    variants: list[dict[str, Any]] = [{}]
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        bounds = [getattr(m, "ge", None) for m in info.metadata]
        if isinstance(default, bool):
            variants.append({name: not default})
        elif isinstance(default, int) and not isinstance(default, bool):
            low = next((b for b in bounds if isinstance(b, int)), None)
            if low is not None and low != default:
                variants.append({name: low})
        elif isinstance(default, list) and default:
            variants.append({name: []})
    return variants
