"""What the pages and the API show, read from the workspace on each request.

Nothing is cached but the machines and their static diagrams: a listing reads the documents,
keeps one row per instance and only the documents of the rows it shows (for their progress),
and drops them when the answer is sent, so the server holds no more than what it shows.
"""

from __future__ import annotations

import inspect as pyinspect
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from fsm.base.errors import FsmError, UnknownInstanceError, UnknownMachineError
from fsm.engine.instance import Instance, Workspace
from fsm.model.definition import did_you_mean
from fsm.model.machine import Machine
from fsm.model.settings import input_settings, option_settings
from fsm.store.protocol import Store
from fsm.view import diagram
from fsm.view.inspect import status
from fsm.view.listing import ListedInstance, list_instances

__all__ = ["Served", "history", "instance_rows", "instance_status", "machine_view"]

MAX_PAGE = 500


@dataclass
class Served:
    """The workspace and the machines one server shows."""

    workspace: Workspace
    machines: dict[str, Machine]
    sources: dict[str, str] = field(default_factory=dict)
    _svg: dict[str, bytes] = field(default_factory=dict)
    # Graphviz keeps global state in C: one drawing at a time, whatever the request thread.
    _render_lock: threading.Lock = field(default_factory=threading.Lock)

    def machine(self, name: str) -> Machine:
        """The served machine named ``name``."""
        found = self.machines.get(name)
        if found is None:
            raise UnknownMachineError(
                f"unknown machine '{name}'{did_you_mean(name, self.machines)}; "
                f"this server shows {', '.join(sorted(self.machines)) or 'no machine'}"
            )
        return found

    def instance(self, machine: str, instance_id: str) -> Instance:
        """The existing instance ``instance_id`` of ``machine`` (the id is checked first)."""
        resolved = self.machine(machine)
        instance = self.workspace.instance(resolved, instance_id)
        if not instance.exists():
            raise UnknownInstanceError(f"no {resolved.name} instance '{instance_id}'")
        return instance

    def render(self, dot: str) -> bytes:
        """``dot`` drawn as SVG."""
        with self._render_lock:
            return diagram.render(dot, "svg")

    def machine_svg(self, name: str) -> bytes:
        """The machine's diagram (drawn once: it depends on the definition only)."""
        machine = self.machine(name)
        if name not in self._svg:
            self._svg[name] = self.render(diagram.to_dot(machine))
        return self._svg[name]

    def instance_svg(self, instance: Instance) -> bytes:
        """The instance's diagram: current state, visit counts, untaken edges dimmed."""
        loaded = instance.load_unchecked()
        overlay = diagram.overlay_from_journal(instance.journal.records(), loaded.state)
        return self.render(diagram.to_dot(instance.machine, run=overlay))


def instance_rows(
    served: Served,
    machine: str | None = None,
    status_filter: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> dict[str, Any]:
    """A page of ``fsm ls``, newest first, each row with its machine's progress lines."""
    machines = [served.machine(machine)] if machine else list(served.machines.values())
    rows = list_instances(served.workspace, machines, status_filter)
    shown = rows[offset : offset + min(limit, MAX_PAGE)]
    stores: dict[str, Store | None] = {}
    listed = []
    for row in shown:
        item = row.to_json()
        item["progress"] = _progress(served, row, stores)
        listed.append(item)
    return {"total": len(rows), "offset": offset, "rows": listed}


def _progress(
    served: Served, row: ListedInstance, stores: dict[str, Store | None]
) -> dict[str, str]:
    """The summary lines of the row's document ({} when it has none or cannot be read)."""
    machine = served.machines.get(row.machine)
    hook = machine.hooks.summary if machine is not None else None
    if machine is None or hook is None or row.error is not None:
        return {}
    if row.machine not in stores:
        try:
            stores[row.machine] = served.workspace.store_for(machine)
        except FsmError:
            stores[row.machine] = None
    store = stores[row.machine]
    if store is None:
        return {}
    try:
        doc = machine.document_model.model_validate(store.read(row.id).data)
        return {str(key): str(value) for key, value in hook(doc).items()}
    except (OSError, ValueError, ValidationError, FsmError):
        return {}  # changed or removed since it was listed: the next update shows it
    except Exception:  # a machine's broken summary hook must not break the whole list
        return {}


def instance_status(instance: Instance) -> dict[str, Any]:
    """``fsm status --json``."""
    return status(instance).to_json()


def history(instance: Instance, limit: int) -> dict[str, Any]:
    """The latest ``limit`` journal records, oldest first, read from the journal's end."""
    records: list[dict[str, Any]] = []
    more = False
    for record in instance.journal.backwards():
        if len(records) == limit:
            more = True
            break
        records.append(record)
    records.reverse()
    return {"records": records, "more": more}


def statuses_of(machine: Machine) -> list[str]:
    """Every control status the machine's documents may have, in a stable order."""
    found: list[str] = []
    control = machine.spec.control
    if control is not None:
        for command in control.commands.values():
            found.extend([*command.sources, command.dest])
    found.extend(state.status for state in machine.states.values() if state.status)
    return list(dict.fromkeys(found))


def machine_view(served: Served, name: str) -> dict[str, Any]:
    """Everything the machine page shows but the diagram."""
    machine = served.machine(name)
    spec = machine.spec
    control = spec.control
    inputs = input_settings(machine) if machine.inputs_model is not None else None
    return {
        "name": machine.name,
        "description": spec.description,
        "version": str(spec.version),
        "source": served.sources.get(name, str(machine.path)),
        "initial": spec.initial,
        "statuses": statuses_of(machine),
        "states": [
            {
                "name": state_name,
                "description": state.description,
                "final": state.final,
                "tags": list(state.tags),
                "outcome": _outcome(machine, state_name),
            }
            for state_name, state in spec.states.items()
        ],
        "transitions": [_transition(machine, index) for index in range(len(machine.transitions))],
        "control": None
        if control is None
        else {
            "field": control.field,
            "commands": [
                {
                    "name": command_name,
                    "sources": command.sources,
                    "dest": command.dest,
                    "state": command.state,
                    "description": command.description,
                }
                for command_name, command in control.commands.items()
            ],
        },
        "options": [setting.to_json() for setting in option_settings(machine)],
        "inputs": None if inputs is None else [setting.to_json() for setting in inputs],
        "schema": machine.document_model.model_json_schema(by_alias=True),
    }


def _outcome(machine: Machine, state: str) -> Literal["success", "failure"] | None:
    if not machine.is_final(state):
        return None
    return "success" if machine.is_success(state) else "failure"


def _transition(machine: Machine, index: int) -> dict[str, Any]:
    transition = machine.transitions[index]
    return {
        "index": transition.index,
        "event": transition.event,
        "sources": list(transition.sources),
        "dest": transition.dest,
        "auto": transition.auto,
        "description": transition.description,
        "guards": [
            {"label": guard.label, "doc": _first_line(guard.info.func)}
            for guard in transition.guards
        ],
        "actions": [
            {"name": name, "doc": _first_line(action)} for name, action in transition.actions
        ],
    }


def _first_line(func: object) -> str:
    doc = pyinspect.getdoc(func) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")
