"""Reading instances without changing them: status, history and the replay check (listing is
:mod:`fsm.view.listing`; its names are here too)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fsm.base.errors import (
    CorruptDocumentError,
    JournalMismatchError,
    JournalRecordError,
    VersionMismatchError,
)
from fsm.base.update import bytes_hash
from fsm.engine.control import ControlPlane
from fsm.engine.instance import Instance
from fsm.engine.rules import runnable
from fsm.model.machine import event_options
from fsm.model.rebuild import Rebuilder
from fsm.model.records import (
    CHAINED,
    CreateRecord,
    Record,
    RecoverRecord,
    RepairRecord,
    UnknownRecord,
    agent_runs,
)
from fsm.store.chain import Check
from fsm.store.heartbeat import heartbeats_of
from fsm.view.history import history_line

__all__ = [
    "EventInfo",
    "InstanceStatus",
    "ReplayReport",
    "check_replay",
    "history_line",
    "replay",
    "status",
]


def __getattr__(name: str) -> Any:
    """``ListedInstance`` and ``list_instances`` live in :mod:`fsm.view.listing` (imported when
    asked for: ``fsm status`` does not list)."""
    if name in {"ListedInstance", "list_instances"}:
        from fsm.view import listing

        return getattr(listing, name)
    raise AttributeError(f"module 'fsm.view.inspect' has no attribute {name!r}")


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
    last_agent: dict[str, Any] | None = None
    """The latest agent run recorded in the journal (see :func:`fsm.model.records.agent_runs`)."""
    driver: dict[str, Any] | None = None
    """The run driving the instance now, by its live heartbeat (host, pid, driver, the action in
    progress and when it started: :class:`fsm.store.heartbeat.Heartbeat`); None when nobody."""
    runnable: bool = False
    """Whether a run would drive it now (not final; running, or waiting for a run to start it):
    with no ``driver``, it waits for one."""
    definition: dict[str, Any] | None = None
    """The definition it runs under against the installed one (see :func:`definition_of`)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def definition_of(instance: Instance) -> dict[str, Any]:
    """The definition ``instance`` runs under and the installed one: ``version`` and ``graph``
    (None: created before journals said), ``installed_version``, ``installed_graph``,
    ``runnable_here`` (whether the installed definition runs it, migrating it first when
    ``migrates``), and ``problem``, why it cannot (empty when it can)."""
    from fsm.engine.migration import compatibility, refusal

    found = compatibility(instance)
    recorded, installed = found.recorded, found.installed
    problem = refusal(instance, found)
    return {
        "version": None if recorded is None else recorded.version,
        "graph": None if recorded is None else recorded.graph,
        "installed_version": installed.version,
        "installed_graph": installed.graph,
        "runnable_here": not problem,
        "migrates": found.kind == "migrate",
        "problem": problem,
    }


def status(instance: Instance) -> InstanceStatus:
    """The state, status, summary and allowed events of ``instance``.

    An instance whose document the installed definition cannot read (a state its graph lacks)
    is refused with the versions it runs under (VersionMismatchError), not as a corrupt
    document."""
    definition = definition_of(instance)
    try:
        loaded = instance.load()
    except CorruptDocumentError as exc:
        if definition["problem"]:
            raise VersionMismatchError(definition["problem"]) from exc
        if definition["migrates"]:
            name = instance.machine.name
            raise VersionMismatchError(
                f"instance '{instance.id}' runs under {name} {definition['version']}: its next "
                f"run migrates it to {name} {definition['installed_version']} "
                f"('fsm migrate {name} {instance.id} --dry-run' shows how)"
            ) from exc
        raise
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
            reason = f"last error: {error.action}: {error.error}"
    beat = heartbeats_of(instance.store).read(instance.id)
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
        document=instance.where,
        last_agent=last_agent_run(instance),
        driver=beat.to_json() if beat is not None and beat.alive() else None,
        runnable=runnable(machine, loaded.state, loaded.status),
        definition=definition,
    )


LAST_AGENT_SEARCH = 500
"""Records read back from the journal's end looking for the latest agent run."""


