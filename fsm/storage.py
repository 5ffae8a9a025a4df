"""The store interface: what the engine and :class:`~fsm.instance.Instance` need from a store.

A store keeps the documents of one machine's instances in one workspace and their journals.
The engine and ``Instance`` use a store only through these protocols, so that another store
(a database) can be added without touching either. The one fsm ships keeps them in files:
:class:`fsm.store.FileStore`, whose committer is :class:`fsm.commit.Committer`; a second one,
in memory, is :class:`fsm.testing.MemoryStore`. A workspace is given another store with
``Workspace(..., storage=...)``.

* :class:`Store`: one machine's documents: read, list, lock, and the journal and committer of
  each instance.
* :class:`Committing`: how one instance's new versions are written: under the document lock,
  re-read the current version, merge what other writers changed since the step's base
  (:mod:`fsm.merge`), validate, write, journal, and run the ``after_save`` hook.
* :class:`JournalLog`: an instance's append-only journal (record fields: :mod:`fsm.journal`).

What stays outside the store wherever documents live: the instance's log and the records of the
commands it runs, in its meta folder in the workspace (:attr:`fsm.store.InstancePaths.meta`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from fsm.errors import JournalRecordError
    from fsm.instance import Instance, Loaded
    from fsm.journal import JournalRead
    from fsm.machine import Machine
    from fsm.records import ErrorRecord, Record
    from fsm.store import InstancePaths, Snapshot

__all__ = ["Committing", "JournalLog", "RunLock", "Store", "StoreFactory"]


class RunLock(Protocol):
    """A run lock taken: released at the end of the run."""

    def release(self) -> None:
        """Let another run take the instance."""
        ...


class JournalLog(Protocol):
    """An instance's journal: records appended in order, never rewritten."""

    def append(self, record: Mapping[str, Any]) -> int:
        """Append ``record``; return the journal's :meth:`size` before it."""
        ...

    def size(self) -> int:
        """A mark of the journal's end, for :meth:`truncate`."""
        ...

    def truncate(self, size: int) -> None:
        """Take back the records appended since :meth:`size` returned ``size`` (a write that
        lost its race with another writer is journaled again after the merge)."""
        ...

    def read(self) -> JournalRead:
        """Every record, and the positions of unreadable ones."""
        ...

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
        """``(position, text, record)`` for every record, first to last (``None``: the
        record is unreadable)."""
        ...

    def backwards(self) -> Iterator[dict[str, Any]]:
        """The readable records, last first."""
        ...

    def write(self, record: Record) -> int:
        """Append ``record`` (:mod:`fsm.records`); return the journal's mark before it."""
        ...

    def entries(self) -> Iterator[tuple[int, Record | JournalRecordError | None]]:
        """``(line number, record)`` for every line, first to last (None: unreadable; a
        JournalRecordError: JSON that is not a record this fsm reads)."""
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

    def has_torn_tail(self) -> bool:
        """True when the last record was cut short by a crash while it was appended."""
        ...

    def drop_torn_tail(self) -> bool:
        """Remove a record cut short by a crash; True if there was one."""
        ...

    def kept_open(self) -> AbstractContextManager[None]:
        """Keep what appending needs open meanwhile (a run's steps)."""
        ...


class Committing(Protocol):
    """Writes the versions of one instance's document (:class:`fsm.commit.Committer` for files).

    Every method that writes takes the document lock itself, unless told the caller holds it.
    """

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Write ``data`` (the step's result from ``base``; None: a new document, written as
        it is) merged with what other writers changed since ``base``, journal ``record`` with
        the hashes of what was written, run the ``after_save`` hook; return what was written.
        """
        ...

    def journal_failure(self, record: Record, *, base: Loaded) -> Loaded:
        """Journal a failed step that changes no document; return the current version."""
        ...

    def still(self, raw: bytes) -> bool:
        """True when the document holds exactly ``raw`` now (the version this instance
        committed last may then be used without reading and validating it again)."""
        ...

    def reconcile(self, loaded: Loaded) -> Loaded:
        """``loaded``, just read, or a version that also keeps fsm's latest work when another
        writer wrote an older version of fsm's back with its own change."""
        ...

    def park(self, data: Mapping[str, Any]) -> str | os.PathLike[str]:
        """Keep a step's result that cannot be committed; return where it was kept."""
        ...

    def repair(self) -> list[str]:
        """Make the journal and the document agree after a crash; return what was done."""
        ...

    def settle(self) -> None:
        """End of an operation: take in what another writer wrote meanwhile, let go."""
        ...

    def files_kept_open(self) -> AbstractContextManager[None]:
        """Keep what each commit uses open meanwhile (a run's steps)."""
        ...


class Store(Protocol):
    """The documents of one machine's instances in one workspace (:class:`fsm.store.FileStore`
    for files). Ids are validated by the store before they are used."""

    read_retries: int
    """Reads again of a document that does not parse (another writer may be midway in it):
    the machine's ``storage.read_retries``."""
    retry_interval: float
    """Seconds between those reads."""

    def paths(self, instance_id: str) -> InstancePaths:
        """Where the instance is shown to be (its document) and its meta folder (its log and the
        records of its running commands, kept in the workspace)."""
        ...

    def exists(self, instance_id: str) -> bool:
        """True when the instance's document exists."""
        ...

    def read(self, instance_id: str) -> Snapshot:
        """The document's JSON data and exact bytes (UnknownInstanceError when there is none,
        CorruptDocumentError when it is not a JSON object, StoreError when it cannot be read)."""
        ...

    def read_raw_bytes(self, instance_id: str) -> bytes | None:
        """The document's bytes, or None when it does not exist."""
        ...

    def render(self, data: Mapping[str, Any]) -> str:
        """The text a document is written as (ValueError when it is not strict JSON)."""
        ...

    def list_ids(self) -> list[str]:
        """Ids of every instance whose document exists, sorted."""
        ...

    def document_lock(
        self, instance_id: str, timeout: float = 10.0
    ) -> AbstractContextManager[None]:
        """Hold the document lock around a read-modify-write (LockHeldError after
        ``timeout`` seconds)."""
        ...

    def run_lock(self, instance_id: str) -> RunLock:
        """Take the run lock without waiting (LockHeldError when another run holds it)."""
        ...

    def keeping_locks_open(self, instance_id: str) -> AbstractContextManager[None]:
        """Keep what the document lock needs open meanwhile (a run's steps)."""
        ...

    def journal(self, instance_id: str) -> JournalLog:
        """The instance's journal."""
        ...

    def committer(self, instance: Instance) -> Committing:
        """What writes ``instance``'s versions."""
        ...

    def confined(self) -> AbstractContextManager[None]:
        """Meanwhile, the files machines write through :mod:`fsm.store` stay inside the
        workspace (the engine runs guards, actions and hooks in it)."""
        ...


StoreFactory = Callable[[Path, "Machine", BaseModel], Store]
"""What ``Workspace(storage=...)`` takes: the store of one machine's instances, made from the
workspace's folder, the machine and its options."""
