"""A store that keeps documents and journals in memory: primitives only (the transaction is
fsm's, :mod:`fsm.engine.transaction`), for tests that need no files, and the model of a store of
another kind (a database): versions compared and swapped, journal records appended in the same step,
leases with fencing tokens that expire, change notification.

    storage = MemoryStorage()
    workspace = Workspace(tmp_path, storage=storage)
    instance = workspace.instance(machine, "c1")
    instance.create({"limit": 3})
    Engine(instance).run()
    storage.store_of(machine).journal("c1").read().records

Documents are kept as the exact bytes the transaction renders and journals as their JSON lines,
so what a reader gets back is what a file would give it. The instance's log still goes to its
meta folder in the workspace, as with every store. It is registered as the store ``memory``
(``FSM_STORE=memory``): one per process, gone when the process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsm.base import jsonio
from fsm.base.errors import (
    CorruptDocumentError,
    LeaseLostError,
    LockHeldError,
    StoreError,
    UnknownInstanceError,
)
from fsm.base.ids import validate_id
from fsm.model.records import Record, version_named
from fsm.store import chain
from fsm.store.journal import JournalRead, TypedRecords, line_bytes
from fsm.store.protocol import (
    Build,
    Folders,
    LateWrite,
    Layout,
    Lease,
    Listed,
    Repaired,
    Snapshot,
    Swapped,
)

__all__ = ["MemoryJournal", "MemoryLease", "MemoryStorage", "MemoryStore", "shared_storage"]

MAX_ROUNDS = 50
"""Rounds a swap may redo while other writers keep changing the document."""


class MemoryJournal(TypedRecords):
    """An instance's journal as a list of JSON lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def append(self, record: Mapping[str, Any]) -> int:
        """Append ``record``, linked to the line before it (:mod:`fsm.store.chain`); return the
        number of records before it."""
        before = len(self.lines)
        previous = chain.following(self.lines[-1].encode()) if before else chain.START
        line, _ = chain.chained(line_bytes(chain.unlinked(record))[:-1], previous)
        self.lines.append(line.decode("utf-8"))
        return before

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


@dataclass
class _Document:
    raw: bytes
    version: int
    modified_ns: int


class MemoryLease:
    """A run's lease on an instance of a memory store, with its fencing token; it holds until
    released or until the store lets it expire (:meth:`MemoryStore.expire`)."""

    def __init__(self, store: MemoryStore, instance_id: str, token: int) -> None:
        self._store = store
        self._id = instance_id
        self.token = token
        self.instance_id = instance_id

    def held(self) -> bool:
        """True while this lease is the instance's."""
        return self._store.leases.get(self._id) == self.token

    def release(self) -> None:
        """Let another run take the instance (nothing, when it was taken over already)."""
        with self._store.mutex:
            if self.held():
                del self._store.leases[self._id]
            kept = [w for w in self._store.watchers.get(self._id, []) if w[0] != self.token]
            self._store.watchers[self._id] = kept

    def watch(self, lost: Callable[[], None]) -> None:
        """Call ``lost`` when the store lets this lease expire (:meth:`MemoryStore.expire`)."""
        with self._store.mutex:
            self._store.watchers.setdefault(self._id, []).append((self.token, lost))