def last_agent_run(instance: Instance) -> dict[str, Any] | None:
    """The latest agent run in the journal of ``instance`` among its last records, or None."""
    for count, record in enumerate(instance.journal.records_backwards()):
        if count >= LAST_AGENT_SEARCH:
            break
        runs = agent_runs(record)
        if runs:
            return {**runs[-1], "time": record.time, "event": record.event}
    return None


@dataclass
class ReplayReport:
    """What replaying the journal found."""

    records: int
    state: str
    status: str | None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


MAX_REPORTED = 10
"""Broken links of the state chain reported one by one; the rest are counted."""


def replay(instance: Instance) -> ReplayReport:
    """Check that the journal reproduces the persisted document.

    Each record must start where the previous one ended (the state chain; a step merged with a
    concurrent writer's change, marked ``merged``, started before that change), the last record's
    state and status must be the document's, and the last record's hash must be the document's
    hash; a document changed since by another writer (a dashboard edit) is reported as a note
    when only external fields differ, and as a problem otherwise.

    The journal is read as a stream, one record at a time: memory does not grow with its length.
    """
    loaded = instance.load()
    report = ReplayReport(0, loaded.state, loaded.status)
    chain = _Chain()
    versions = _Versions(instance)
    links = Check()
    bad_lines: list[int] = []
    bad_count = last_line = misfits = 0
    for number, record in instance.journal.entries(links):
        last_line = number
        if record is None:
            bad_count += 1
            if len(bad_lines) < MAX_REPORTED:
                bad_lines.append(number)
            continue
        if isinstance(record, JournalRecordError):
            misfits += 1
            if misfits <= MAX_REPORTED:
                report.problems.append(str(record))
            continue
        report.records += 1
        chain.follow(report.records, record, number)
        versions.follow(number, record)
    torn = bad_count == 1 and bad_lines == [last_line]
    _check_links(links, chain, last_line if torn else None, report)
    if torn:
        report.notes.append(f"the last journal line ({last_line}) is torn and was skipped")
    elif bad_count:
        more = f" (and {bad_count - len(bad_lines)} more)" if bad_count > len(bad_lines) else ""
        report.problems.append(f"unreadable journal lines: {bad_lines}{more}")
    if misfits > MAX_REPORTED:
        report.problems.append(f"and {misfits - MAX_REPORTED} more lines that are not records")
    if chain.last is None:
        if bad_count or misfits:
            report.problems.append("the journal holds no readable record")
        else:
            # A document another program created (the dashboard's new loop) that no fsm
            # command has touched yet: nothing to replay, nothing wrong.
            report.notes.append(
                "the journal holds no record yet: fsm has not written this document"
            )
        return report
    if not chain.starts_with_creation:
        report.notes.append("the journal does not start with the instance's creation")
    report.problems.extend(chain.problems)
    if chain.unreported:
        report.problems.append(f"and {chain.unreported} more records that break the chain")
    _check_last(instance, loaded, chain.last, chain.state, report)
    versions.report(report)
    return report


def _check_links(links: Check, chain: _Chain, torn: int | None, report: ReplayReport) -> None:
    """Report where the journal's chain of links first breaks (a torn last line, which a crash
    leaves, breaks none), and the first record of a chained format without its link."""
    broken = links.broken
    if broken is not None and broken[0] != torn:
        number, why = broken
        more = links.breaks - 1 - (torn is not None and torn > number)
        also = f" (and {more} more breaks after it)" if more > 0 else ""
        report.problems.insert(0, f"the journal's record on line {number}: {why}{also}")
    elif chain.unlinked is not None:
        report.problems.insert(
            0,
            f"the journal's record on line {chain.unlinked}: it has no chain link though its "
            f"format ({CHAINED} or newer) is linked",
        )
    if chain.second_create is not None:
        report.problems.insert(
            0,
            f"the journal's record on line {chain.second_create}: a second 'create' record "
            "(an instance is created once, on the journal's first line)",
        )


