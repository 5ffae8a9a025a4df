"""The store interface: the primitives a store supplies, and nothing else.

A store keeps the documents of one machine's instances and their journals. Everything above it
(the transaction of :mod:`fsm.engine.transaction`, the engine, the control plane, ``fsm ls``, ``fsm
serve``, ``recover``, ``history``, ``replay``) uses a store only through :class:`Store`, so a new
store (a database) is a class with these methods, registered by name (:mod:`fsm.store.selection`),
and proven by the conformance suite :class:`fsm.testing.StoreContract`. The stores fsm ships are
:class:`fsm.store.file_store.FileStore` (the CCW-compatible files) and
:class:`fsm.testing.MemoryStore`. ``docs/stores.md`` is the store author's reference.

The primitives, in short:

* documents: :meth:`Store.read` (data, exact bytes, version), :meth:`Store.read_bytes`,
  :meth:`Store.exists`, :meth:`Store.list_ids`, :meth:`Store.is_current`;
* :meth:`Store.swap`: compare-and-swap of a document with its journal records in one
  transaction: the store reads the current version, asks the caller what to write on it
  (``build``), and writes it and appends the records only if the document is still that
  version, else asks again on the newer one;
* the journal: :meth:`Store.append` (records that change no document) and :meth:`Store.journal`
  (reading it back);
* locks: :meth:`Store.lock` (serialises fsm's read-modify-writes of one document),
  :meth:`Store.lease` (one run at a time, with a fencing token checked in every write);
* :meth:`Store.park` (a step's result that cannot be committed), :meth:`Store.quarantine` and
  :meth:`Store.restore` (an unreadable document moved aside, never deleted);
* :meth:`Store.changes` (wait for changes), :meth:`Store.listed` and :meth:`Store.stamp` (what
  ``fsm ls`` shows of an instance, and what changes when it changes);
* crash and concurrency housekeeping that some stores need and others answer trivially:
  :meth:`Store.needs_repair` / :meth:`Store.repair` (after a process was killed midway),
  :meth:`Store.late_writes` (a program outside fsm's transaction wrote into a version fsm
  replaced), :meth:`Store.session` (keep what a run's steps use open).

Documents are kept as exact bytes (the journal's hashes and other programs depend on them); the
rules of a machine's documents (validation, rendering, hashing) are the caller's
(:class:`fsm.engine.rules.DocumentRules`), never the store's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fsm.base import jsonio
from fsm.base.errors import CorruptDocumentError

if TYPE_CHECKING:
    import asyncio

    from fsm.base.errors import JournalRecordError
    from fsm.model.records import ErrorRecord, Record
    from fsm.store.chain import Check
    from fsm.store.journal import JournalRead

__all__ = [
    "Administered",
    "Build",
    "Claim",
    "Claiming",
    "Folders",
    "JournalLog",
    "LateWrite",
    "Layout",
    "Lease",
    "Listed",
    "Proposal",
    "Repaired",
    "Snapshot",
    "Store",
    "StoreFactory",
    "Swapped",
]


class Snapshot:
    """A document as its store holds it: its JSON data, the exact bytes it came from, and the
    store's version token (opaque to everyone but the store that made it).

    ``data`` may be left to be parsed from ``raw`` when it is first asked for (a swap hands
    the transaction versions it mostly compares by their bytes): CorruptDocumentError then,
    when ``raw`` is not a JSON object.
    """

    __slots__ = ("_data", "raw", "version")

    def __init__(self, data: dict[str, Any] | None, raw: bytes, version: Any = None) -> None:
        self._data = data
        self.raw = raw
        self.version = version

    @property
    def data(self) -> dict[str, Any]:
        """The document's JSON object."""
        if self._data is None:
            try:
                data = jsonio.loads(self.raw)
            except jsonio.JsonError as exc:
                raise CorruptDocumentError(f"not a JSON document: {exc}") from exc
            if not isinstance(data, dict):
                raise CorruptDocumentError(f"not a JSON object: {type(data).__name__}")
            self._data = data
        return self._data


@dataclass(slots=True)
class Proposal:
    """What a transaction writes on a version: the document's bytes and the journal records
    appended with it (in order: the same write makes both visible, or neither), and what the
    document says of itself, for stores that index it (a database claims runnable instances by
    it): its FSM state, its control status, and whether a run would drive it (not in a final
    state; running, or created and waiting for a run to start it: the rule of ``fsm run
    --all``)."""

    raw: bytes
    records: Sequence[Record]
    state: str | None = None
    status: str | None = None
    runnable: bool = False