class MemoryStore:
    """The documents and journals of one machine's instances, in memory."""

    name = "memory"

    def __init__(self, workspace: Path, machine: str = "memory") -> None:
        self.workspace = workspace
        self.machine = machine
        self.documents: dict[str, _Document] = {}
        self.journals: dict[str, MemoryJournal] = {}
        self.parked: dict[str, list[dict[str, Any]]] = {}
        """Results of steps that could not be committed, by instance id."""
        self.quarantined: dict[str, bytes] = {}
        """Documents moved aside by :meth:`quarantine`, by where they are kept."""
        self.leases: dict[str, int] = {}
        """The fencing token of each instance's current lease."""
        self.watchers: dict[str, list[tuple[int, Callable[[], None]]]] = {}
        """What to call when a lease expires, by instance id: (token, callback)."""
        self.mutex = threading.RLock()
        self._locks: dict[str, threading.Lock] = {}
        self._tokens = itertools.count(1)
        self._versions = itertools.count(1)
        self._watchers: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[set[str]]]] = []

    # --- where things are ------------------------------------------------------------------

    def describe(self, instance_id: str) -> str:
        """``memory:<machine>/<id>``."""
        return f"memory:{self.machine}/{validate_id(instance_id)}"

    def folders(self, instance_id: str) -> Folders:
        """``<workspace>/memory/<id>`` for side files, ``<id>.fsm`` beside it for the log."""
        folder = self.workspace / "memory"
        return Folders(folder / validate_id(instance_id), folder / f"{instance_id}.fsm")

    def permissions(self, instance_id: str) -> int | None:
        """``0o600``: a document in memory is nobody else's to read (``fsm serve --reads
        private`` asks for the token, as for a private file)."""
        validate_id(instance_id)
        return 0o600

    # --- documents -------------------------------------------------------------------------

    def exists(self, instance_id: str) -> bool:
        """True when the instance has a document."""
        return validate_id(instance_id) in self.documents

    def read(self, instance_id: str) -> Snapshot:
        """The document's data, bytes and version."""
        with self.mutex:
            document = self.documents.get(validate_id(instance_id))
        if document is None:
            raise UnknownInstanceError(
                f"no instance '{instance_id}' ({self.describe(instance_id)})"
            )
        try:
            data = jsonio.loads(document.raw)
        except jsonio.JsonError as exc:
            raise CorruptDocumentError(
                f"corrupt document {self.describe(instance_id)}: not valid JSON ({exc})"
            ) from exc
        if not isinstance(data, dict):
            raise CorruptDocumentError(
                f"corrupt document {self.describe(instance_id)}: expected a JSON object, "
                f"found {type(data).__name__}"
            )
        return Snapshot(data, document.raw, document.version)

    def read_bytes(self, instance_id: str) -> bytes | None:
        """The document's bytes, or None."""
        document = self.documents.get(validate_id(instance_id))
        return None if document is None else document.raw

    def is_current(self, instance_id: str, raw: bytes) -> bool:
        """True when the document holds exactly ``raw``."""
        return self.read_bytes(instance_id) == raw

    def list_ids(self) -> list[str]:
        """Ids of every instance with a document."""
        with self.mutex:
            return sorted(self.documents)

    def write(self, instance_id: str, data: Mapping[str, Any]) -> None:
        """Replace the document without journal or merge, as another program would."""
        self.write_bytes(instance_id, (json.dumps(data, indent=2) + "\n").encode("utf-8"))

    def write_bytes(self, instance_id: str, raw: bytes) -> None:
        """Replace the document's bytes without journal or merge, as another program would."""
        with self.mutex:
            self._put(validate_id(instance_id), raw)

    def _put(self, instance_id: str, raw: bytes) -> None:
        self.documents[instance_id] = _Document(raw, next(self._versions), time.time_ns())
        self._notify(instance_id)

    # --- the transaction's primitives ------------------------------------------------------

    def swap(
        self,
        instance_id: str,
        build: Build,
        *,
        expected: bytes | None = None,
        fence: Lease | None = None,
    ) -> Swapped:
        """Compare-and-swap: ``build`` runs without the store's mutex (it may read the journal
        or park), the version it was given is compared under it."""
        validate_id(instance_id)
        for _ in range(MAX_ROUNDS):
            with self.mutex:
                document = self.documents.get(instance_id)
            current = None
            if document is not None:
                current = Snapshot(None, document.raw, document.version)
            proposal = build(current)
            with self.mutex:
                self._check(instance_id, fence)
                now = self.documents.get(instance_id)
                if (now is None) != (document is None) or (
                    now is not None and document is not None and now.version != document.version
                ):
                    continue  # another writer was quicker: build again on its version
                journal = self.journal(instance_id)
                for record in proposal.records:
                    journal.append(record.to_json())
                self._put(instance_id, proposal.raw)
            return Swapped(proposal, current)
        raise StoreError(f"the document of '{instance_id}' kept changing: nothing was written")

    def _check(self, instance_id: str, fence: Lease | None) -> None:
        if fence is not None and self.leases.get(instance_id) != fence.token:
            raise LeaseLostError(
                f"instance '{instance_id}': the run's lease (token {fence.token}) was taken "
                "over; nothing was written"
            )

    def append(
        self, instance_id: str, records: Sequence[Record], *, fence: Lease | None = None
    ) -> None:
        """Append ``records`` to the journal, all at once."""
        with self.mutex:
            self._check(validate_id(instance_id), fence)
            journal = self.journal(instance_id)
            for record in records:
                journal.append(record.to_json())
            self._notify(instance_id)

    def journal(self, instance_id: str) -> MemoryJournal:
        """The instance's journal."""
        with self.mutex:
            return self.journals.setdefault(validate_id(instance_id), MemoryJournal())

    def late_writes(self, instance_id: str, *, last: bool = False) -> list[LateWrite]:
        """None: every writer of a memory store replaces the whole document at once."""
        return []

    @contextlib.contextmanager
    def lock(self, instance_id: str, timeout: float = 10.0) -> Iterator[None]:
        """Hold the instance's document lock."""
        with self.mutex:
            lock = self._locks.setdefault(validate_id(instance_id), threading.Lock())
        if not lock.acquire(timeout=timeout):
            raise LockHeldError(
                f"instance '{instance_id}': document lock not released within {timeout:.0f}s"
            )
        try:
            yield
        finally:
            lock.release()

    def lease(self, instance_id: str) -> MemoryLease:
        """Take the run lease; LockHeldError when another run holds it."""
        with self.mutex:
            held = self.leases.get(validate_id(instance_id))
            if held is not None:
                raise LockHeldError(f"instance '{instance_id}' is already being run (lease {held})")
            token = self.leases[instance_id] = next(self._tokens)
        return MemoryLease(self, instance_id, token)

    def expire(self, instance_id: str) -> None:
        """Let the current lease of ``instance_id`` expire, as a database store does when its
        holder stops renewing it: another run may take the instance, and the old lease's writes
        are refused."""
        with self.mutex:
            token = self.leases.pop(validate_id(instance_id), None)
            watchers = self.watchers.pop(instance_id, [])
        for held, lost in watchers:
            if held == token:
                lost()

    def session(self, instance_id: str) -> contextlib.AbstractContextManager[None]:
        """Nothing to keep open."""
        return contextlib.nullcontext()

    # --- what cannot be committed, what cannot be read -------------------------------------

    def park(self, instance_id: str, data: Mapping[str, Any]) -> str:
        """Keep ``data`` in :attr:`parked`."""
        with self.mutex:
            kept = self.parked.setdefault(validate_id(instance_id), [])
            kept.append(dict(data))
            return f"memory:{self.machine}/{instance_id}/unsaved-step-{len(kept)}"

    def quarantine(self, instance_id: str) -> str | None:
        """Move the document into :attr:`quarantined`."""
        with self.mutex:
            document = self.documents.pop(validate_id(instance_id), None)
            if document is None:
                return None
            kept = f"memory:{self.machine}/{instance_id}.corrupt-{len(self.quarantined) + 1}"
            self.quarantined[kept] = document.raw
            self._notify(instance_id)
            return kept

    def restore(self, instance_id: str, kept: str) -> None:
        """Put a quarantined document back."""
        with self.mutex:
            self._put(validate_id(instance_id), self.quarantined.pop(kept))

    def needs_repair(self, instance_id: str) -> bool:
        """Never: a swap is whole or not at all."""
        return False

    def repair(self, instance_id: str) -> Repaired:
        """Nothing to repair."""
        return Repaired()

    # --- readers ---------------------------------------------------------------------------

    def listed(self, instance_id: str) -> Listed:
        """The document, when it was written, and the machine its first record names."""
        with self.mutex:
            document = self.documents.get(validate_id(instance_id))
            journal = self.journals.get(instance_id)
            first = journal.lines[0] if journal is not None and journal.lines else None
        record = json.loads(first) if first is not None else {}
        creator, version = record.get("machine"), version_named(record)
        if document is None:
            return Listed(None, 0, creator, f"no instance '{instance_id}'", version)
        return Listed(document.raw, document.modified_ns, creator, None, version)

    def stamp(self, instance_id: str) -> list[int] | None:
        """The document's version and the journal's length."""
        with self.mutex:
            document = self.documents.get(validate_id(instance_id))
            journal = self.journals.get(instance_id)
            if document is None:
                return None
            return [document.version, 0 if journal is None else len(journal.lines)]

    async def changes(self, stop: asyncio.Event) -> AsyncIterator[set[str] | None]:
        """The ids written since, as they are written (from any thread)."""
        queue: asyncio.Queue[set[str]] = asyncio.Queue()
        watcher = (asyncio.get_running_loop(), queue)
        with self.mutex:
            self._watchers.append(watcher)
        waiting = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                getting = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait(
                    {getting, waiting}, return_when=asyncio.FIRST_COMPLETED
                )
                if getting not in done:
                    getting.cancel()
                    break
                yield getting.result()
        finally:
            waiting.cancel()
            with self.mutex:
                self._watchers.remove(watcher)

    def _notify(self, instance_id: str) -> None:
        for loop, queue in self._watchers:
            with contextlib.suppress(RuntimeError):  # its loop has closed
                loop.call_soon_threadsafe(queue.put_nowait, {instance_id})


class MemoryStorage:
    """The stores of a workspace's machines, in memory: ``Workspace(path, storage=...)``."""

    def __init__(self) -> None:
        self.stores: dict[tuple[Path, str], MemoryStore] = {}
        self._mutex = threading.Lock()

    def __call__(self, layout: Layout) -> MemoryStore:
        key = (layout.workspace, layout.machine)
        with self._mutex:
            store = self.stores.get(key)
            if store is None:
                store = self.stores[key] = MemoryStore(layout.workspace, layout.machine)
        return store

    def store_of(self, machine: Any) -> MemoryStore:
        """The store of ``machine`` (a Machine or its name; the only workspace's that holds
        one)."""
        name = machine if isinstance(machine, str) else machine.name
        found = [store for (_, held), store in self.stores.items() if held == name]
        if len(found) != 1:
            raise LookupError(f"{len(found)} memory stores hold machine '{name}'")
        return found[0]


shared_storage = MemoryStorage()
"""The memory stores of this process (the store registered as ``memory``)."""


def shared_store(layout: Layout) -> MemoryStore:
    """The memory store of ``layout`` in this process (the factory registered as ``memory``)."""
    return shared_storage(layout)
