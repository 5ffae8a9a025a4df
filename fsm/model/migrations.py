"""Migrations as data: how an instance of an earlier ``version:`` becomes one of the installed.

A machine file lists its ``migrations:``, oldest first; each says what changed from its ``from``
version to the next one (the next entry's ``from``, or the file's own ``version`` for the last)::

    version: 3
    migrations:
      - from: 1
        states: {validating: validate}
      - from: 2
        states: {legacy_debug: debug, paused_menu: null}   # null: cannot migrate
        events: {retest: validate}    # old event names, for history and diagrams
        update: upgrade_v2            # a registered hook (data, ctx) -> Update

An instance recorded under version 1 takes both in turn: its state is renamed by the first
mapping, then by the second (a state a mapping does not name keeps its name), and the hooks run
on the document's JSON data, in order, before the state is written. The result must be a state
of the installed definition and a document its model validates, or nothing is migrated.

:func:`plan` works out one instance's migration without changing anything; the engine applies it
(:mod:`fsm.engine.migration`) as one ``migrate`` journal record with its JSON Patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fsm.model.identity import same_version

if TYPE_CHECKING:
    from fsm.model.definition import MachineSpec, MigrationSpec

__all__ = ["MIGRATION", "Chain", "chain_from", "edge_map", "mapping_text", "rename_state"]

MIGRATION = "migration"
"""The key of a ``migrate`` record's details in ``extra``: ``from`` and ``to`` versions,
``states`` (old name to new, for every state renamed), ``events`` and ``edges`` (old transition
index, as text, to the new index), which history and diagrams read across the boundary."""


@dataclass(frozen=True)
class Chain:
    """The migrations that take an instance of version ``start`` to the installed version."""

    start: int | str
    end: int | str
    steps: tuple[MigrationSpec, ...]
    states: dict[str, str | None] = field(default_factory=dict)
    """Every state any step names, composed: old name to installed name (None: cannot)."""
    events: dict[str, str] = field(default_factory=dict)


def chain_from(spec: MachineSpec, version: int | str) -> Chain | None:
    """The migrations from ``version`` to ``spec``'s own version (None when none starts at
    ``version``)."""
    found = next(
        (i for i, m in enumerate(spec.migrations) if same_version(m.from_version, version)), None
    )
    if found is None:
        return None
    steps = tuple(spec.migrations[found:])
    states: dict[str, str | None] = {}
    events: dict[str, str] = {}
    for step in steps:
        for old, new in list(states.items()):  # earlier renames follow this step's
            if new is not None and new in step.states:
                states[old] = step.states[new]
        for old, new in step.states.items():
            states.setdefault(old, new)
        for old_event, new_event in list(events.items()):
            events[old_event] = step.events.get(new_event, new_event)
        for old_event, new_event in step.events.items():
            events.setdefault(old_event, new_event)
    return Chain(version, spec.version, steps, states, events)


def rename_state(chain: Chain, state: str) -> str | None:
    """The installed name of ``state`` of the chain's first version (None: it cannot migrate)."""
    return chain.states.get(state, state)


def edge_map(old: MachineSpec, new: MachineSpec, chain: Chain) -> dict[str, int]:
    """Each transition index of ``old`` (as text) that the installed definition ``new`` still
    has: same event (renamed), same sources and destination (renamed), first match in order."""
    found: dict[str, int] = {}

    def states(names: list[str]) -> tuple[str | None, ...]:
        return tuple(n if n == "*" else rename_state(chain, n) for n in names)

    keyed: dict[tuple[Any, ...], int] = {}
    for index, transition in enumerate(new.transitions):
        key = (transition.event, tuple(transition.sources), transition.dest)
        keyed.setdefault(key, index)
    for index, transition in enumerate(old.transitions):
        event = chain.events.get(transition.event, transition.event)
        dest = transition.dest if transition.dest == "=" else rename_state(chain, transition.dest)
        match = keyed.get((event, states(transition.sources), dest))
        if match is not None:
            found[str(index)] = match
    return found


def mapping_text(mapping: Mapping[str, Any]) -> str:
    """``a -> b, c -> (cannot migrate)``."""
    return ", ".join(
        f"{old} -> {'(cannot migrate)' if new is None else new}" for old, new in mapping.items()
    )