Build = Callable[["Snapshot | None"], Proposal]
"""What :meth:`Store.swap` asks: given the current version (None: there is no document), the
proposal to write on it. It may raise: nothing is written then."""


@dataclass(slots=True)
class LateWrite:
    """A change another program made that never reached the document: it wrote ``raw`` in
    place of ``before``, a version fsm had replaced meanwhile (a program without a lock that
    rewrites the file it opened before fsm's swap)."""

    before: bytes
    raw: bytes


@dataclass(slots=True)
class Swapped:
    """What :meth:`Store.swap` wrote: the proposal, on which version, and a late write it found
    while swapping (the caller merges it into a new version)."""

    proposal: Proposal
    replaced: Snapshot | None
    late: LateWrite | None = None


@dataclass(frozen=True)
class Repaired:
    """What :meth:`Store.repair` did: one note per repair, and the bytes of a write it completed
    (its ``after_save`` hook has not run; the caller runs it)."""

    notes: list[str] = field(default_factory=list)
    completed: bytes | None = None


@dataclass(slots=True)
class Listed:
    """What ``fsm ls`` reads of one instance: its document's bytes (None when they cannot be
    read: ``error`` says why), when it was last written (nanoseconds since the epoch), and the
    machine the journal's first record names (None when the journal names none or there is no
    journal)."""

    raw: bytes | None
    modified_ns: int
    creator: str | None
    error: str | None = None
    definition: str | None = None
    """The ``version:`` of its machine the instance runs under, as far as a cheap read tells
    (the journal's first record, or a store's column): None when not recorded."""


@dataclass(frozen=True)
class Folders:
    """The instance's folders in the workspace, whatever store keeps its document: ``files``,
    where its machine writes side files (progress files, reports), and ``meta``, where fsm keeps
    its log and the records of the commands it runs on this host."""

    files: Path
    meta: Path


@dataclass(frozen=True)
class Layout:
    """What a store is made from for one machine in one workspace (plain data: ``fsm ls``
    makes a store from a saved one without importing the machine)."""

    workspace: Path
    machine: str
    document: str
    """The machine's storage template of the document's path (``{id}`` and option names)."""
    meta: str | None
    values: Mapping[str, Any]
    """The machine's option values the templates name."""
    read_retries: int = 3
    retry_interval: float = 0.05
    settings: Mapping[str, Any] = field(default_factory=dict)
    """The ``[store]`` table of fsm.toml (a database's address, ...)."""
    space: str = ""
    """The name the workspace's instances are kept under in a store several workspaces share (a
    database): ``space`` in ``[store]`` of fsm.toml, '' when it names none. It is the
    workspace's identity there: never guessed from the folder's name (two projects at
    ``/a/app`` and ``/b/app`` would share it), written by ``fsm store init`` when missing.
    Checkouts of one project on several hosts share their instances by having the same one (the
    fsm.toml committed with the project)."""
    queue: str | None = None
    """The queue of the instances created here, unless ``fsm new --queue`` names another: the
    space; None for machines whose instances need no workspace (any worker of the space runs
    them). Stores shared by several workspaces keep it; workers claim by it."""
    runs: tuple[str, ...] | None = None
    """The ``version:`` values of the machine whose instances the installed definition can run
    (its own, and every version a declared migration starts from; :mod:`fsm.model.migrations`):
    a store whose workers claim (PostgreSQL) claims only instances of these, or of no recorded
    version. None: any."""


class Lease(Protocol):
    """A run's hold on one instance (:meth:`Store.lease`), released at the end of the run.

    ``token`` is the fencing token: it grows with every lease of the instance, and a store
    refuses a write fenced by a lease that is no longer the instance's (lost by expiry and taken
    over by another run), so a run that lost its lease can never commit again.
    """

    token: int

    def held(self) -> bool:
        """True while this lease is still the instance's."""
        ...

    def release(self) -> None:
        """Let another run take the instance."""
        ...

    def watch(self, lost: Callable[[], None]) -> None:
        """Call ``lost`` (from another thread, once) as soon as the store learns that this lease
        is lost (its holder stopped renewing it in time): the run kills the commands it runs,
        whose work can no longer be committed. Stores whose leases are never lost ignore it."""
        ...


class Claim(Lease, Protocol):
    """A lease a worker claimed (:meth:`Claiming.claim`): which instance it is on and, when the
    store read it with the claim (in the same statement), the document's bytes then."""

    instance_id: str
    raw: bytes | None
    """The document as the claim found it (None: the store did not read it; the run reads it).
    A run takes it as its first read, at the moment of the claim: it is never kept longer."""


