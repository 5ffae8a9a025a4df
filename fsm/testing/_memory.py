"""A store that keeps documents and journals in memory: the second implementation of
:mod:`fsm.storage`, for tests that need no files and as the model of a store of another kind.

    storage = MemoryStorage()
    workspace = Workspace(tmp_path, storage=storage)
    instance = workspace.instance(machine, "c1")
    instance.create({"limit": 3})
    Engine(instance).run()
    storage.store_of(machine).journal("c1").read().records

Documents are kept as the bytes a file store would write and journals as their JSON lines, so
what a reader gets back is what a file would give it. The instance's log still goes to its meta
folder in the workspace, as with every store. A commit merges what another writer (:meth:`write`)
changed since the step read the document, as the file store's does.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.definition import describe_validation
from fsm.errors import LockHeldError, StoreError, UnknownInstanceError, UnwritableDocumentError
from fsm.files import confined_to
from fsm.instance import Instance, Loaded
from fsm.journal import JournalRead, TypedRecords
from fsm.machine import Machine
from fsm.merge import merge_concurrent
from fsm.records import Record
from fsm.store import InstancePaths, Snapshot, validate_id
from fsm.update import bytes_hash

__all__ = ["MemoryCommitter", "MemoryJournal", "MemoryStorage", "MemoryStore"]


class MemoryJournal(TypedRecords):
    """An instance's journal as a list of JSON lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def append(self, record: Mapping[str, Any]) -> int:
        """Append ``record``; return the number of records before it."""
        before = len(self.lines)
        self.lines.append(json.dumps(record, ensure_ascii=False, default=str))
        return before

    def size(self) -> int:
        """The number of records (a mark for :meth:`truncate`)."""
        return len(self.lines)

    def truncate(self, size: int) -> None:
        """Take back the records appended after the first ``size``."""
        del self.lines[size:]

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
        """``(line number, line, record)`` for every record, first to last."""
        for number, line in enumerate(list(self.lines), start=1):
            yield number, line, json.loads(line)

    def read(self) -> JournalRead:
        """Every record (none is ever unreadable in memory)."""
        records = [record for _, _, record in self.scan() if record is not None]
        return JournalRead(records=records, last_line=len(records))

    def backwards(self) -> Iterator[dict[str, Any]]:
        """The records, last first."""
        for line in reversed(list(self.lines)):
            yield json.loads(line)

    def has_torn_tail(self) -> bool:
        """Never: a record is appended whole or not at all."""
        return False

    def drop_torn_tail(self) -> bool:
        """Nothing to drop (see :meth:`has_torn_tail`)."""
        return False

    def kept_open(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to keep open."""
        return contextlib.nullcontext()


class _RunLock:
    def __init__(self, running: set[str], instance_id: str) -> None:
        self._running = running
        self._id = instance_id

    def release(self) -> None:
        self._running.discard(self._id)


class MemoryStore:
    """The documents and journals of one machine's instances, in memory."""

    read_retries = 0
    retry_interval = 0.0

    def __init__(self, workspace: Path, *, indent: int = 2) -> None:
        self.workspace = workspace
        self.indent = indent
        self.documents: dict[str, bytes] = {}
        self.journals: dict[str, MemoryJournal] = {}
        self.parked: dict[str, list[dict[str, Any]]] = {}
        """Results of steps that could not be committed, by instance id."""
        self._locks: dict[str, threading.Lock] = {}
        self._running: set[str] = set()

    def paths(self, instance_id: str) -> InstancePaths:
        """Nominal document paths under ``<workspace>/memory``; the meta folder holds the log."""
        validate_id(instance_id)
        folder = self.workspace / "memory"
        return InstancePaths(folder / f"{instance_id}.json", folder / f"{instance_id}.fsm")

    def exists(self, instance_id: str) -> bool:
        """True when the instance has a document."""
        return validate_id(instance_id) in self.documents

    def read(self, instance_id: str) -> Snapshot:
        """The document's data and bytes."""
        raw = self.read_raw_bytes(instance_id)
        if raw is None:
            raise UnknownInstanceError(f"no instance '{instance_id}' (in memory)")
        return Snapshot(json.loads(raw), raw)

    def read_raw_bytes(self, instance_id: str) -> bytes | None:
        """The document's bytes, or None."""
        return self.documents.get(validate_id(instance_id))

    def render(self, data: Mapping[str, Any]) -> str:
        """The text a document is kept as (the file store's)."""
        indent = self.indent or None
        return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False) + "\n"

    def write(self, instance_id: str, data: Mapping[str, Any]) -> None:
        """Replace the document without journal or merge, as another program would."""
        self.documents[validate_id(instance_id)] = self.render(data).encode("utf-8")

    def put(self, instance_id: str, raw: bytes) -> None:
        """Keep ``raw`` as the document (the committer's write)."""
        self.documents[validate_id(instance_id)] = raw

    def list_ids(self) -> list[str]:
        """Ids of every instance with a document."""
        return sorted(self.documents)

    @contextlib.contextmanager
    def document_lock(self, instance_id: str, timeout: float = 10.0) -> Iterator[None]:
        """Hold the instance's document lock."""
        lock = self._locks.setdefault(validate_id(instance_id), threading.Lock())
        if not lock.acquire(timeout=timeout):
            raise LockHeldError(
                f"instance '{instance_id}': document lock not released within {timeout:.0f}s"
            )
        try:
            yield
        finally:
            lock.release()

    def run_lock(self, instance_id: str) -> _RunLock:
        """Take the run lock; LockHeldError when a run holds it."""
        if validate_id(instance_id) in self._running:
            raise LockHeldError(f"instance '{instance_id}' is already being run")
        self._running.add(instance_id)
        return _RunLock(self._running, instance_id)

    def keeping_locks_open(self, instance_id: str) -> contextlib.AbstractContextManager[None]:
        """Nothing to keep open."""
        return contextlib.nullcontext()

    def journal(self, instance_id: str) -> MemoryJournal:
        """The instance's journal."""
        return self.journals.setdefault(validate_id(instance_id), MemoryJournal())

    def committer(self, instance: Instance) -> MemoryCommitter:
        """The committer of ``instance``."""
        return MemoryCommitter(self, instance)

    def confined(self) -> contextlib.AbstractContextManager[None]:
        """The machine's own file writes stay confined to the workspace."""
        return confined_to(self.workspace)


