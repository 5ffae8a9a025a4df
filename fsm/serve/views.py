"""What the pages and the API show, read from the workspace on each request.

Nothing is cached but the machines and their static diagrams: a listing reads the documents,
keeps one row per instance and only the documents of the rows it shows (for their progress),
and drops them when the answer is sent, so the server holds no more than what it shows.
"""

from __future__ import annotations

import inspect as pyinspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from pydantic import ValidationError

from fsm.base import jsonio
from fsm.base.clock import iso_utc
from fsm.base.errors import FsmError, InputError, UnknownInstanceError, UnknownMachineError
from fsm.engine.instance import Instance, Workspace
from fsm.model.definition import did_you_mean
from fsm.model.machine import Machine
from fsm.model.settings import input_settings, option_settings
from fsm.serve.row_index import RowIndex
from fsm.serve.travel import latest_records
from fsm.store.protocol import Store
from fsm.view import diagram
from fsm.view.inspect import status
from fsm.view.listing import ListedInstance, list_instances, matches
from fsm.view.listing_filters import declared_statuses

__all__ = [
    "Filters",
    "Served",
    "history",
    "instance_rows",
    "instance_status",
    "machine_view",
    "summary_of",
]

MAX_PAGE = 500


@dataclass
class Served:
    """The workspace and the machines one server shows."""

    workspace: Workspace
    machines: dict[str, Machine]
    sources: dict[str, str] = field(default_factory=dict)
    index: RowIndex | None = None
    """The listing's rows kept current by the change feed (set by the application)."""
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
        records = diagram.journal_records(instance.journal)
        overlay = diagram.overlay_from_journal(records, loaded.state)
        return self.render(diagram.to_dot(instance.machine, run=overlay))


OUTCOMES = ("success", "failure", "none")
"""Values of the outcome filter: ended with success, ended with failure, not ended."""
SORTS = ("updated", "id", "machine", "title", "state", "status", "progress", "outcome")
"""The columns the listing sorts by (``sort=``; ``-`` first: descending). ``title`` and
``progress`` read every matching document; the others sort the rows as listed."""


@dataclass(frozen=True)
class Filters:
    """What the instances page asks for (every one optional)."""

    machine: str | None = None
    status: str | None = None
    outcome: str | None = None
    text: str | None = None
    """Words looked for in the id, the document's title and the outcome's reason."""
    since: str | None = None
    """Only instances updated at or after this time (ISO 8601 date or date and time)."""
    sort: str | None = None
    """A column of :data:`SORTS`, ``-`` first for descending (default: newest first)."""


def instance_rows(
    served: Served,
    filters: Filters | None = None,
    limit: int = 100,
    offset: int = 0,
    private: Callable[[str, str], bool] | None = None,
) -> dict[str, Any]:
    """A page of ``fsm ls``, newest first, each row with its machine's progress lines.

    A filter value no row could ever match is refused (InputError, HTTP 400) with the closest
    value and the list of them, as ``fsm ls --status`` does. ``private(machine, id)`` tells
    which rows to show without their details (their document is not for this client)."""
    filters = filters or Filters()
    if filters.machine and filters.machine not in served.machines:
        names = ", ".join(sorted(served.machines)) or "no machine"
        suggestion = did_you_mean(filters.machine, served.machines)
        raise InputError(
            f"unknown machine '{filters.machine}' for machine{suggestion}; this server shows "
            f"{names}"
        )
    if filters.outcome and filters.outcome not in OUTCOMES:
        suggestion = did_you_mean(filters.outcome, OUTCOMES)
        raise InputError(
            f"unknown outcome '{filters.outcome}' for outcome{suggestion}; the outcomes are: "
            f"{', '.join(OUTCOMES)}"
        )
    since = _since(filters.since) if filters.since else None
    column, descending = _sort_of(filters.sort)
    machines = (
        [served.machine(filters.machine)] if filters.machine else list(served.machines.values())
    )
    every = (
        served.index.listing(machines)
        if served.index is not None
        else list_instances(served.workspace, machines)
    )
    if filters.status:
        _check_status(filters.status, machines, every)
    stores: dict[str, Store | None] = {}
    others = (
        [
            row
            for row in every
            if _outcome_matches(row, filters.outcome) and (since is None or row.updated >= since)
        ]
        if filters.outcome or since
        else every
    )
    if filters.text:
        others = [row for row in others if _text_matches(served, row, filters.text, stores)]
    counts: dict[str, int] = {}
    for row in others:
        key = row.status if row.error is None and row.status else "-"
        counts[key] = counts.get(key, 0) + 1
    rows = [row for row in others if matches(row, filters.status)] if filters.status else others
    if column != "updated" or not descending:
        rows = _sorted(served, rows, column, descending, stores)
    shown = rows[offset : offset + min(limit, MAX_PAGE)]
    listed = []
    for row in shown:
        if private is not None and private(row.machine, row.id):
            item = {**dict.fromkeys(vars(row)), "machine": row.machine, "id": row.id}
            item.update(updated=row.updated, progress={}, title=None, private=True)
        else:
            item = dict(vars(row))  # its fields, all scalars: no deep copy (asdict)
            title, item["progress"] = (
                served.index.remembered(row, partial(_details, served, row, stores))
                if served.index is not None
                else _details(served, row, stores)
            )
            item["title"] = title
        listed.append(item)
    return {"total": len(rows), "offset": offset, "rows": listed, "counts": counts}


def _sort_of(text: str | None) -> tuple[str, bool]:
    """The column and direction of ``sort=`` (default: updated, newest first)."""
    if not text:
        return "updated", True
    descending = text.startswith("-")
    column = text.removeprefix("-")
    if column not in SORTS:
        raise InputError(
            f"unknown sort '{column}' for sort{did_you_mean(column, SORTS)}; the columns are: "
            f"{', '.join(SORTS)} ('-' first: descending)"
        )
    return column, descending


