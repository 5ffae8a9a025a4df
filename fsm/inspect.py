"""Reading instances without changing them: status, listing, history and the replay check."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from fsm import jsonio
from fsm.clock import iso_utc
from fsm.control import ControlPlane
from fsm.definition import describe_validation
from fsm.errors import FsmError, JournalMismatchError, OptionsError
from fsm.instance import Instance, Workspace
from fsm.machine import FieldCodec, Machine, event_options
from fsm.store import read_file
from fsm.terminal import one_line
from fsm.update import bytes_hash

__all__ = [
    "EventInfo",
    "InstanceStatus",
    "ListedInstance",
    "ReplayReport",
    "check_replay",
    "list_instances",
    "replay",
    "status",
]


@dataclass(frozen=True)
class EventInfo:
    """An event leaving the current state, and whether its guards hold now."""

    event: str
    description: str
    enabled: bool
    auto: bool


@dataclass(frozen=True)
class InstanceStatus:
    """What ``fsm status`` shows."""

    machine: str
    id: str
    state: str
    state_description: str
    status: str | None
    final: bool
    outcome: str | None
    reason: str | None
    events: list[EventInfo]
    control: list[str]
    summary: dict[str, str]
    document: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def status(instance: Instance) -> InstanceStatus:
    """The state, status, summary and allowed events of ``instance``."""
    loaded = instance.load()
    machine = instance.machine
    options = event_options(machine, loaded.state, loaded.doc, instance.context())
    events = [EventInfo(o.event, o.description, o.enabled, o.auto) for o in options]
    summary_hook = machine.hooks.summary
    summary = {
        str(k): str(v) for k, v in (summary_hook(loaded.doc) if summary_hook else {}).items()
    }
    final = machine.is_final(loaded.state)
    outcome = reason = None
    verdict = machine.verdict(loaded.state, loaded.doc)
    if verdict is not None:
        outcome, reason = ("success" if verdict.success else "failure"), verdict.reason
    else:
        error = instance.journal.last_error()
        if error is not None:
            reason = f"last error: {error.get('action')}: {error.get('error')}"
    return InstanceStatus(
        machine=machine.name,
        id=instance.id,
        state=loaded.state,
        state_description=machine.states[loaded.state].description,
        status=loaded.status,
        final=final,
        outcome=outcome,
        reason=reason,
        events=events,
        control=ControlPlane(instance).allowed(loaded),
        summary=summary,
        document=str(instance.paths.document),
    )


@dataclass(frozen=True)
class ListedInstance:
    """One line of ``fsm ls``."""

    machine: str
    id: str
    status: str | None
    state: str | None
    updated: str
    error: str | None = None
    outcome: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def list_instances(
    workspace: Workspace, machines: list[Machine], status_filter: str | None = None
) -> list[ListedInstance]:
    """Instances of ``machines`` in ``workspace``, newest first (by document modification)."""
    rows: list[tuple[int, ListedInstance]] = []
    for machine in machines:
        try:
            store = workspace.store_for(machine)
        except OptionsError as exc:
            if len(machines) == 1:
                raise
            # One machine's bad options must not hide the other machines' instances.
            rows.append((0, ListedInstance(machine.name, "-", None, None, "", one_line(str(exc)))))
            continue
        for instance_id in store.list_ids():
            path, journal = store.locations(instance_id)
            if not _belongs_to(machine, journal):
                continue
            try:
                raw, stat = read_file(path)
                data = jsonio.loads(raw)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError, FsmError) as exc:
                if status_filter is not None:
                    continue  # its status is unknown, so it does not match a filter
                row = ListedInstance(
                    machine.name, instance_id, None, None, "", f"unreadable: {exc}"
                )
                rows.append((0, row))
                continue
            instance_status = _status_of(machine, data)
            state, invalid, doc = _checked(machine, data)
            # A document that does not validate has no status to trust: it matches no filter.
            if status_filter is not None and (invalid or instance_status != status_filter):
                continue
            updated = iso_utc(datetime.fromtimestamp(stat.st_mtime, UTC))
            row = ListedInstance(
                machine.name, instance_id, instance_status, state, updated, invalid
            )
            if invalid is None and state is not None and machine.is_final(state):
                row = _with_verdict(machine, row, doc)
            rows.append((stat.st_mtime_ns, row))
    rows.sort(key=lambda item: (item[0], item[1].id), reverse=True)
    return [row for _, row in rows]


def _with_verdict(machine: Machine, row: ListedInstance, doc: Any) -> ListedInstance:
    """``row`` with the outcome and reason of an instance that ended."""
    assert row.state is not None
    verdict = machine.verdict(row.state, doc)
    if verdict is None:
        return row
    return replace(row, outcome="success" if verdict.success else "failure", reason=verdict.reason)


def _belongs_to(machine: Machine, journal: str) -> bool:
    """False when the journal's first record says another machine created the instance.

    Machines may share a storage layout (issue-manager and skill-tuning both keep
    ``.workflow/.scratchpad/{id}/state.json``); documents written by other programs (the CCW
    dashboard) have no journal yet and are listed.
    """
    try:
        first = _first_line(journal)
    except OSError:
        return True
    try:
        record = jsonio.loads(first.decode("utf-8", errors="replace"))
    except jsonio.JsonError:
        return True
    owner = record.get("machine") if isinstance(record, dict) else None
    return owner is None or owner == machine.name


def _first_line(path: str) -> bytes:
    """The first line of ``path`` (raw ``os`` reads: ``fsm ls`` does this once per instance).

    Read no further than jsonio's size limit: a journal that is one endless line is not read
    to its end (what is returned then does not parse).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= jsonio.MAX_BYTES and (chunk := os.read(fd, 4096)):
            line, newline, _ = chunk.partition(b"\n")
            chunks.append(line)
            size += len(line)
            if newline:
                break
    finally:
        os.close(fd)
    return b"".join(chunks)