class MemoryCommitter:
    """Writes one instance's versions into a :class:`MemoryStore`."""

    def __init__(self, store: MemoryStore, instance: Instance) -> None:
        self.store = store
        self.instance = instance

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Merge, validate, journal and keep ``data`` (see :class:`fsm.storage.Committing`)."""
        if locked:
            return self._commit(data, record, base)
        with self.store.document_lock(self.instance.id):
            return self._commit(data, record, base)

    def _commit(self, data: Mapping[str, Any], record: Record, base: Loaded | None) -> Loaded:
        instance, store = self.instance, self.store
        current = store.read_raw_bytes(instance.id)
        if base is None and current is not None:
            raise StoreError(f"the document of '{instance.id}' appeared while it was created")
        merged, entry = dict(data), record
        if base is not None and current is not None and current != base.raw:
            merged = merge_concurrent(instance, data, base, json.loads(current), current)
            entry = record.as_merged()
        final = instance.touched(merged)
        try:
            doc = instance.validate(final)
        except ValidationError as exc:
            raise StoreError(
                f"refusing to write an invalid document for '{instance.id}': "
                f"{describe_validation(exc)}"
            ) from exc
        try:
            raw = store.render(final).encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise UnwritableDocumentError(
                f"the document of '{instance.id}' cannot be written as JSON: {exc}"
            ) from exc
        loaded = Loaded(
            final, raw, doc, instance.machine.codec.read(doc), instance.status_of(final)
        )
        store.journal(instance.id).write(
            entry.stamped(
                time=instance.clock.iso(),
                state=loaded.state,
                status=loaded.status,
                doc_hash=bytes_hash(raw),
                core_hash=instance.core_hash(final),
            )
        )
        store.put(instance.id, raw)
        instance.after_save(loaded)
        return loaded

    def journal_failure(self, record: Record, *, base: Loaded) -> Loaded:
        """Journal a failed step where the instance is now."""
        instance = self.instance
        with self.store.document_lock(instance.id):
            try:
                current = instance.load_unchecked()
            except StoreError:
                current = base
            entry = record.as_merged() if current.raw != base.raw else record
            self.store.journal(instance.id).write(
                entry.stamped(
                    time=instance.clock.iso(),
                    state=current.state,
                    status=current.status,
                    doc_hash=bytes_hash(current.raw),
                    core_hash=instance.core_hash(current.data),
                )
            )
        return current

    def still(self, raw: bytes) -> bool:
        """True when the document holds exactly ``raw`` now."""
        return self.store.read_raw_bytes(self.instance.id) == raw

    def reconcile(self, loaded: Loaded) -> Loaded:
        """``loaded``: every writer of a memory store replaces the whole document."""
        return loaded

    def park(self, data: Mapping[str, Any]) -> str:
        """Keep ``data`` in :attr:`MemoryStore.parked`."""
        kept = self.store.parked.setdefault(self.instance.id, [])
        kept.append(dict(data))
        return f"memory:{self.instance.id}/unsaved-step-{len(kept)}"

    def repair(self) -> list[str]:
        """Nothing is ever half-written in memory."""
        return []

    def settle(self) -> None:
        """Nothing to take in or let go."""

    def files_kept_open(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to keep open."""
        return contextlib.nullcontext()


class MemoryStorage:
    """The stores of a workspace's machines, in memory: ``Workspace(path, storage=...)``."""

    def __init__(self) -> None:
        self.stores: dict[tuple[Path, str], MemoryStore] = {}

    def __call__(self, workspace: Path, machine: Machine, options: BaseModel) -> MemoryStore:
        key = (workspace, machine.name)
        store = self.stores.get(key)
        if store is None:
            store = self.stores[key] = MemoryStore(workspace, indent=machine.spec.storage.indent)
        return store

    def store_of(self, machine: Machine) -> MemoryStore:
        """The store of ``machine`` (the only workspace's that holds one)."""
        found = [store for (_, name), store in self.stores.items() if name == machine.name]
        if len(found) != 1:
            raise LookupError(f"{len(found)} memory stores hold machine '{machine.name}'")
        return found[0]