@runtime_checkable
class Claiming(Protocol):
    """What a store offers workers (``fsm worker``) beyond :class:`Store`: claiming runnable
    instances without scanning them. Optional: the worker scans the others' instances as
    ``fsm run --all`` does (see :mod:`fsm.worker`)."""

    def claim(self, queues: Sequence[str] | None, skip: Collection[str] = ()) -> Claim | None:
        """Take the lease of one runnable instance (see :class:`Proposal`) that no live run
        holds, whose queue is one of ``queues`` or none (``queues`` None: any queue), and whose
        id is not in ``skip``; None when there is none. Two claims never return the same
        instance while its lease holds."""
        ...

    def wait_for_work(self, timeout: float) -> None:
        """Return when an instance may have become claimable (written runnable, released, its
        holder's lease expired), or after ``timeout`` seconds: a worker with nothing to do
        waits here rather than claiming again and again."""
        ...


@runtime_checkable
class Administered(Protocol):
    """What ``fsm store init``, ``import`` and ``export`` use, for stores that offer them."""

    def initialize(self) -> list[str]:
        """Create or upgrade what the store keeps its instances in (idempotent); return what
        was done, one line each (empty when it was up to date)."""
        ...

    def import_instance(
        self,
        instance_id: str,
        raw: bytes,
        lines: Sequence[str],
        proposal: Proposal,
        *,
        over: tuple[bytes, Sequence[str]] | None = None,
        keep: bool = False,
    ) -> str | None:
        """Keep ``raw`` as the instance's document and ``lines`` (the journal's lines, each the
        JSON text of a record) as its journal, byte-exact; ``proposal`` says what the document
        says of itself (its ``raw`` and ``records`` are not used). ``over``: the document and
        journal lines the caller read from this store and compared with (None: the instance
        must have no document here); nothing is changed, and None returned, when the instance
        is not exactly that any more. With ``over``, ``keep`` replaces the instance, keeping the
        replaced copy where the store keeps such things; else ``lines`` extend ``over``'s and
        only the rest are appended. Returns what was done, for people."""
        ...

    def adopt(self) -> list[str]:
        """Make the instances of the workspace's space whose workspace is not known (made by
        an fsm that guessed spaces from folder names) this workspace's; return their ids."""
        ...

    def export_instance(self, instance_id: str) -> tuple[bytes, list[str]] | None:
        """The document's bytes and the journal's lines, byte-exact (None: no document)."""
        ...


class JournalLog(Protocol):
    """An instance's journal as readers see it: records in the order they were appended.

    A store supplies :meth:`scan` and :meth:`backwards`; the typed readings are derived from them
    by mixing in :class:`fsm.store.journal.TypedRecords`.
    """

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
        """``(position, text, object)`` for every record, first to last (``None``: the record
        is unreadable)."""
        ...

    def backwards(self) -> Iterator[dict[str, Any]]:
        """The readable records' objects, last first."""
        ...

    def read(self) -> JournalRead:
        """Every record's object, and the positions of unreadable ones."""
        ...

    def entries(
        self, links: Check | None = None
    ) -> Iterator[tuple[int, Record | JournalRecordError | None]]:
        """``(position, record)`` for every record, first to last (None: unreadable; a
        JournalRecordError: JSON that is not a record this fsm reads); ``links`` follows the
        journal's chain on the way (:mod:`fsm.store.chain`)."""
        ...

    def records(self) -> list[Record]:
        """Every record this fsm can read, first to last."""
        ...

    def records_backwards(self) -> Iterator[Record]:
        """The records this fsm can read, last to first."""
        ...

    def last(self) -> Record | None:
        """The last readable record."""
        ...

    def last_error(self) -> ErrorRecord | None:
        """The latest failed-step record not followed by a step that worked."""
        ...