class _Chain:
    """The state chain of a journal, followed one record at a time."""

    def __init__(self) -> None:
        self.state: str | None = None
        self.last: Record | None = None
        self.starts_with_creation = False
        self.problems: list[str] = []
        self.unreported = 0
        self.second_create: int | None = None
        """The line of the first 'create' record after the journal's first record."""
        self.unlinked: int | None = None
        """The line of the first record of a linked format without its link."""

    def follow(self, count: int, record: Record, number: int) -> None:
        """Follow ``record``, the ``count``-th record, on line ``number``."""
        kind = type(record)  # not isinstance: this runs 100,000 times a second
        starts = kind is CreateRecord or kind is RecoverRecord
        if self.last is None:
            self.starts_with_creation = starts
        elif kind is CreateRecord and self.second_create is None:
            self.second_create = number
        if record.chain is None and record.format >= CHAINED and self.unlinked is None:
            self.unlinked = number
        self.last = record
        if starts:
            self.state = record.dest
            return
        if kind is RepairRecord:  # settles where the instance is after a crash
            self.state = record.state
            return
        if kind is UnknownRecord and record.source is None:
            # A kind of a newer fsm that does not say where it starts: it moves no state, or
            # says where it ended.
            self.state = record.state if record.state is not None else self.state
            return
        state = self.state
        if state is not None and record.source != state and not record.merged:
            if len(self.problems) < MAX_REPORTED:
                self.problems.append(
                    f"record {count} ({record.kind} {record.event}) starts in "
                    f"'{record.source}' but the previous record ended in '{state}'"
                )
            else:
                self.unreported += 1
        # A record that changed no document (an early failed step) has no state: its dest.
        self.state = record.state if record.state is not None else record.dest


def _check_last(
    instance: Instance,
    loaded: Any,
    last: Record,
    state: str | None,
    report: ReplayReport,
) -> None:
    """Compare where the journal ends with the document."""
    if state != loaded.state:
        report.problems.append(
            f"the journal ends in state '{state}' but the document is in '{loaded.state}'"
        )
    if last.doc_hash and last.doc_hash != bytes_hash(loaded.raw):
        core = last.core_hash
        if core is not None and not instance.rules.core_matches(loaded.data, core):
            report.problems.append(
                "the document was changed outside fsm beyond the fields other programs own "
                f"({', '.join(instance.external_paths) or 'none'})"
            )
        else:
            report.notes.append(
                "the document was changed after the last journal record (by another writer)"
            )
        if last.status != loaded.status:
            report.notes.append(f"status changed outside fsm: '{last.status}' -> '{loaded.status}'")


class _Versions:
    """Each record's version rebuilt from the journal's patches (:mod:`fsm.model.rebuild`) and
    checked against its hashes: the first record whose fsm fields the patches do not give is a
    problem, the first whose other programs' fields differ a note."""

    def __init__(self, instance: Instance) -> None:
        rules = instance.rules
        self.rebuilder = Rebuilder(lambda data: rules.render(data, instance.id), rules.core_matches)
        self.wrong: str | None = None
        self.drifted: str | None = None

    def follow(self, number: int, record: Record) -> None:
        rebuilder = self.rebuilder
        rebuilder.follow(number, record)
        if not rebuilder.known or self.wrong is not None:
            return
        check = rebuilder.check(record)
        if check.verdict == "mismatch":
            self.wrong = _line_of(number, record)
        elif check.verdict == "core" and self.drifted is None:
            self.drifted = _line_of(number, record)

    def report(self, report: ReplayReport) -> None:
        if self.wrong is not None:
            report.problems.append(
                "the journal's changes do not rebuild its documents: applying the changes of "
                f"{self.wrong} to the version before it does not give the recorded hash"
            )
        elif self.drifted is not None:
            report.notes.append(
                f"from {self.drifted} on, other programs' fields differ from what the journal's "
                "changes give (a change another program made between steps is not journaled)"
            )
        rebuilder = self.rebuilder
        if rebuilder.seen_changes and not rebuilder.known:
            report.notes.append(f"the changes were not checked to the end: {rebuilder.reason}")


def _line_of(number: int, record: Record) -> str:
    return f"the record on line {number} ({' '.join(filter(None, [record.kind, record.event]))})"


def check_replay(instance: Instance) -> ReplayReport:
    """Replay and raise JournalMismatchError when there are problems."""
    report = replay(instance)
    if report.problems:
        raise JournalMismatchError(f"journal of '{instance.id}': " + "; ".join(report.problems))
    return report