def _sorted(
    served: Served,
    rows: list[ListedInstance],
    column: str,
    descending: bool,
    stores: dict[str, Store | None],
) -> list[ListedInstance]:
    """``rows`` sorted by ``column``; ties keep the listing's order (newest first), and rows
    without a value go last either way."""

    def key(row: ListedInstance) -> str:
        if column == "title":
            return _title(served, row, stores).casefold()
        if column == "progress":
            return " ".join(_progress(served, row, stores).values())
        if column == "outcome":
            return f"{row.outcome or ''} {row.reason or row.error or ''}".strip()
        value = getattr(row, column)
        return str(value).casefold() if value is not None else ""

    keyed = [(key(row), row) for row in rows]
    present = sorted(
        (pair for pair in keyed if pair[0]), key=lambda pair: pair[0], reverse=descending
    )
    return [row for _, row in present] + [row for value, row in keyed if not value]


def _check_status(status: str, machines: list[Machine], rows: list[ListedInstance]) -> None:
    known: dict[str, None] = {}
    for machine in machines:
        known.update(dict.fromkeys(declared_statuses(machine)))
    known.update(dict.fromkeys(row.status for row in rows if row.status))
    if status not in known:
        raise InputError(
            f"unknown status '{status}' for status{did_you_mean(status, known)}; the statuses "
            f"are: {', '.join(known) or 'none (no shown machine has a control status)'}"
        )


def _outcome_matches(row: ListedInstance, outcome: str | None) -> bool:
    if outcome is None:
        return True
    if outcome == "none":
        return row.outcome is None
    return row.outcome == outcome


def _since(text: str) -> str:
    """``text`` (an ISO 8601 date, or date and time, UTC unless it says) as the rows' text of
    a time, which compares as the times do."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"since={text!r} is not a date or time: give one such as 2026-01-31 or "
            "2026-01-31T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return iso_utc(moment.astimezone(UTC))


def _text_matches(
    served: Served, row: ListedInstance, text: str, stores: dict[str, Store | None]
) -> bool:
    """Whether every word of ``text`` is in the row's id, reason or document title."""
    words = text.casefold().split()
    known = f"{row.id} {row.reason or ''} {row.error or ''}".casefold()
    missing = [word for word in words if word not in known]
    if not missing:
        return True
    title = _title(served, row, stores).casefold()
    return all(word in title for word in missing)


def _title(served: Served, row: ListedInstance, stores: dict[str, Store | None]) -> str:
    store = _store(served, row.machine, stores)
    if store is None:
        return ""
    found = store.listed(row.id)
    try:
        data = jsonio.loads_quick(found.raw) if found.raw is not None else None
    except ValueError:
        return ""
    title = data.get("title") if isinstance(data, dict) else None
    return title if isinstance(title, str) else ""


def _store(served: Served, name: str, stores: dict[str, Store | None]) -> Store | None:
    if name not in stores:
        machine = served.machines.get(name)
        try:
            stores[name] = None if machine is None else served.workspace.store_for(machine)
        except FsmError:
            stores[name] = None
    return stores[name]


def _details(
    served: Served, row: ListedInstance, stores: dict[str, Store | None]
) -> tuple[str | None, dict[str, str]]:
    """The row's title and progress lines, from one read of its document."""
    machine = served.machines.get(row.machine)
    store = _store(served, row.machine, stores)
    if machine is None or store is None or row.error is not None:
        return None, {}
    try:
        data = store.read(row.id).data
    except (OSError, ValueError, FsmError):
        return None, {}  # changed or removed since it was listed: the next update shows it
    title = data.get("title") if isinstance(data, dict) else None
    return (title if isinstance(title, str) and title else None), summary_of(machine, data)


def _progress(
    served: Served, row: ListedInstance, stores: dict[str, Store | None]
) -> dict[str, str]:
    """The summary lines of the row's document ({} when it has none or cannot be read)."""
    machine = served.machines.get(row.machine)
    hook = machine.hooks.summary if machine is not None else None
    if machine is None or hook is None or row.error is not None:
        return {}
    store = _store(served, row.machine, stores)
    if store is None:
        return {}
    try:
        doc = machine.document_model.model_validate(store.read(row.id).data)
        return {str(key): str(value) for key, value in hook(doc).items()}
    except (OSError, ValueError, ValidationError, FsmError):
        return {}  # changed or removed since it was listed: the next update shows it
    except Exception:  # a machine's broken summary hook must not break the whole list
        return {}


def summary_of(machine: Machine, document: dict[str, Any] | None) -> dict[str, str]:
    """The machine's summary lines of ``document`` ({} when there are none, or the document
    is not known or does not validate: an old version may predate today's model)."""
    hook = machine.hooks.summary
    if hook is None or document is None:
        return {}
    try:
        doc = machine.document_model.model_validate(document)
        return {str(key): str(value) for key, value in hook(doc).items()}
    except Exception:  # a machine's broken summary hook must not break time travel
        return {}


def instance_status(instance: Instance) -> dict[str, Any]:
    """``fsm status --json``."""
    return status(instance).to_json()


def history(instance: Instance, limit: int) -> dict[str, Any]:
    """The latest ``limit`` journal records, oldest first, read from the journal's end, with
    the journal line of each (``lines``: what time travel names a record by)."""
    found, more = latest_records(instance, limit)
    return {
        "records": [record for _, record in found],
        "lines": [line for line, _ in found],
        "more": more,
    }


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