class Store(Protocol):
    """The documents and journals of one machine's instances (see the module docstring).

    Every method validates the id it is given (:func:`fsm.base.ids.validate_id`) before using it.
    """

    name: str
    """The name the store is registered under (``files``, ``memory``)."""

    def describe(self, instance_id: str) -> str:
        """Where the instance's document is, for messages (a path, a table's row)."""
        ...

    def folders(self, instance_id: str) -> Folders:
        """The instance's folders in the workspace (see :class:`Folders`)."""
        ...

    def permissions(self, instance_id: str) -> int | None:
        """The permission bits the instance's document is kept with (``0o600`` for a private
        one), or None where the store has no such notion or there is no document: the files a
        machine writes for the instance are kept no more open than its document."""
        ...

    def exists(self, instance_id: str) -> bool:
        """True when the instance has a document."""
        ...

    def read(self, instance_id: str) -> Snapshot:
        """The current version (UnknownInstanceError when there is none, CorruptDocumentError
        when it is not a JSON object, StoreError when it cannot be read)."""
        ...

    def read_bytes(self, instance_id: str) -> bytes | None:
        """The document's bytes whether or not they parse (None when there is none): what
        ``fsm recover`` hands the machine's hook."""
        ...

    def is_current(self, instance_id: str, raw: bytes) -> bool:
        """True when the document holds exactly ``raw`` now (cheaply: a run asks before every
        step whether the version it committed last is still the document)."""
        ...

    def list_ids(self) -> list[str]:
        """Ids of every instance that has a document, sorted."""
        ...

    def swap(
        self,
        instance_id: str,
        build: Build,
        *,
        expected: bytes | None = None,
        fence: Lease | None = None,
    ) -> Swapped:
        """Compare-and-swap: read the current version, call ``build`` with it, and write the
        proposal's bytes and append its records, atomically, only if the document is still the
        version ``build`` was given (None: still absent); else call ``build`` again with the
        newer version (StoreError after a few dozen rounds). ``expected``: the bytes the caller
        last read (a store whose documents other programs rewrite in place waits a moment for
        a version that does not parse). ``fence``: refuse (LeaseLostError) when that lease is
        no longer the instance's. What ``build`` raises propagates, nothing written.
        """
        ...

    def append(
        self, instance_id: str, records: Sequence[Record], *, fence: Lease | None = None
    ) -> None:
        """Append ``records`` to the journal, all or none (a failed step, a repair, a change
        another program made between steps). The caller holds :meth:`lock`."""
        ...

    def journal(self, instance_id: str) -> JournalLog:
        """The instance's journal, for reading."""
        ...

    def lock(self, instance_id: str, timeout: float = 10.0) -> AbstractContextManager[None]:
        """Hold the document lock around a read-modify-write: fsm's writers of one document
        take turns (LockHeldError after ``timeout`` seconds)."""
        ...

    def lease(self, instance_id: str) -> Lease:
        """Take the run lease without waiting (LockHeldError naming the holder when another
        run holds it)."""
        ...

    def park(self, instance_id: str, data: Mapping[str, Any]) -> str:
        """Keep a step's result that cannot be committed; return where it was kept."""
        ...

    def quarantine(self, instance_id: str) -> str | None:
        """Move the (unreadable) document aside, never over an earlier one; return where it is
        kept (None when there is no document). The instance then has no document."""
        ...

    def restore(self, instance_id: str, kept: str) -> None:
        """Put back the document :meth:`quarantine` kept at ``kept`` (an aborted recovery)."""
        ...

    def needs_repair(self, instance_id: str) -> bool:
        """A cheap look, without the lock: may a process killed midway have left the instance
        with its journal and document disagreeing (False for stores whose writes are atomic)."""
        ...

    def repair(self, instance_id: str) -> Repaired:
        """Make journal and document agree after a crash (the caller holds :meth:`lock`)."""
        ...

    def late_writes(self, instance_id: str, *, last: bool = False) -> list[LateWrite]:
        """Changes other programs wrote into versions this store replaced since they were last
        asked for (the caller holds :meth:`lock`, or asks at the end of an operation with
        ``last``: the store then lets go of what it kept to watch)."""
        ...

    def session(self, instance_id: str) -> AbstractContextManager[None]:
        """Keep what each step of a run uses open meanwhile."""
        ...

    def listed(self, instance_id: str) -> Listed:
        """What ``fsm ls`` shows of the instance (a document that cannot be read is told in
        :attr:`Listed.error`, never raised)."""
        ...

    def stamp(self, instance_id: str) -> Any:
        """A JSON value that changes whenever the document or the journal changes (None when
        there is no document): ``fsm ls`` keeps a row while its stamp is unchanged."""
        ...

    def changes(self, stop: asyncio.Event) -> AsyncIterator[set[str] | None]:
        """Until ``stop`` is set, the ids of instances whose document or journal changed, in
        batches as they come (None: reload everything)."""
        ...


StoreFactory = Callable[[Layout], Store]
"""What a store is made with: the store of one machine's instances in one workspace."""
