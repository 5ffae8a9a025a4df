"""The PostgreSQL store: one machine's instances in the tables of :mod:`fsm.postgres.schema`.

The primitives of :class:`fsm.store.protocol.Store`, and the optional
:class:`fsm.store.protocol.Claiming` (``fsm worker``) and :class:`fsm.store.protocol.Administered`
(``fsm store init``, ``import``, ``export``):

* a document is its exact bytes (``bytea``) and a version number; :meth:`PostgresStore.swap` is
  one statement: the ``UPDATE`` of the row *if its version is still the one the build was given*
  (and, for a run, if the run's claim is still the row's: the fencing token and the holder's
  lease, checked by the server's clock), the ``INSERT`` of the journal records numbered after
  the row's count, and the notifications; nothing is written when the version moved on, and
  the build is made again on the newer one;
* the document lock is a transaction-scoped advisory lock of the instance: writers of one
  document take turns; a write commits the lock's transaction (a step is durable when the swap
  returns), and the lock is taken again before the next write of the same block;
* a run's lease is a claim of the row by the process's holder (:mod:`fsm.postgres.database`):
  the holder is written into the row and the fencing token grows by one; a claim whose holder's
  lease expired is freed by the next claimer, and the old holder's writes are refused from then
  on (its token and its lease no longer match);
* a write whose connection was lost while it committed is looked up before it is tried again:
  it is never applied twice.

The instance's side files and its meta folder (log, records of running commands) stay in the
workspace of the host that runs it, where the file store would put them
(:meth:`PostgresStore.folders`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from fsm.base import jsonio
from fsm.base.errors import (
    CorruptDocumentError,
    ForeignInstanceError,
    InstanceHeldError,
    InvalidIdError,
    LeaseLostError,
    LockHeldError,
    OptionsError,
    StoreError,
    UnknownInstanceError,
)
from fsm.base.ids import validate_id
from fsm.model.identity import DEFINITION
from fsm.model.records import Record
from fsm.postgres.copies import import_instance
from fsm.postgres.database import CHANGES, WORK, Database, Holder, Settings, database
from fsm.store import chain
from fsm.store.file_store import FileStore
from fsm.store.heartbeat import Heartbeat
from fsm.store.journal import JournalRead, TypedRecords, line_bytes
from fsm.store.protocol import (
    Build,
    Folders,
    LateWrite,
    Layout,
    Lease,
    Listed,
    Proposal,
    Repaired,
    Snapshot,
    Swapped,
)

__all__ = ["PostgresHeartbeats", "PostgresJournal", "PostgresLease", "PostgresStore"]

MAX_ROUNDS = 50
"""Rounds a swap may redo while other writers keep changing the document."""
PAGE = 1000
"""Journal records read at a time."""
ABSENT = -1
"""The version of an instance that has no row yet."""

_FENCED = """
    AND (%(holder)s::bigint IS NULL OR (
        i.holder = %(holder)s AND i.fence = %(fence)s
        AND EXISTS (SELECT 1 FROM fsm_holders h
                    WHERE h.id = %(holder)s AND h.expires > statement_timestamp())))
