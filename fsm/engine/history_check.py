"""``fsm check`` against history: the installed definition of a machine and the definitions its
instances in the workspace run under (their snapshots, :mod:`fsm.engine.definitions`).

For each earlier definition some instance runs under:

* of the same ``version:``: a state it had and the installed one lacks is an error when
  instances are in it (they cannot run: bump the version and map it in a migration);
* of another version: the installed file needs a migration from it when instances of it are
  still live (not in a final state); every state it had that the installed one lacks must be
  renamed by the migrations (to a state, or to ``null``: cannot migrate, an error when instances
  are in it); a final state must not become a non-final one (reopening is ``fsm retry``'s).

Each finding counts the live instances it concerns and names the first few.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fsm.base.errors import FsmError
from fsm.engine.definitions import stored_definition
from fsm.engine.migration import raw_state, recorded_of
from fsm.model.identity import same_version
from fsm.model.migrations import chain_from

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.definition import MachineSpec
    from fsm.model.machine import Machine
    from fsm.store.protocol import Folders

__all__ = ["check_history"]

NAMED = 3
"""Instances named in a finding (the rest counted)."""


@dataclass
class _Group:
    """The instances running under one earlier definition: their states."""

    version: int | str
    folders: Folders
    states: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))


def check_history(workspace: Workspace, machine: Machine) -> list[str]:
    """The errors of ``machine``'s installed definition against its instances' (one line each,
    without the file's name)."""
    groups: dict[tuple[str, str], _Group] = {}
    installed = machine.identity
    store = workspace.store_for(machine)
    for instance_id in sorted(store.list_ids()):
        try:
            instance = workspace.instance(machine, instance_id)
            recorded = recorded_of(instance)
            if recorded is None or (
                recorded.graph == installed.graph
                and same_version(recorded.version, installed.version)
            ):
                continue
            state = raw_state(instance)
        except FsmError:
            continue  # a document fsm cannot read is fsm replay's and fsm recover's business
        key = (str(recorded.version), recorded.graph)
        group = groups.setdefault(key, _Group(recorded.version, instance.folders))
        group.states[state].append(instance_id)
    findings: list[str] = []
    for (_, graph), group in groups.items():
        old = stored_definition(group.folders, machine.name, graph, store)
        label = f"{machine.name} {group.version} (graph {graph[:8]})"
        if old is None:
            count = sum(len(ids) for ids in group.states.values())
            findings.append(
                f"migrations: no snapshot of {label} is kept: the {count} instances under it "
                "cannot be checked"
            )
            continue
        findings += _against(machine.spec, old, label, group)
    return findings


def _against(new: MachineSpec, old: MachineSpec, label: str, group: _Group) -> list[str]:
    live = {s: ids for s, ids in group.states.items() if not _final(old, s)}
    removed = [s for s in old.states if s not in new.states]
    if same_version(group.version, new.version):
        return [
            f"states: state '{state}' of {label} is gone from the same version "
            f"{new.version}: {_instances(len(live[state]), live[state])} in it cannot run (bump "
            "the version and map it in a migration)"
            for state in removed
            if live.get(state)
        ]
    chain = chain_from(new, group.version)
    if chain is None:
        count = sum(len(ids) for ids in live.values())
        if not count:
            return []
        every = [i for ids in live.values() for i in ids]
        return [
            f"migrations: none from version {group.version}, and {_instances(count, every)} "
            f"run under {label} (add one, or finish them where version {group.version} runs)"
        ]
    findings: list[str] = []
    for state in removed:
        in_it = live.get(state, [])
        if state not in chain.states:
            findings.append(
                f"migrations: state '{state}' of {label} is removed and not mapped "
                f"({_instances(len(in_it), in_it)} in it)"
            )
        elif chain.states[state] is None and in_it:
            findings.append(
                f"migrations: state '{state}' of {label} cannot migrate (null), but "
                f"{_instances(len(in_it), in_it)} are in it"
            )
    for state, target in chain.states.items():
        if target is not None and _final(old, state) and not _final(new, target):
            findings.append(
                f"migrations: final state '{state}' of {label} becomes '{target}', which is not "
                "final (reopen finished instances with fsm retry)"
            )
    return findings


def _final(spec: MachineSpec, state: str) -> bool:
    found = spec.states.get(state)
    return found is not None and found.final


def _instances(count: int, ids: list[str]) -> str:
    """``2 live instances (a, b)``."""
    noun = "live instance" if count == 1 else "live instances"
    shown = ", ".join(ids[:NAMED]) + (", ..." if len(ids) > NAMED else "")
    return f"{count} {noun}" + (f" ({shown})" if shown else "")