def _status_of(machine: Machine, data: dict[str, Any]) -> str | None:
    control = machine.spec.control
    if control is None:
        return None
    current: Any = data
    for part in control.field.split("."):
        current = current.get(part) if isinstance(current, dict) else None
    return None if current is None else str(current)


def _checked(machine: Machine, data: dict[str, Any]) -> tuple[str | None, str | None, Any]:
    """The state of ``data``, ``"invalid: <reason>"`` when it would not load, and the validated
    document (None when invalid).

    The same checks as :meth:`fsm.instance.Instance.load`: the document validates with the
    machine's model (which also knows its statuses), and its state is one of the machine's.
    """
    try:
        doc = machine.document_model.model_validate(data)
    except ValidationError as exc:
        as_read = machine.codec.read(data) if isinstance(machine.codec, FieldCodec) else ""
        return as_read or None, f"invalid: {describe_validation(exc, 1)}", None
    state = machine.codec.read(doc)
    if state not in machine.states:
        return None, f"invalid: unknown state '{state}'", None
    return state, None, doc


@dataclass
class ReplayReport:
    """What replaying the journal found."""

    records: int
    state: str
    status: str | None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def replay(instance: Instance) -> ReplayReport:
    """Check that the journal reproduces the persisted document.

    Each record must start where the previous one ended (the state chain; a step merged with a
    concurrent writer's change, marked ``merged``, started before that change), the last record's
    state and status must be the document's, and the last record's hash must be the document's
    hash; a document changed since by another writer (a dashboard edit) is reported as a note
    when only external fields differ, and as a problem otherwise.
    """
    loaded = instance.load()
    read = instance.journal.read()
    report = ReplayReport(len(read.records), loaded.state, loaded.status)
    if read.torn_tail:
        report.notes.append(f"the last journal line ({read.last_line}) is torn and was skipped")
    elif read.bad_lines:
        report.problems.append(f"unreadable journal lines: {read.bad_lines}")
    if not read.records:
        report.problems.append("the journal is empty")
        return report
    if read.records[0].get("kind") != "create" and read.records[0].get("kind") != "recover":
        report.notes.append("the journal does not start with the instance's creation")
    state: str | None = None
    for number, record in enumerate(read.records, start=1):
        kind = record.get("kind")
        if kind in {"create", "recover"}:
            state = record.get("dest")
            continue
        if kind == "repair":  # settles where the instance really is after a crash
            state = record.get("state")
            continue
        if state is not None and record.get("source") != state and not record.get("merged"):
            report.problems.append(
                f"record {number} ({kind} {record.get('event')}) starts in "
                f"'{record.get('source')}' but the previous record ended in '{state}'"
            )
        state = record.get("state", record.get("dest"))
    last = read.records[-1]
    if state != loaded.state:
        report.problems.append(
            f"the journal ends in state '{state}' but the document is in '{loaded.state}'"
        )
    if last.get("doc_hash") and last["doc_hash"] != bytes_hash(loaded.raw):
        core = last.get("core_hash")
        if core is not None and core != instance.core_hash(loaded.data):
            report.problems.append(
                "the document was changed outside fsm beyond the fields other programs own "
                f"({', '.join(instance.external_paths) or 'none'})"
            )
        else:
            report.notes.append(
                "the document was changed after the last journal record (by another writer)"
            )
        if last.get("status") != loaded.status:
            report.notes.append(
                f"status changed outside fsm: '{last.get('status')}' -> '{loaded.status}'"
            )
    return report


def check_replay(instance: Instance) -> ReplayReport:
    """Replay and raise JournalMismatchError when there are problems."""
    report = replay(instance)
    if report.problems:
        raise JournalMismatchError(f"journal of '{instance.id}': " + "; ".join(report.problems))
    return report