"""

_ASYNC = "set_config('synchronous_commit', 'off', true)"
"""In a claim (and a run's notifications): its transaction's commit does not wait for the
write-ahead log to reach the disk (the setting in effect when a transaction commits is the one
that counts; ``true``: for this transaction only). A claim need not outlive a crash of the server
on its own: the log is written in order, so the first step the claim leads to, committed
synchronously, makes the claim durable with it; a claim lost with the server (no step committed
on it) is only an instance claimable again, and the writes fenced by it are refused. A release
does wait for the disk: one lost with the server would leave the instance held by a worker that
lives on and renews its lease, so that no other worker could claim it until that worker ends,
and an ended instance named as held. Every step's commit waits for the disk: a
worker commits one flush per step, as the bare loop of the benchmarks does, and one more per
instance for its release."""

_LOCKING = """
fsm_lock AS MATERIALIZED (
    SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS timeout,
        pg_advisory_xact_lock(hashtextextended(%(lock_key)s, 0)) AS taken
),"""
"""A write's first part when it takes the document lock itself (see :meth:`Database.inline_lock`):
the lock of its own transaction (the statement's), before the row is touched: ``_LOCKED`` in
the ``UPDATE``'s condition makes the server take it first (a condition without a column is
evaluated once, before the scan). A writer that held the lock and changed the row meanwhile
has committed by then, and the compare-and-swap sees its version."""
_LOCKED = "AND EXISTS (SELECT 1 FROM fsm_lock)"

_SWAP = """
WITH {lock} target AS (
    UPDATE fsm_instances AS i SET
        raw = %(raw)s, version = i.version + 1, modified = clock_timestamp(),
        state = %(state)s, status = %(status)s, runnable = %(runnable)s,
        records = i.records + %(count)s,
        queue = CASE WHEN i.records = 0 THEN %(queue)s ELSE i.queue END,
        creator = coalesce(i.creator, %(creator)s),
        definition = coalesce(%(definition)s, i.definition)
    WHERE i.space = %(space)s AND i.machine = %(machine)s AND i.id = %(id)s
      AND i.version = %(version)s AND i.records = %(records)s
    {fenced} {locked}
    RETURNING i.records - %(count)s AS base, i.version, i.holder
), journal AS (
    INSERT INTO fsm_journal (space, machine, id, position, line)
    SELECT %(space)s, %(machine)s, %(id)s, target.base + l.n, l.line
    FROM target, json_array_elements_text(%(lines)s::json) WITH ORDINALITY AS l(line, n)
)
SELECT target.version {notify}
FROM target
"""
_SWAP_NOTIFY = """, pg_notify('{changes}', %(key)s),
    CASE WHEN %(runnable)s AND (target.holder IS NULL OR NOT EXISTS (
        SELECT 1 FROM fsm_holders h
        WHERE h.id = target.holder AND h.expires > statement_timestamp()))
    THEN pg_notify('{work}', %(key)s) END"""

_APPEND = """
WITH {lock} target AS (
    UPDATE fsm_instances AS i SET
        records = i.records + %(count)s, creator = coalesce(i.creator, %(creator)s)
    WHERE i.space = %(space)s AND i.machine = %(machine)s AND i.id = %(id)s
      AND i.records = %(records)s
    {fenced} {locked}
    RETURNING i.records - %(count)s AS base
), journal AS (
    INSERT INTO fsm_journal (space, machine, id, position, line)
    SELECT %(space)s, %(machine)s, %(id)s, target.base + l.n, l.line
    FROM target, json_array_elements_text(%(lines)s::json) WITH ORDINALITY AS l(line, n)
)
SELECT target.base {notify} FROM target
"""
_APPEND_NOTIFY = ", pg_notify('{changes}', %(key)s)"

_NOTES = f"""pg_notify('{CHANGES}', %(key)s),
    CASE WHEN i.runnable AND (i.holder IS NULL OR NOT EXISTS (
        SELECT 1 FROM fsm_holders h
        WHERE h.id = i.holder AND h.expires > statement_timestamp()))
    THEN pg_notify('{WORK}', %(key)s) END,
    {_ASYNC}
FROM fsm_instances i WHERE i.space = %(space)s AND i.machine = %(machine)s AND i.id = %(id)s
"""
_NOTIFIED = f"SELECT {_NOTES}"
"""The notifications of a run's write (see :class:`_Written`), in a transaction of their own
that commits without waiting for the disk."""
_VERSION_NOTIFIED = f"SELECT i.version, {_NOTES}"
"""The version at a run's step boundary, carrying the notifications of the run's last write
(see :class:`_Written`)."""


@dataclass(frozen=True)
class _Written:
    """The statements of one kind of write (a swap, an append).

    A notification holds a lock of the whole server from its transaction's commit until the
    commit has reached the disk (the server keeps notifications in commit order): writes that
    notify in their own transaction commit one after another, each waiting for its own flush,
    where writes that do not are flushed together (a group commit). So the writes of runs
    (fenced by a lease: many workers' steps) notify in a transaction of their own, committed
    without waiting for the disk: in a run's session, the look at the version at the next step
    boundary carries them (``_VERSION_NOTIFIED``; a moment later: the boundary follows the
    commit at once), or the session's end when no boundary came; outside one, a statement of
    their own sent right after the write in the same round trip (``_NOTIFIED``). A write
    without a lease (a control command, a new instance) notifies in its own transaction, so
    that its notification is never sent without it nor lost apart from it.
    """

    notifying: str
    """Notifying in the statement, the lock held already (or none needed)."""
    notifying_locking: str
    """Notifying, taking the document lock itself (see :meth:`Database.inline_lock`)."""
    silent: str
    """Not notifying (a run's write), the lock held already."""
    silent_locking: str
    """Not notifying, taking the document lock itself."""

    @classmethod
    def of(cls, template: str, notify: str) -> _Written:
        common = {"fenced": _FENCED}
        notify = notify.format(changes=CHANGES, work=WORK)
        return cls(
            template.format(lock="", locked="", notify=notify, **common),
            template.format(lock=_LOCKING, locked=_LOCKED, notify=notify, **common),
            template.format(lock="", locked="", notify="", **common),
            template.format(lock=_LOCKING, locked=_LOCKED, notify="", **common),
        )


_SWAPS = _Written.of(_SWAP, _SWAP_NOTIFY)
_APPENDS = _Written.of(_APPEND, _APPEND_NOTIFY)

_INSERT = (
    "INSERT INTO fsm_instances (space, machine, id, workspace) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT DO NOTHING"
)
"""A new instance's row: its workspace is the space it is made in (see
:mod:`fsm.postgres.schema`)."""

_FREE_EXPIRED = """
UPDATE fsm_instances SET holder = NULL
WHERE space = %(space)s AND machine = %(machine)s {which} AND holder IN (
    SELECT id FROM fsm_holders WHERE expires <= statement_timestamp())
"""

_CLAIM_ONE = """
UPDATE fsm_instances AS i SET holder = %(holder)s, fence = i.fence + 1
WHERE i.space = %(space)s AND i.machine = %(machine)s AND i.id = %(id)s AND i.holder IS NULL
  AND i.workspace = i.space
  AND EXISTS (SELECT 1 FROM fsm_holders h
              WHERE h.id = %(holder)s AND h.expires > statement_timestamp())
RETURNING i.fence
"""

_CANDIDATE = """
    SELECT c.space, c.machine, c.id FROM fsm_instances c
    WHERE c.space = %(space)s AND c.machine = %(machine)s
      AND c.runnable AND c.raw IS NOT NULL AND c.workspace = c.space
      AND (%(any)s OR c.queue IS NULL OR c.queue = ANY(%(queues)s))
      AND NOT c.id = ANY(%(skip)s)
      AND (%(any_version)s OR c.definition IS NULL OR c.definition = ANY(%(versions)s))
      AND {which}
    ORDER BY c.modified
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
"""
_ABANDONED = _CANDIDATE.format(
    which="c.holder IN (SELECT h.id FROM fsm_holders h WHERE h.expires <= statement_timestamp())"
)
_UNHELD = _CANDIDATE.format(
    which="""NOT EXISTS (SELECT 1 FROM abandoned)
      AND (c.holder IS NULL OR NOT EXISTS (
          SELECT 1 FROM fsm_holders h
          WHERE h.id = c.holder AND h.expires > statement_timestamp()))"""
)

_CLAIM_ANY = f"""
WITH abandoned AS MATERIALIZED ({_ABANDONED}),
unheld AS MATERIALIZED ({_UNHELD}),
candidate AS (SELECT * FROM abandoned UNION ALL SELECT * FROM unheld)
UPDATE fsm_instances AS i SET holder = %(holder)s, fence = i.fence + 1
FROM candidate
WHERE i.space = candidate.space AND i.machine = candidate.machine AND i.id = candidate.id
  AND EXISTS (SELECT 1 FROM fsm_holders h
              WHERE h.id = %(holder)s AND h.expires > statement_timestamp())
RETURNING i.id, i.fence, i.raw, i.version, {_ASYNC}
"""
"""Claim one runnable instance that no live holder has and read its document: one round trip
per claim, committed without waiting for the disk (see ``_ASYNC``). An instance whose holder's
lease expired (its worker was killed or cut off mid-run) is taken over first, before any
instance nobody holds: its run was under way, and the queue behind it may be long (a killed
worker's instance waited 26 s behind 150 unstarted ones with a 3 s lease when the one written
longest ago always came first). Within each kind, the one written longest ago comes first. The
abandoned ones are found through the index of held rows and the holders whose lease expired
(few rows)."""


def _lines(records: Sequence[Record], previous: bytes) -> tuple[list[str], bytes]:
    """The journal lines of ``records`` (the file store's, without their newlines), linked
    after ``previous`` (:mod:`fsm.store.chain`), and the link of the last."""
    lines = []
    for record in records:
        line, previous = chain.chained(line_bytes(record.to_json())[:-1], previous)
        lines.append(line.decode("utf-8"))
    return lines, previous


def _creator(records: Sequence[Record]) -> str | None:
    for record in records:
        if record.kind == "create":
            machine = getattr(record, "machine", None)
            return machine if isinstance(machine, str) else None
    return None


def _definition_of(records: Sequence[Record]) -> str | None:
    """The ``version:`` the newest of ``records`` naming a definition names (None: none does),
    as text: what the ``definition`` column keeps and claims compare."""
    for record in reversed(records):
        found = record.extra.get(DEFINITION) if record.extra else None
        if isinstance(found, dict) and isinstance(found.get("version"), int | str):
            return str(found["version"])
    return None


def _queue_of(records: Sequence[Record], default: str | None) -> str | None:
    """The queue ``fsm new --queue`` named in the create record, else ``default``."""
    for record in records:
        if record.kind == "create":
            named = record.extra.get("queue")
            return named if isinstance(named, str) else default
    return default


class PostgresLease:
    """A run's claim of an instance: the process's holder is the row's, with ``token``;
    ``raw``: the document the claim read in the same statement (a worker's claim)."""

    def __init__(
        self,
        store: PostgresStore,
        instance_id: str,
        holder: Holder,
        token: int,
        raw: bytes | None = None,
    ) -> None:
        self._store = store
        self.instance_id = instance_id
        self.holder = holder
        self.token = token
        self.raw = raw
        self._released = False

    def held(self) -> bool:
        """True while the row is still held with this claim and its holder's lease holds."""
        if self._released or self.holder.lost.is_set():
            return False
        store = self._store

        def look(conn: Any) -> bool:
            row = conn.execute(
                "SELECT 1 FROM fsm_instances i JOIN fsm_holders h ON h.id = i.holder "
                "WHERE i.space = %s AND i.machine = %s AND i.id = %s "
                "AND i.holder = %s AND i.fence = %s "
                "AND h.expires > statement_timestamp()",
                (store.space, store.machine, self.instance_id, self.holder.id, self.token),
            ).fetchone()
            return row is not None

        return store.db.run(look)

    def release(self) -> None:
        """Let another run claim the instance (nothing when it was taken over already)."""
        if self._released:
            return
        self._released = True
        store = self._store
        store.forget(self.instance_id)
        key = store.key(self.instance_id)
        sql = f"""
            WITH freed AS (
                UPDATE fsm_instances SET holder = NULL
                WHERE space = %s AND machine = %s AND id = %s AND holder = %s AND fence = %s
                RETURNING runnable
            )
            SELECT CASE WHEN runnable THEN pg_notify('{WORK}', %s) END FROM freed
        """
        params = (store.space, store.machine, self.instance_id, self.holder.id, self.token, key)
        with contextlib.suppress(StoreError):  # unreachable: the lease expires on its own
            store.db.run(lambda conn: conn.execute(sql, params))

    def watch(self, lost: Callable[[], None]) -> None:
        """Call ``lost`` when the holder's lease is lost while this claim is not released."""
        self.holder.watch(lost, lambda: not self._released)


class PostgresJournal(TypedRecords):
    """An instance's journal: its rows, in order (read a page at a time)."""

    def __init__(self, store: PostgresStore, instance_id: str) -> None:
        self._store = store
        self._id = instance_id

    def _page(self, after: int, descending: bool) -> list[tuple[int, str]]:
        store = self._store
        if descending:
            sql = (
                "SELECT position, line FROM fsm_journal "
                "WHERE space = %s AND machine = %s AND id = %s "
                "AND position < %s ORDER BY position DESC LIMIT %s"
            )
        else:
            sql = (
                "SELECT position, line FROM fsm_journal "
                "WHERE space = %s AND machine = %s AND id = %s "
                "AND position > %s ORDER BY position LIMIT %s"
            )
        params = (store.space, store.machine, self._id, after, PAGE)
        return store.db.run(lambda conn: conn.execute(sql, params).fetchall())

    def lines(self) -> Iterator[tuple[int, str]]:
        """``(position, line)`` of every record, first to last."""
        after = 0
        while True:
            page = self._page(after, descending=False)
            yield from page
            if len(page) < PAGE:
                return
            after = page[-1][0]

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
        """``(position, line, object)`` for every record, first to last."""
        for position, line in self.lines():
            yield position, line, _parsed(line)

    def backwards(self) -> Iterator[dict[str, Any]]:
        """The readable records' objects, last first."""
        before = 2**31 - 1
        while True:
            page = self._page(before, descending=True)
            for _, line in page:
                data = _parsed(line)
                if data is not None:
                    yield data
            if len(page) < PAGE:
                return
            before = page[-1][0]

    def read(self) -> JournalRead:
        """Every record, and the positions of unreadable ones."""
        result = JournalRead()
        for position, _, data in self.scan():
            result.last_line = position
            if data is None:
                result.bad_lines.append(position)
            else:
                result.records.append(data)
        return result

    def append(self, record: Mapping[str, Any]) -> int:
        """Append one record (outside a run: unfenced); return the number of records before."""
        raise StoreError("the postgres journal is written through its store's append")


def _parsed(line: str) -> dict[str, Any] | None:
    try:
        data = jsonio.loads(line)
    except jsonio.JsonError:
        return None
    return data if isinstance(data, dict) else None


class PostgresHeartbeats:
    """The heartbeats of one machine's runs (:mod:`fsm.store.heartbeat`) in ``fsm_heartbeats``,
    so that a server on any host sees the workers of every host.

    A row carries the time it was published by the server's clock; a reader takes the
    heartbeat's age from it, not from the publishing host's clock, and moves the action's start
    by the same difference, so hosts whose clocks disagree still agree on who is alive. A
    heartbeat is best effort: a database that cannot be reached loses a beat, never the step.
    """

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def _key(self, instance_id: str) -> tuple[str, str, str]:
        return (self.store.space, self.store.machine, validate_id(instance_id))

    def publish(self, instance_id: str, heartbeat: Heartbeat) -> None:
        """Keep ``heartbeat`` as the instance's (one statement: insert or replace)."""
        sql = (
            "INSERT INTO fsm_heartbeats (space, machine, id, host, pid, data) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (space, machine, id) DO UPDATE SET "
            "host = EXCLUDED.host, pid = EXCLUDED.pid, data = EXCLUDED.data, "
            "beat = clock_timestamp()"
        )
        params = (*self._key(instance_id), heartbeat.host, heartbeat.pid, _json(heartbeat))
        with contextlib.suppress(StoreError):
            self.store.db.run(lambda conn: conn.execute(sql, params))

    def clear(self, instance_id: str, heartbeat: Heartbeat) -> None:
        """Remove the instance's heartbeat when it is still this run's (host and pid)."""
        sql = (
            "DELETE FROM fsm_heartbeats WHERE space = %s AND machine = %s AND id = %s "
            "AND host = %s AND pid = %s"
        )
        params = (*self._key(instance_id), heartbeat.host, heartbeat.pid)
        with contextlib.suppress(StoreError):
            self.store.db.run(lambda conn: conn.execute(sql, params))

    def read(self, instance_id: str) -> Heartbeat | None:
        """The instance's latest heartbeat, its times on this host's clock."""
        sql = (
            "SELECT data, extract(epoch FROM clock_timestamp() - beat) FROM fsm_heartbeats "
            "WHERE space = %s AND machine = %s AND id = %s"
        )
        params = self._key(instance_id)
        row = self.store.db.run(lambda conn: conn.execute(sql, params).fetchone())
        if row is None:
            return None
        found = Heartbeat.from_json(_parsed(row[0]))
        if found is None:
            return None
        beat = time.time() - float(row[1])
        shift = beat - found.beat  # the publishing host's clock to this one's
        started = None if found.action_started is None else found.action_started + shift
        return dataclasses.replace(found, beat=beat, action_started=started)


def _json(heartbeat: Heartbeat) -> str:
    return json.dumps(heartbeat.to_json(), separators=(",", ":"))


class PostgresStore:
    """The instances of one machine in a PostgreSQL database (see the module docstring)."""

    name = "postgres"

    def __init__(self, layout: Layout, settings: Settings) -> None:
        self.layout = layout
        self.machine = layout.machine
        if not layout.space:
            raise OptionsError(
                f"the workspace {layout.workspace} names no space for the postgres store: a "
                "shared database keeps each project's instances apart by it, and fsm never "
                "guesses one from the folder's name (another project's may be the same); run "
                "'fsm store init' to write a new one into fsm.toml, or copy the space of this "
                "project's other checkouts into its [store] table"
            )
        self.space = layout.space
        self.settings = settings
        self.db: Database = database(settings)
        self.queue = layout.queue
        self.runs = layout.runs
        self.key_prefix = f"{self.space}/{self.machine}"
        self._announced: int | None = None
        self._files = FileStore.from_layout(layout)
        self._known: dict[str, tuple[bytes | None, int]] = {}
        """What this handle last saw of each instance: its bytes and version."""
        self._links: dict[str, tuple[int, bytes]] = {}
        """The length of each instance's journal as this handle last wrote or read it, and the
        link its next record follows: a write of records assumes that length (the statement
        checks it), so that the chain holds whoever appended meanwhile."""
        self._stamps: dict[str, list[int]] = {}
        self._sessions: set[str] = set()
        self._unsent: set[str] = set()
        """Instances whose run's last write has not notified yet (see :class:`_Written`)."""

    @classmethod
    def from_layout(cls, layout: Layout) -> PostgresStore:
        """The store of ``layout``'s machine in the database its settings name."""
        return cls(layout, Settings.parse(dict(layout.settings)))

    def forget(self, instance_id: str) -> None:
        """Forget what this handle knows of the instance (its run ended: a worker's store
        handle outlives the runs of many instances, and keeps only those it runs)."""
        self._known.pop(instance_id, None)
        self._links.pop(instance_id, None)
        self._stamps.pop(instance_id, None)

    def key(self, instance_id: str) -> str:
        """``<space>/<machine>/<id>``: what locks and notifications name."""
        return f"{self.space}/{self.machine}/{instance_id}"

    # --- where things are ------------------------------------------------------------------

    def describe(self, instance_id: str) -> str:
        """``<space>/<machine>/<id> in postgresql://host/db``."""
        return f"{self.key(validate_id(instance_id))} in {self.db.shown}"

    def folders(self, instance_id: str) -> Folders:
        """Where the file store would keep the instance's side files and meta folder: in the
        workspace of the host that runs it."""
        return self._files.folders(instance_id)

    def heartbeats(self) -> PostgresHeartbeats:
        """The heartbeats of the runs driving this machine's instances, in the database."""
        return PostgresHeartbeats(self)

    def permissions(self, instance_id: str) -> int | None:
        """``0o600``: a document in the database is private, readable only by those who hold
        the database's credentials (``fsm serve --reads private`` asks for the token)."""
        validate_id(instance_id)
        return 0o600

    # --- documents -------------------------------------------------------------------------

    def _row(self, instance_id: str) -> tuple[bytes | None, int]:
        sql = "SELECT raw, version FROM fsm_instances WHERE space = %s AND machine = %s AND id = %s"
        params = (self.space, self.machine, instance_id)
        row = self.db.run(lambda conn: conn.execute(sql, params).fetchone())
        found: tuple[bytes | None, int] = (
            (None, ABSENT) if row is None else (_bytes(row[0]), int(row[1]))
        )
        self._known[instance_id] = found
        return found

    def exists(self, instance_id: str) -> bool:
        """True when the instance has a document."""
        return self._row(validate_id(instance_id))[0] is not None

    def read(self, instance_id: str) -> Snapshot:
        """The document's data, bytes and version."""
        raw, version = self._row(validate_id(instance_id))
        if raw is None:
            raise UnknownInstanceError(
                f"no instance '{instance_id}' ({self.describe(instance_id)})"
            )
        try:
            data = jsonio.loads(raw)
        except jsonio.JsonError as exc:
            raise CorruptDocumentError(
                f"corrupt document {self.describe(instance_id)}: not valid JSON ({exc})"
            ) from exc
        if not isinstance(data, dict):
            raise CorruptDocumentError(
                f"corrupt document {self.describe(instance_id)}: expected a JSON object, "
                f"found {type(data).__name__}"
            )
        return Snapshot(data, raw, version)

    def read_bytes(self, instance_id: str) -> bytes | None:
        """The document's bytes, or None."""
        return self._row(validate_id(instance_id))[0]

    def is_current(self, instance_id: str, raw: bytes) -> bool:
        """True when the document holds exactly ``raw``: one look at the version, when it is
        the version this handle last saw holding ``raw``."""
        known = self._known.get(instance_id)
        if known is None or known[0] != raw:
            return self.read_bytes(instance_id) == raw
        validate_id(instance_id)
        if instance_id in self._unsent and not self.db.holds_locks():
            # The boundary after a run's write: the look carries the write's notifications.
            notes = self._notes_of(instance_id)
            row = self.db.run(lambda conn: conn.execute(_VERSION_NOTIFIED, notes).fetchone())
            self._unsent.discard(instance_id)
        else:
            sql = "SELECT version FROM fsm_instances WHERE space = %s AND machine = %s AND id = %s"
            params = (self.space, self.machine, instance_id)
            row = self.db.run(lambda conn: conn.execute(sql, params).fetchone())
        if row is not None and int(row[0]) == known[1]:
            return True
        self._known.pop(instance_id, None)
        self._links.pop(instance_id, None)
        return False

    def list_ids(self) -> list[str]:
        """Ids of every instance with a document, sorted (their stamps are kept for
        :meth:`stamp`)."""
        sql = (
            "SELECT id, version, records FROM fsm_instances "
            'WHERE space = %s AND machine = %s AND raw IS NOT NULL ORDER BY id COLLATE "C"'
        )
        params = (self.space, self.machine)
        rows = self.db.run(lambda conn: conn.execute(sql, params).fetchall())
        self._stamps = {row[0]: [int(row[1]), int(row[2])] for row in rows}
        return [row[0] for row in rows]

    # --- the transaction's primitives ------------------------------------------------------

    def swap(
        self,
        instance_id: str,
        build: Build,
        *,
        expected: bytes | None = None,
        fence: Lease | None = None,
    ) -> Swapped:
        """Compare-and-swap (see the module docstring): built on the version this handle saw
        last when it is still ``expected``, else on the row read now; built again on the newer
        version when another writer was quicker."""
        validate_id(instance_id)
        holder, token = self._fence_of(instance_id, fence)
        known = self._known.get(instance_id)
        for _ in range(MAX_ROUNDS):
            if known is None or (expected is not None and known[0] != expected):
                known = self._row(instance_id)
            raw, version = known
            current = None if raw is None else Snapshot(None, raw, version)
            proposal = build(current)
            written = self._write(instance_id, version, proposal, holder, token)
            if written is not None:
                self._known[instance_id] = (proposal.raw, written)
                return Swapped(proposal, current)
            self._refused(instance_id, holder, token)
            known = None  # another writer was quicker: build again on its version
            self._links.pop(instance_id, None)
        raise StoreError(f"the document of '{instance_id}' kept changing: nothing was written")

    def _fence_of(self, instance_id: str, fence: Lease | None) -> tuple[int | None, int | None]:
        if fence is None:
            return None, None
        if not isinstance(fence, PostgresLease) or fence.instance_id != instance_id:
            raise LeaseLostError(f"instance '{instance_id}': the run holds no lease of this store")
        return fence.holder.id, fence.token

    def _write(
        self,
        instance_id: str,
        version: int,
        proposal: Proposal,
        holder: int | None,
        token: int | None,
    ) -> int | None:
        """Write ``proposal`` on ``version``; the new version, or None when it was refused."""
        records, previous = self._link(instance_id)
        lines, link = _lines(proposal.records, previous)
        params = {
            "space": self.space,
            "machine": self.machine,
            "id": instance_id,
            "key": self.key(instance_id),
            "raw": proposal.raw,
            "version": max(version, 0),
            "state": proposal.state,
            "status": proposal.status,
            "runnable": proposal.runnable,
            "count": len(lines),
            "records": records,
            "lines": json.dumps(lines),
            "queue": _queue_of(proposal.records, self.queue),
            "creator": _creator(proposal.records),
            "definition": _definition_of(proposal.records),
            "holder": holder,
            "fence": token,
        }
        tries = 0

        def write(conn: Any) -> int | None:
            nonlocal tries
            tries += 1
            if tries > 1 and self._landed(conn, instance_id, version, proposal.raw, lines):
                return max(version, 0) + 1  # the try whose connection was lost committed
            if version == ABSENT:
                conn.execute(_INSERT, (self.space, self.machine, instance_id, self.space))
            row = self._committed(conn, _SWAPS, params)
            return None if row is None else int(row[0])

        written = self.db.run(write, lock=True)
        if written is not None:
            self._links[instance_id] = (records + len(lines), link)
        return written

    def _link(self, instance_id: str) -> tuple[int, bytes]:
        """The length of the instance's journal and the link its next record follows: as this
        handle left them, else read (the last row, the one numbered as long as the journal)."""
        known = self._links.get(instance_id)
        if known is not None:
            return known
        sql = (
            "SELECT i.records, (SELECT j.line FROM fsm_journal j WHERE j.space = i.space "
            "AND j.machine = i.machine AND j.id = i.id AND j.position = i.records) "
            "FROM fsm_instances i WHERE i.space = %s AND i.machine = %s AND i.id = %s"
        )
        params = (self.space, self.machine, instance_id)
        row = self.db.run(lambda conn: conn.execute(sql, params).fetchone())
        if row is None:
            return 0, chain.START
        records, line = int(row[0]), row[1]
        link = chain.START if line is None else chain.following(line.encode("utf-8"))
        return records, link

    def _committed(self, conn: Any, statements: _Written, params: dict[str, Any]) -> Any:
        """The first row of the write ``statements``, committed, in one round trip: in the
        transaction of the thread's document lock when one is open, else in a transaction of
        its own that takes the lock in the write's statement when the thread holds one (a
        run's step, see :meth:`Database.inline_lock`). A write under a lease (a run's) is
        followed by its notifications, in a transaction of their own (see :class:`_Written`)."""
        lock = self.db.inline_lock(conn)
        if lock is not None:
            params = {**params, **lock}
        open_already = lock is None and self.db.in_transaction(conn)
        carried = params["holder"] is not None and params["id"] in self._sessions
        if params["holder"] is None or carried:
            if carried:
                self._unsent.add(params["id"])  # even if refused: a spurious note is harmless
                locking, plain = statements.silent_locking, statements.silent
            else:
                locking, plain = statements.notifying_locking, statements.notifying
            if lock is not None:
                return conn.execute(locking, params).fetchone()
            if not open_already:
                return conn.execute(plain, params).fetchone()
            with conn.pipeline():
                cursor = conn.execute(plain, params)
                conn.execute("COMMIT")
            self.db.committed()
            return cursor.fetchone()
        with conn.pipeline():
            if not open_already:
                conn.execute("BEGIN")
            write = statements.silent_locking if lock is not None else statements.silent
            cursor = conn.execute(write, params)
            conn.execute("COMMIT")
            conn.execute(_NOTIFIED, params)
        if open_already:
            self.db.committed()
        return cursor.fetchone()

    def _commit(self, conn: Any) -> None:
        """Commit the document lock's transaction, if a write is in one (its locks go)."""
        if self.db.in_transaction(conn):
            conn.execute("COMMIT")
            self.db.committed()

    def _landed(
        self, conn: Any, instance_id: str, version: int, raw: bytes, lines: list[str]
    ) -> bool:
        """True when a swap of ``raw`` on ``version`` with ``lines`` was committed (by a try
        whose connection was lost before it was told)."""
        row = conn.execute(
            "SELECT raw, version, records FROM fsm_instances "
            "WHERE space = %s AND machine = %s AND id = %s",
            (self.space, self.machine, instance_id),
        ).fetchone()
        if row is None or _bytes(row[0]) != raw or int(row[1]) != max(version, 0) + 1:
            return False
        return self._journal_ends_with(conn, instance_id, lines)

    def _journal_ends_with(self, conn: Any, instance_id: str, lines: list[str]) -> bool:
        if not lines:
            return True
        found = conn.execute(
            "SELECT line FROM fsm_journal WHERE space = %s AND machine = %s AND id = %s "
            "ORDER BY position DESC LIMIT %s",
            (self.space, self.machine, instance_id, len(lines)),
        ).fetchall()
        return [row[0] for row in reversed(found)] == lines

    def _refused(self, instance_id: str, holder: int | None, token: int | None) -> None:
        """A write was refused: LeaseLostError when the fence is why, else nothing (a newer
        version)."""
        if holder is None:
            return
        sql = (
            "SELECT i.holder, i.fence, EXISTS (SELECT 1 FROM fsm_holders h WHERE h.id = %s "
            "AND h.expires > statement_timestamp()) FROM fsm_instances i "
            "WHERE i.space = %s AND i.machine = %s AND i.id = %s"
        )
        params = (holder, self.space, self.machine, instance_id)
        row = self.db.run(lambda conn: conn.execute(sql, params).fetchone())
        if row is None or row[0] != holder or row[1] != token or not row[2]:
            raise LeaseLostError(
                f"instance '{instance_id}': the run's lease (token {token}) is no longer the "
                "instance's (it expired, and another run may have taken it over); nothing was "
                "written"
            )

    def append(
        self, instance_id: str, records: Sequence[Record], *, fence: Lease | None = None
    ) -> None:
        """Append ``records`` to the journal in one statement, all or none."""
        validate_id(instance_id)
        holder, token = self._fence_of(instance_id, fence)
        if not records:
            return
        for _ in range(MAX_ROUNDS):
            if self._append(instance_id, records, holder, token):
                return
            self._links.pop(instance_id, None)
            self._refused(instance_id, holder, token)
        raise StoreError(f"the journal of '{instance_id}' kept growing: nothing was written")

    def _append(
        self,
        instance_id: str,
        records: Sequence[Record],
        holder: int | None,
        token: int | None,
    ) -> bool:
        """One try at appending ``records``, linked after the journal's last record; False
        when it was refused (the journal grew meanwhile, or the lease went)."""
        length, previous = self._link(instance_id)
        lines, link = _lines(records, previous)
        params = {
            "space": self.space,
            "machine": self.machine,
            "id": instance_id,
            "key": self.key(instance_id),
            "count": len(lines),
            "records": length,
            "lines": json.dumps(lines),
            "creator": _creator(records),
            "holder": holder,
            "fence": token,
        }
        tries = 0

        def append(conn: Any) -> bool:
            nonlocal tries
            tries += 1
            if tries > 1 and self._journal_ends_with(conn, instance_id, lines):
                return True
            if holder is None:
                conn.execute(_INSERT, (self.space, self.machine, instance_id, self.space))
            return self._committed(conn, _APPENDS, params) is not None

        appended = bool(self.db.run(append, lock=True))
        if appended:
            self._links[instance_id] = (length + len(lines), link)
        return appended

    def journal(self, instance_id: str) -> PostgresJournal:
        """The instance's journal."""
        return PostgresJournal(self, validate_id(instance_id))

    def late_writes(self, instance_id: str, *, last: bool = False) -> list[LateWrite]:
        """None: every writer replaces the whole row at once."""
        return []

    @contextlib.contextmanager
    def lock(self, instance_id: str, timeout: float = 10.0) -> Iterator[None]:
        """Hold the instance's document lock (an advisory lock of the thread's transaction)."""
        key = self.key(validate_id(instance_id))
        with self.db.bound() as state:
            if key in state.locks:
                yield
                return
            try:
                self.db.lock(state, key, timeout, deferred=instance_id in self._sessions)
            except LockHeldError as exc:
                raise LockHeldError(
                    f"instance '{instance_id}': document lock not released within {timeout:.0f}s"
                ) from exc
            try:
                yield
            finally:
                self.db.unlock(state, key)

    def lease(self, instance_id: str) -> PostgresLease:
        """Claim the instance for a run, without waiting: InstanceHeldError naming the holder
        when a live one has it. A claim whose holder's lease expired is taken over."""
        validate_id(instance_id)
        for _ in range(5):
            holder = self.db.holder()
            params = {
                "space": self.space,
                "machine": self.machine,
                "id": instance_id,
                "holder": holder.id,
            }

            token = self.db.run(functools.partial(self._claim_one, params))
            if token is not None:
                return PostgresLease(self, instance_id, holder, token)
            self._refuse_foreign(instance_id)
            held = self._holder_of(instance_id)
            if held is None:  # this process's own holder expired: a new one claims
                holder.mark_lost()
                continue
            name, until = held
            raise InstanceHeldError(
                f"instance '{instance_id}' is being run by {name} (its lease runs until "
                f"{until} unless it stops renewing it)"
            )
        raise StoreError(f"instance '{instance_id}': could not claim it (the lease kept expiring)")

    def _claim_one(self, params: dict[str, Any], conn: Any) -> int | None:
        """Claim the instance ``params`` names for its holder (freed first when its holder's
        lease expired); the new fencing token, or None when a live holder has it."""
        conn.execute(_FREE_EXPIRED.format(which="AND id = %(id)s"), params)
        row = conn.execute(_CLAIM_ONE, params).fetchone()
        if row is None:
            conn.execute(_INSERT, (self.space, self.machine, params["id"], self.space))
            row = conn.execute(_CLAIM_ONE, params).fetchone()
        return None if row is None else int(row[0])

    def _refuse_foreign(self, instance_id: str) -> None:
        """ForeignInstanceError, naming both, when the instance's row belongs to another
        workspace than this one's space (or to one not known: made by an older fsm)."""
        sql = "SELECT workspace FROM fsm_instances WHERE space = %s AND machine = %s AND id = %s"
        params = (self.space, self.machine, instance_id)
        row = self.db.run(lambda conn: conn.execute(sql, params).fetchone())
        if row is None or row[0] == self.space:
            return
        if row[0] is None:
            raise ForeignInstanceError(
                f"instance '{instance_id}' of space '{self.space}' was made by an fsm that "
                "guessed spaces from folder names: its workspace is not known, and this one "
                f"({self.layout.workspace}) may not be it; in its own checkout, "
                "'fsm store adopt' makes it that workspace's"
            )
        raise ForeignInstanceError(
            f"instance '{instance_id}' belongs to workspace '{row[0]}', not to this one "
            f"('{self.space}', {self.layout.workspace}): not run here"
        )

    def _holder_of(self, instance_id: str) -> tuple[str, str] | None:
        """The name and lease end of the live holder of the instance (None: none)."""
        sql = (
            "SELECT h.name, to_char(h.expires AT TIME ZONE 'UTC', "
            '\'YYYY-MM-DD"T"HH24:MI:SS"Z"\') FROM fsm_instances i JOIN fsm_holders h '
            "ON h.id = i.holder WHERE i.space = %s AND i.machine = %s AND i.id = %s "
            "AND h.expires > statement_timestamp()"
        )
        params = (self.space, self.machine, instance_id)
        row = self.db.run(lambda conn: conn.execute(sql, params).fetchone())
        return None if row is None else (str(row[0]), str(row[1]))

    @contextlib.contextmanager
    def session(self, instance_id: str) -> Iterator[None]:
        """Keep one connection for the run's steps meanwhile; its document locks are taken
        with the first statement under them (a step's commit: one round trip)."""
        validate_id(instance_id)
        with self.db.bound():
            self._sessions.add(instance_id)
            try:
                yield
            finally:
                self._sessions.discard(instance_id)
                self._send_notes(instance_id)

    def _notes_of(self, instance_id: str) -> dict[str, str]:
        return {
            "space": self.space,
            "machine": self.machine,
            "id": instance_id,
            "key": self.key(instance_id),
        }

    def _send_notes(self, instance_id: str) -> None:
        """Send the notifications of the run's last write when no step boundary carried them
        (see :class:`_Written`)."""
        if instance_id not in self._unsent:
            return
        self._unsent.discard(instance_id)
        notes = self._notes_of(instance_id)
        with contextlib.suppress(StoreError):  # unreachable: lost, as the write would be
            self.db.run(lambda conn: conn.execute(_NOTIFIED, notes))

    # --- what cannot be committed, what cannot be read -------------------------------------

    def _keep(self, kind: str, instance_id: str, raw: bytes) -> int:
        sql = (
            "INSERT INTO fsm_kept (kind, space, machine, id, raw) VALUES (%s, %s, %s, %s, %s) "
            "RETURNING number"
        )
        params = (kind, self.space, self.machine, instance_id, raw)

        def keep(conn: Any) -> int:
            row = conn.execute(sql, params).fetchone()
            self._commit(conn)
            return int(row[0])

        return self.db.run(keep)

    def park(self, instance_id: str, data: Mapping[str, Any]) -> str:
        """Keep ``data`` in ``fsm_kept``; return which row."""
        validate_id(instance_id)
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
        raw = text.encode("utf-8", "backslashreplace")
        number = self._keep("parked", instance_id, raw)
        return f"fsm_kept row {number} of {self.db.shown}"

    def quarantine(self, instance_id: str) -> str | None:
        """Move the document into ``fsm_kept`` (the instance then has none)."""
        validate_id(instance_id)
        params = {
            "space": self.space,
            "machine": self.machine,
            "id": instance_id,
            "key": self.key(instance_id),
        }

        def move(conn: Any) -> int | None:
            with conn.transaction():
                row = conn.execute(
                    "SELECT raw FROM fsm_instances "
                    "WHERE space = %(space)s AND machine = %(machine)s "
                    "AND id = %(id)s AND raw IS NOT NULL FOR UPDATE",
                    params,
                ).fetchone()
                if row is None:
                    return None
                kept = conn.execute(
                    "INSERT INTO fsm_kept (kind, space, machine, id, raw) "
                    "VALUES ('quarantined', %(space)s, %(machine)s, %(id)s, %(raw)s) "
                    "RETURNING number",
                    {**params, "raw": row[0]},
                ).fetchone()
                conn.execute(
                    "UPDATE fsm_instances SET raw = NULL, version = version + 1, "
                    "runnable = false, modified = clock_timestamp() "
                    "WHERE space = %(space)s AND machine = %(machine)s AND id = %(id)s",
                    params,
                )
                conn.execute(f"SELECT pg_notify('{CHANGES}', %(key)s)", params)
            return int(kept[0]) if kept else None

        self._known.pop(instance_id, None)
        self._links.pop(instance_id, None)
        number = self._in_own_transaction(move)
        return None if number is None else f"fsm_kept row {number} of {self.db.shown}"

    def _in_own_transaction(self, work: Callable[[Any], Any]) -> Any:
        """``work`` in a transaction of its own: after the document lock's, if one is open."""

        def run(conn: Any) -> Any:
            self._commit(conn)
            return work(conn)

        return self.db.run(run)

    def restore(self, instance_id: str, kept: str) -> None:
        """Put back the document :meth:`quarantine` kept in the row ``kept`` names."""
        validate_id(instance_id)
        try:
            number = int(kept.split()[2])
        except (IndexError, ValueError) as exc:
            raise StoreError(f"'{kept}' names no kept document") from exc
        params = {"space": self.space, "machine": self.machine, "id": instance_id, "number": number}

        def put_back(conn: Any) -> Any:
            return conn.execute(
                "UPDATE fsm_instances SET raw = k.raw, version = fsm_instances.version + 1, "
                "modified = clock_timestamp() FROM fsm_kept k "
                "WHERE k.number = %(number)s AND k.kind = 'quarantined' "
                "AND k.space = %(space)s AND k.machine = %(machine)s AND k.id = %(id)s "
                "AND fsm_instances.space = %(space)s AND fsm_instances.machine = %(machine)s "
                "AND fsm_instances.id = %(id)s "
                "RETURNING fsm_instances.version",
                params,
            ).fetchone()

        self._known.pop(instance_id, None)
        self._links.pop(instance_id, None)
        if self._in_own_transaction(put_back) is None:
            raise StoreError(f"'{kept}' holds no document of '{instance_id}'")

    def needs_repair(self, instance_id: str) -> bool:
        """Never: a swap is one statement, whole or not at all."""
        validate_id(instance_id)
        return False

    def repair(self, instance_id: str) -> Repaired:
        """Nothing to repair."""
        return Repaired()

    # --- readers ---------------------------------------------------------------------------

    def listed(self, instance_id: str) -> Listed:
        """The document, when it was written, and the machine its create record names."""
        validate_id(instance_id)
        sql = (
            "SELECT raw, (extract(epoch FROM modified) * 1000000)::bigint, creator, definition "
            "FROM fsm_instances WHERE space = %s AND machine = %s AND id = %s"
        )
        row = self.db.run(
            lambda conn: conn.execute(sql, (self.space, self.machine, instance_id)).fetchone()
        )
        if row is None or row[0] is None:
            creator = None if row is None else row[2]
            return Listed(None, 0, creator, f"no instance '{instance_id}'")
        return Listed(_bytes(row[0]), int(row[1]) * 1000, row[2], None, row[3])

    def stamp(self, instance_id: str) -> list[int] | None:
        """The document's version and the journal's length (from the last listing when it
        gave them)."""
        validate_id(instance_id)
        kept = self._stamps.pop(instance_id, None)
        if kept is not None:
            return kept
        sql = (
            "SELECT version, records FROM fsm_instances "
            "WHERE space = %s AND machine = %s AND id = %s "
            "AND raw IS NOT NULL"
        )
        row = self.db.run(
            lambda conn: conn.execute(sql, (self.space, self.machine, instance_id)).fetchone()
        )
        return None if row is None else [int(row[0]), int(row[1])]

    async def changes(self, stop: asyncio.Event) -> AsyncIterator[set[str] | None]:
        """The ids written since, as the server notifies them (LISTEN); None after the
        connection was lost and made again (what happened meanwhile is not known)."""
        prefix = f"{self.space}/{self.machine}/"
        conn: psycopg.AsyncConnection[Any] | None = None
        lost = False
        try:
            while not stop.is_set():
                if conn is None or conn.closed:
                    try:
                        conn = await psycopg.AsyncConnection.connect(
                            self.settings.url,
                            autocommit=True,
                            application_name="fsm",
                            connect_timeout=max(2, round(self.settings.connect)),
                        )
                        await conn.execute(f"LISTEN {CHANGES}")
                    except psycopg.Error:
                        conn = None
                        lost = True
                        await _sleep_unless(stop, 1.0)
                        continue
                    if lost:
                        lost = False
                        yield None
                ids: set[str] = set()
                try:
                    async for note in conn.notifies(timeout=0.25):
                        if note.payload.startswith(prefix):
                            ids.add(note.payload[len(prefix) :])
                except psycopg.Error:
                    with contextlib.suppress(Exception):
                        await conn.close()
                    conn = None
                    lost = True
                    continue
                if ids:
                    yield ids
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()

    # --- workers ---------------------------------------------------------------------------

    def reserve(self, threads: int) -> None:
        """Room in the process's pool for ``threads`` runs at once (see
        :meth:`fsm.postgres.database.Database.reserve`)."""
        self.db.reserve(threads)

    def claim(
        self, queues: Sequence[str] | None, skip: Collection[str] = ()
    ) -> PostgresLease | None:
        """Claim a runnable instance that no live holder has, in one of ``queues`` or none
        (``FOR UPDATE SKIP LOCKED``: claimers never wait for each other): first one whose
        holder's lease expired (its run was under way), else the one written longest ago; the
        lease carries the document the claim read (``raw``), in the same statement."""
        self.db.name_holder("worker")
        for _ in range(3):
            holder = self.db.holder()
            params = {
                "space": self.space,
                "machine": self.machine,
                "holder": holder.id,
                "any": queues is None,
                "queues": list(queues or ()),
                "skip": list(skip),
                "any_version": self.runs is None,
                "versions": list(self.runs or ()),
            }

            self._announce(holder)
            row = self.db.run(functools.partial(self._claim_any, params))
            while row is not None and not _valid_id(str(row[0])):
                # A row fsm cannot run (written by another program): marked not runnable, so
                # that no claim takes it again, and the next one is claimed.
                self.db.run(functools.partial(self._set_aside, str(row[0]), int(row[1])))
                row = self.db.run(functools.partial(self._claim_any, params))
            if row is not None:
                instance_id, raw = str(row[0]), _bytes(row[2])
                self._known[instance_id] = (raw, int(row[3]))
                return PostgresLease(self, instance_id, holder, int(row[1]), raw)
            if self._holder_alive(holder):
                return None
            holder.mark_lost()
        return None

    def _announce(self, holder: Holder) -> None:
        """Say, once per holder, which versions of this machine its worker runs (``fsm ls``
        names the instances of a version no live worker runs)."""
        if self._announced == holder.id or self.runs is None:
            return
        keys = [f"{self.key_prefix}={version}" for version in self.runs]
        self.db.run(
            lambda conn: conn.execute(
                "UPDATE fsm_holders SET serves = ARRAY(SELECT DISTINCT unnest("
                "coalesce(serves, '{}') || %s::text[])) WHERE id = %s",
                (keys, holder.id),
            )
        )
        self._announced = holder.id

    def keep_definition(self, graph: str, text: str) -> None:
        """Keep the text of this machine's definition with graph digest ``graph`` (once)."""
        self.db.run(
            lambda conn: conn.execute(
                "INSERT INTO fsm_definitions (space, machine, graph, text) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (self.space, self.machine, graph, text),
            )
        )

    def stored_definition(self, graph: str) -> str | None:
        """The kept text of this machine's definition with graph digest ``graph``."""
        row = self.db.run(
            lambda conn: conn.execute(
                "SELECT text FROM fsm_definitions WHERE space = %s AND machine = %s AND graph = %s",
                (self.space, self.machine, graph),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def served_versions(self) -> set[str] | None:
        """The versions of this machine the live workers of this space run (None: no live
        worker runs this machine)."""
        prefix = f"{self.key_prefix}="
        rows = self.db.run(
            lambda conn: conn.execute(
                "SELECT DISTINCT unnest(serves) FROM fsm_holders "
                "WHERE expires > statement_timestamp() AND serves IS NOT NULL"
            ).fetchall()
        )
        found = {str(row[0])[len(prefix) :] for row in rows if str(row[0]).startswith(prefix)}
        return found or None

    def _set_aside(self, instance_id: str, token: int, conn: Any) -> None:
        conn.execute(
            "UPDATE fsm_instances SET runnable = false, holder = NULL "
            "WHERE space = %s AND machine = %s AND id = %s AND fence = %s",
            (self.space, self.machine, instance_id, token),
        )

    @staticmethod
    def _claim_any(params: dict[str, Any], conn: Any) -> Any:
        return conn.execute(_CLAIM_ANY, params).fetchone()

    def _holder_alive(self, holder: Holder) -> bool:
        sql = "SELECT 1 FROM fsm_holders WHERE id = %s AND expires > statement_timestamp()"
        row = self.db.run(lambda conn: conn.execute(sql, (holder.id,)).fetchone())
        return row is not None

    def wait_for_work(self, timeout: float) -> None:
        """Return when a write or a release leaves an instance claimable, or after
        ``timeout`` seconds."""
        self.db.wait(WORK, timeout)

    # --- administration --------------------------------------------------------------------

    def initialize(self) -> list[str]:
        """Create or upgrade the tables (see :mod:`fsm.postgres.schema`)."""
        return self.db.initialize()

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
        """Keep ``raw`` and the journal ``lines`` as the instance's, byte-exact (see
        :func:`fsm.postgres.copies.import_instance`)."""
        validate_id(instance_id)
        self._known.pop(instance_id, None)
        self._links.pop(instance_id, None)
        where = {"space": self.space, "machine": self.machine, "key": self.key(instance_id)}
        done = self._in_own_transaction(
            functools.partial(
                import_instance, where, self.queue, instance_id, raw, lines, proposal, over, keep
            )
        )
        return None if done is None else str(done)

    def adopt(self) -> list[str]:
        """Make the instances of this space whose workspace is not known (made by an fsm that
        guessed spaces from folder names) this workspace's; return their ids."""
        sql = (
            "UPDATE fsm_instances SET workspace = space "
            "WHERE space = %s AND machine = %s AND workspace IS NULL RETURNING id"
        )
        params = (self.space, self.machine)
        rows = self._in_own_transaction(lambda conn: conn.execute(sql, params).fetchall())
        return sorted(str(row[0]) for row in rows)

    def export_instance(self, instance_id: str) -> tuple[bytes, list[str]] | None:
        """The document's bytes and the journal's lines (None: no document)."""
        raw = self.read_bytes(instance_id)
        if raw is None:
            return None
        return raw, [line for _, line in self.journal(instance_id).lines()]


def _valid_id(instance_id: str) -> bool:
    try:
        validate_id(instance_id)
    except InvalidIdError:
        return False
    return True


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return bytes(value)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
