"""The transaction: how a new version of an instance document is committed, on any store.

Written once over the store's primitives (:class:`fsm.store.protocol.Store`) and a machine's
document rules (:class:`fsm.engine.rules.DocumentRules`). A commit, under the store's document lock:

1. re-applies what another program wrote into a version the store replaced since the last
   commit (:meth:`~fsm.store.protocol.Store.late_writes`), and builds the step's result on it;
2. asks the store to swap (:meth:`~fsm.store.protocol.Store.swap`): given the current version, it
   merges what another writer changed since the step's base (:mod:`fsm.engine.merge`; their base is
   the version of fsm's they had read, :mod:`fsm.engine.versions`), applies the ``touch`` stamps,
   validates, renders, and stamps the journal record with the hashes of what will be written;
   the store writes the document and appends the records only if the document is still that
   version, else the merge is made again on the newer one;
3. remembers the versions it wrote: another writer that read an older one and wrote it back
   (undoing fsm's work while making its own change) is found at the next load and both changes
   are kept (:meth:`Transaction.reconcile`); a stop or pause another program wrote between two
   steps is journaled;
4. merges a late write the swap found (a program that rewrote the version just replaced) into a
   new version (a ``merge`` record), and runs the machine's ``after_save`` hook.

A failed step that changes no document is journaled where the instance is
(:meth:`Transaction.journal_failure`); after a crash the store's repair makes journal and
document agree, journaled as a ``repair`` record (:meth:`Transaction.repair`). A result that
cannot be committed because of the store is parked (:meth:`fsm.store.protocol.Store.park`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.base import jsonio
from fsm.base.errors import (
    CorruptDocumentError,
    StoreError,
    UnsafePathError,
    UnwritableDocumentError,
)
from fsm.base.log import EventLog
from fsm.base.update import bytes_hash
from fsm.engine.merge import merge_concurrent
from fsm.engine.observe import journaled, watching
from fsm.engine.rules import DocumentRules, Loaded
from fsm.engine.versions import is_journaled, seen_control, written_over
from fsm.model.definition import describe_validation
from fsm.model.patch import changes_of
from fsm.model.records import MergeRecord, Record, RepairRecord
from fsm.store.protocol import JournalLog, LateWrite, Lease, Proposal, Snapshot, Store

__all__ = ["Transaction"]

MAX_ROUNDS = 20
"""Late writes a commit may re-apply while other programs keep writing into replaced versions."""
RECENT_VERSIONS = 8
"""Versions remembered to recognise a writer that wrote an older one back."""


@dataclass(frozen=True)
class _Lost:
    """A change another writer made to the version ``before`` that never reached the document
    (``raw``: the bytes it wrote)."""

    before: Loaded
    raw: bytes


class Transaction:
    """Commits the versions of one instance's document (see the module docstring)."""

    def __init__(self, store: Store, instance_id: str, rules: DocumentRules, log: EventLog) -> None:
        self.store = store
        self.id = instance_id
        self.rules = rules
        self.log = log
        self.journal: JournalLog = store.journal(instance_id)
        self.fence: Lease | None = None
        """The lease of the run this transaction commits for (checked by the store in every
        write); None outside a run (a control command)."""
        self.recent: deque[tuple[Loaded, str]] = deque(maxlen=RECENT_VERSIONS)
        """Versions this transaction wrote (newest last), with their core hashes."""
        self._seen: deque[tuple[Loaded, str]] = deque(maxlen=RECENT_VERSIONS)
        """Versions other writers put in place that fsm read and merged (newest last): a copy
        written back later may be of one of them rather than of a version of fsm's."""

    # --- reading ---------------------------------------------------------------------------

    def read(self) -> Loaded:
        """The current version, validated (CorruptDocumentError when it does not validate)."""
        snapshot = self.store.read(self.id)
        return self.rules.loaded(snapshot.data, snapshot.raw)

    def _last(self) -> Record | None:
        return self.journal.last()

    # --- committing ------------------------------------------------------------------------

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Write ``data`` (the step's result from ``base``) and journal ``record``.

        ``locked``: the caller holds the document lock already. Without a ``base`` (creation,
        recovery) the document is written as it is, nothing merged. A result the store cannot
        take (StoreError) is parked, and the error says where.
        """
        try:
            if locked:
                return self._commit(data, record, base)
            with self.store.lock(self.id):
                return self._commit(data, record, base)
        except (CorruptDocumentError, UnwritableDocumentError, UnsafePathError):
            raise  # parked already, the step's own fault, or nowhere safe to park it
        except StoreError as exc:
            parked = self.park(data)
            raise StoreError(f"{exc}; the step's result was kept in {parked}") from exc

    def _commit(self, data: Mapping[str, Any], record: Record, base: Loaded | None) -> Loaded:
        settled = self._take_late_writes()
        before: list[Record] = []
        if settled is not None and base is not None:
            # A change re-applied just now is newer than the step's base: build on it.
            data, before = merge_concurrent(
                self.rules, data, base, dict(settled.data), settled.raw, self._last
            )
            base, record = settled, record.as_merged()
        return self._until_settled(*self._write(data, before, record, base))

    def _until_settled(self, saved: Loaded, lost: _Lost | None) -> Loaded:
        """Re-apply changes that went into replaced versions until none is left."""
        for _ in range(MAX_ROUNDS):
            if lost is None:
                break
            saved, lost = self._reapply(saved, lost.before, lost.raw, on_disk=saved)
        return saved

    def _write(
        self,
        data: Mapping[str, Any],
        before: list[Record],
        record: Record,
        base: Loaded | None,
        *,
        since: Mapping[str, Any] | None = None,
    ) -> tuple[Loaded, _Lost | None]:
        """One swap of ``data`` (merged with what the store holds by then) and its records;
        ``since``: the version the journal is at once the ``before`` records are written (what
        the step's changes are said against; default: the base)."""
        rules = self.rules
        base_data = since if since is not None else None if base is None else base.data
        loaded: Loaded | None = None  # what build made last (the swap wrote the last one)
        core = ""
        merged_on: bytes | None = None
        written: list[Record] = []

        def build(current: Snapshot | None) -> Proposal:
            nonlocal loaded, core, merged_on, written
            if base is None and current is not None:
                raise StoreError(
                    f"the document of '{self.id}' appeared while fsm was creating it; "
                    "it was left as it is"
                )
            merged, entry, records = data, record, before
            previous: Mapping[str, Any] | None = (
                None if current is None else since if since is not None else base_data
            )
            if base is not None and current is not None and current.raw != base.raw:
                theirs = self._their_data(current.raw, data)
                their_base = self._read_by(current.raw, base)
                merged, more = merge_concurrent(
                    rules, data, their_base, theirs, current.raw, self._last
                )
                # What changed is said against the version the journal ends at: theirs when
                # it is journaled (by a record here, or by whoever wrote it), else the step's
                # base, the step's record then carrying their change too (it is marked merged).
                journaled = since if since is not None else self._journal_end([current], base)
                if more:
                    more = [r.with_changes(changes_of(journaled, theirs)) for r in more]
                    previous = theirs
                else:
                    previous = journaled
                records = [*before, *more]
                entry = record.as_merged()
            final = rules.touched(merged)
            doc = self._validated(final)
            raw = rules.render(final, self.id)
            if len(raw) > jsonio.MAX_BYTES:
                raise UnwritableDocumentError(
                    f"the document of '{self.id}' would be {len(raw) / 1048576:.1f} MiB, more "
                    f"than a document may hold ({jsonio.MAX_BYTES // 1048576} MiB)"
                )
            state = rules.machine.codec.read(doc)
            status = rules.status_of(final)
            core = rules.core_hash(final)
            stamped = entry.stamped(
                time=rules.clock.iso(),
                state=state,
                status=status,
                doc_hash=bytes_hash(raw),
                core_hash=core,
                changes=changes_of(previous, final),
            )
            loaded = Loaded(final, raw, doc, state, status)
            merged_on = current.raw if entry is not record and current is not None else None
            written = [*records, stamped] if records else [stamped]
            return Proposal(
                raw,
                written,
                state,
                status,
                rules.runnable(state, status),
            )

        swapped = self.store.swap(
            self.id, build, expected=None if base is None else base.raw, fence=self.fence
        )
        assert loaded is not None  # the swap wrote what build made last
        self._told(written)
        if merged_on is not None:
            self._saw(merged_on)  # merged into what was just written: a version to know
        self.recent.append((loaded, core))
        lost = None if swapped.late is None else self._lost(swapped.late)
        rules.after_save(loaded)
        return loaded, lost

    def _journal_end(self, found: list[Snapshot | Loaded], fallback: Loaded) -> Mapping[str, Any]:
        """The version the journal ends at, among those just ``found`` and those this
        transaction wrote or merged, recognised by the journal's last hash: what the next
        record's changes are said against when other writers wrote meanwhile (a version they
        wrote and journaled, fsm's version before they wrote an older copy back, ...); the
        ``fallback`` when none has that hash (an edit the journal does not hold)."""
        last = self._last()
        if last is not None and last.doc_hash is not None:
            versions = [*found, fallback, *(v for v, _ in reversed(self.recent))]
            for version in [*versions, *(v for v, _ in reversed(self._seen))]:
                if bytes_hash(version.raw) == last.doc_hash:
                    return version.data
        return fallback.data

    def _their_data(self, raw: bytes, ours: Mapping[str, Any]) -> dict[str, Any]:
        """The document another writer left (``raw``); when it is corrupt the step's result is
        parked, never lost."""
        try:
            data = jsonio.loads(raw)
        except jsonio.JsonError as exc:
            problem = f"not valid JSON ({exc}); it was left untouched"
        else:
            if isinstance(data, dict):
                return data
            problem = f"expected a JSON object, found {type(data).__name__}"
        parked = self.park(ours)
        raise CorruptDocumentError(
            f"corrupt document {self.rules.where}: {problem}; another program broke it during "
            f"the step, whose result was kept in {parked} (repair the document or run "
            "'fsm recover')"
        )

    def _validated(self, data: Mapping[str, Any]) -> BaseModel:
        try:
            return self.rules.validate(data)
        except ValidationError as exc:
            raise StoreError(
                f"refusing to write an invalid document for '{self.id}': {describe_validation(exc)}"
            ) from exc

    # --- writers outside the transaction ---------------------------------------------------

    def _lost(self, late: LateWrite) -> _Lost | None:
        """The change another writer made in ``late.raw``, written where ``late.before`` was
        (None when ``before`` is no valid version). Its base is the version of fsm's it is a
        copy of when one fits (a writer that read an older version), else ``before``."""
        try:
            base = self.rules.loaded_from(late.before)
        except StoreError:
            return None
        try:
            theirs = self.rules.loaded_from(late.raw)
        except StoreError:
            return _Lost(base, late.raw)  # unreadable: logged when re-applied
        found = written_over(self.rules, self._versions(), theirs, also=base)
        return _Lost(found or base, late.raw)

    def _take_late_writes(self, *, last: bool = False) -> Loaded | None:
        """Re-apply the changes the store found written into versions it replaced (the caller
        holds the document lock); return the version written last, if any."""
        written: Loaded | None = None
        for late in self.store.late_writes(self.id, last=last):
            lost = self._lost(late)
            if lost is None:
                continue
            current = self.read()
            self._saw(current.raw)
            written = self._until_settled(
                *self._reapply(current, lost.before, lost.raw, on_disk=current)
            )
        return written

    def _read_by(self, raw: bytes, base: Loaded) -> Loaded:
        """The version another writer read before it wrote ``raw``: the step's ``base``, unless
        it wrote back a copy of another version of fsm's (see
        :func:`fsm.engine.versions.written_over`)."""
        try:
            theirs = self.rules.loaded_from(raw)
        except StoreError:
            return base
        return written_over(self.rules, self._versions(), theirs, also=base) or base

    def settle(self) -> None:
        """End of an operation: re-apply a change written into a version the store replaced,
        and let the store let go of what it kept to watch."""
        late = self.store.late_writes(self.id, last=True)
        if not late:
            return
        with self.store.lock(self.id):
            for change in late:
                lost = self._lost(change)
                if lost is None:
                    continue
                current = self.read()
                self._saw(current.raw)
                self._until_settled(*self._reapply(current, lost.before, lost.raw, on_disk=current))

    def _reapply(
        self, ours: Loaded, their_base: Loaded, their_raw: bytes, *, on_disk: Loaded
    ) -> tuple[Loaded, _Lost | None]:
        """Write ``ours`` merged with the change another writer made to ``their_base`` (their
        bytes ``their_raw`` never reached the document, or were written over fsm's newer work);
        ``on_disk`` is the version the store holds now."""
        try:
            theirs = jsonio.loads(their_raw)
        except jsonio.JsonError:
            self.log.warning("lost_write_unreadable", size=len(their_raw))
            return on_disk, None
        if not isinstance(theirs, dict):
            return on_disk, None
        merged, before = merge_concurrent(
            self.rules, ours.data, their_base, theirs, their_raw, self._last
        )
        # What changed is said against the version the journal ends at (the store may hold a
        # version another writer put there without journaling it), then against theirs when
        # a record of their version comes first.
        end = self._journal_end([on_disk], ours)
        if before:
            before = [r.with_changes(changes_of(end, theirs)) for r in before]
        record = MergeRecord(
            source=ours.state,
            dest=ours.state,
            actor="external",
            reason="re-applied a change another program wrote while fsm replaced the document",
            merged=True,
        )
        self.log.info("lost_write_reapplied", state=ours.state)
        return self._write(merged, before, record, on_disk, since=theirs if before else end)

    def reconcile(self, loaded: Loaded) -> Loaded:
        """``loaded``, or, when another writer wrote back an older version of fsm's work along
        with its own change, a new version keeping both (journaled as a ``merge``).

        Another program's change on top of fsm's latest version that moved the state or the
        status (a dashboard's stop or pause between two steps) is journaled as an external
        ``control`` record, so that the journal still ends where the document is.
        """
        if not self.recent or loaded.raw == self.recent[-1][0].raw:
            return loaded
        with self.store.lock(self.id):
            self._take_late_writes()
            current = self.read()
            newest = self.recent[-1][0]
            if current.raw == newest.raw:
                return current
            if is_journaled(bytes_hash(current.raw), self._last()):
                # fsm's own work, committed by another process (``fsm resume``, a server):
                # the newest version, not an older one written back.
                self.recent.append((current, self.rules.core_hash(current.data)))
                return current
            base = written_over(self.rules, self._versions(), current)
            if base is None:
                return current  # not a version fsm wrote: somebody else's edit, left to replay
            if base is not newest:
                self._saw(current.raw)
                return self._until_settled(
                    *self._reapply(newest, base, current.raw, on_disk=current)
                )
            seen = seen_control(self.rules, newest, current, self._last())
            if seen is not None:
                end = self._journal_end([], newest)
                seen = seen.with_changes(changes_of(end, current.data))
                self.store.append(self.id, [seen], fence=self.fence)
                self._told([seen])
                self.log.info(
                    "external_control_seen",
                    status_from=newest.status,
                    status_to=current.status,
                )
            self.recent.append((current, self.rules.core_hash(current.data)))
            return current

    def _versions(self) -> list[tuple[Loaded, str]]:
        """The versions another writer may have read before writing a copy back, with their
        core hashes: this process's latest, newest first (they win a tie), then the versions
        other writers put in place that it merged. Without the latter, a copy of another
        writer's version (a dashboard's rename, then its stop written over fsm's merge of it)
        is taken for a copy of fsm's merge, and what the merge added reads as deleted."""
        return [*reversed(self.recent), *reversed(self._seen)]

    def _saw(self, raw: bytes) -> None:
        """Remember ``raw``, a version another writer put in place, once (if it is valid)."""
        if any(loaded.raw == raw for loaded, _ in self._seen):
            return
        try:
            loaded = self.rules.loaded_from(raw)
        except StoreError:
            return
        self._seen.append((loaded, self.rules.core_hash(loaded.data)))

    # --- failures, parking, repair ---------------------------------------------------------

    def journal_failure(self, record: Record, *, base: Loaded) -> Loaded:
        """Journal a failed step that changes no document, under the document lock.

        The record states where the instance is now: another writer may have moved it (a stop)
        while the step ran, in which case the record is marked ``merged``.
        """
        with self.store.lock(self.id):
            try:
                current = self.read()
            except StoreError:
                current = base
            entry = record.as_merged() if current.raw != base.raw else record
            # The document did not change, unless another writer changed it meanwhile.
            previous = current.data if entry is record else self._journal_end([current], base)
            stamped = entry.stamped(
                time=self.rules.clock.iso(),
                state=current.state,
                status=current.status,
                doc_hash=bytes_hash(current.raw),
                core_hash=self.rules.core_hash(current.data),
                changes=None if entry is record else changes_of(previous, current.data),
            )
            self.store.append(self.id, [stamped], fence=self.fence)
        self._told([stamped])
        return current

    def park(self, data: Mapping[str, Any]) -> str:
        """Keep a step's result that cannot be committed; return where it was kept."""
        return self.store.park(self.id, data)

    def repair(self) -> list[str]:
        """Make journal and document agree after a crash; return what was repaired (each
        repair is also journaled, as a ``repair`` record)."""
        if not self.store.needs_repair(self.id):
            return []
        with self.store.lock(self.id):
            repaired = self.store.repair(self.id)
            if repaired.completed is not None:
                with contextlib.suppress(StoreError):  # its after_save never ran
                    self.rules.after_save(self.rules.loaded_from(repaired.completed))
            if repaired.notes:
                self._journal_repair(repaired.notes)
        for note in repaired.notes:
            self.log.warning("instance_repaired", note=note)
        return repaired.notes

    def _journal_repair(self, notes: list[str]) -> None:
        try:
            current = self.read()
        except StoreError:
            return
        record = RepairRecord(
            time=self.rules.clock.iso(),
            source=current.state,
            dest=current.state,
            actor="fsm",
            reason="; ".join(notes),
            state=current.state,
            status=current.status,
            doc_hash=bytes_hash(current.raw),
            core_hash=self.rules.core_hash(current.data),
        ).with_changes(changes_of(None, current.data))  # the whole document: replay restarts
        self.store.append(self.id, [record], fence=self.fence)
        self._told([record])

    def _told(self, records: list[Record]) -> None:
        """Tell the journal's watchers (:mod:`fsm.engine.observe`) of records just written."""
        if watching():
            journaled(self.rules.machine, self.id, records)
