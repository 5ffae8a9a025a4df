"""One process's link to one PostgreSQL database: its connections, its lease holder, its
listener.

* Connections come from a psycopg pool, one per process and address (a forked worker makes its
  own: connections are never shared across a fork). A thread that holds an instance's document
  lock, or runs a session, keeps one connection meanwhile (:meth:`Database.bound`); other
  operations borrow one for the statement.
* The server may go away (a restart, a failover, a cut cable): an operation that loses its
  connection is tried again on a new one for up to ``reconnect`` seconds. A write whose
  connection was lost while it committed is looked up before it is tried again (see
  :mod:`fsm.postgres.store`), so it is never applied twice.
* The process's lease holder (:class:`Holder`): a row of ``fsm_holders`` whose expiry a
  heartbeat thread renews every third of the lease time. Every claim of the process's runs and
  workers is held by it; when a renewal fails for longer than the lease (the process was
  stopped, the network cut, the server down), the holder is lost: the leases of its claims are
  told (:meth:`fsm.store.protocol.Lease.watch`: the run kills its commands), and the next claim
  registers a new holder. A write is fenced by the server's clock and the claim's token, so the
  old holder's writes are refused whatever the process believes.
* The listener: a connection that LISTENs for the notifications writes send (``fsm_changes``:
  any write, ``fsm_work``: an instance that may be claimed), for ``fsm serve`` and idle workers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from fsm.base.errors import LockHeldError, OptionsError, StoreError, StoreUnreachableError
from fsm.postgres import schema
from fsm.postgres.settings import Settings, parse_problem, shown_url

__all__ = [
    "CHANGES",
    "WORK",
    "Database",
    "Holder",
    "Settings",
    "database",
    "shown_url",
]

CHANGES = "fsm_changes"
"""The channel every write notifies, with ``<machine>/<id>``."""
WORK = "fsm_work"
"""The channel of writes and releases that leave an instance claimable, with ``<machine>/<id>``."""

T = TypeVar("T")


class Holder:
    """The process's lease holder: a row of ``fsm_holders`` renewed by a heartbeat."""

    def __init__(self, holder_id: int, name: str, renewed: float) -> None:
        self.id = holder_id
        self.name = name
        self.renewed = renewed
        """``time.monotonic()`` just before the last renewal the server accepted was sent."""
        self.lost = threading.Event()
        self.watchers: list[tuple[Callable[[], None], Callable[[], bool]]] = []
        """What to call when it is lost: (callback, still wanted)."""
        self.mutex = threading.Lock()

    def watch(self, lost: Callable[[], None], wanted: Callable[[], bool]) -> None:
        """Call ``lost`` when the holder is lost, if ``wanted()`` still says so then."""
        with self.mutex:
            if not self.lost.is_set():
                self.watchers.append((lost, wanted))
                return
        if wanted():
            lost()

    def mark_lost(self) -> None:
        """The lease is lost: tell the watchers (once)."""
        with self.mutex:
            if self.lost.is_set():
                return
            self.lost.set()
            watchers, self.watchers = self.watchers, []
        for lost, wanted in watchers:
            if wanted():
                with contextlib.suppress(Exception):  # one watcher's failure is not the others'
                    lost()


@dataclass
class _Thread:
    """What one thread holds: a connection while it is bound, the instance locks it holds."""

    conn: Any = None
    depth: int = 0
    locks: dict[str, float] = field(default_factory=dict)
    """The lock keys held (``machine/id``), with their timeouts."""
    locked: bool = False
    """True while the current transaction holds the locks (a write commits it, and with it
    lets them go until the next write takes them again)."""
    pending: bool = False
    """True while a lock is asked for and not taken yet: the next statement takes it."""
    inline: bool = False
    """True while a write runs that may take the lock in its own statement (see
    :meth:`Database.inline_lock`)."""
    sessions: dict[str, int] = field(default_factory=dict)


class Database:
    """One process's link to one database (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url = settings.url
        self.shown = shown_url(settings.url)
        self.pid = os.getpid()
        self._pool: ConnectionPool[Any] | None = None
        self._mutex = threading.Lock()
        self._local = threading.local()
        self._checked = False
        self._reached = False
        self._failed: tuple[float, StoreError] | None = None
        """Until when the last failure to reach the server is given again without trying."""
        """True once this process connected to the server (from then on, a server that went
        away is waited for, up to ``reconnect``)."""
        self._holder: Holder | None = None
        self._holder_kind = "run"
        self._heartbeat: threading.Thread | None = None
        self._beat_wake = threading.Event()
        """Set to wake the heartbeat from its sleep (the holder ended: the process closes)."""
        self._listener: Any = None
        self._reserved = 0
        """Connections a worker's threads hold at once (see :meth:`reserve`)."""
        self._registering = threading.Lock()
        """Held while the process's holder is looked at and registered (see :meth:`holder`)."""

    # --- connections -----------------------------------------------------------------------

    def reserve(self, threads: int) -> None:
        """Make room for ``threads`` threads each holding a connection for its run's session
        (``fsm worker --concurrency``), and one more for their claims and releases: the pool
        grows past ``[store] pool`` when that is smaller."""
        with self._mutex:
            self._reserved = max(self._reserved, threads + 1 if threads > 1 else 0)
            if self._pool is not None and self._pool.max_size < self._reserved:
                self._pool.resize(self._pool.min_size, self._reserved)

    def _connect(self) -> Any:
        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=self._connect_timeout(),
                application_name="fsm",
                options=self._options(),
            )
        except psycopg.OperationalError as exc:
            if _hopeless(exc):
                raise StoreError(
                    f"cannot connect to the database {self.shown}: {_first_line(exc)}"
                ) from None
            raise _Unreachable(_first_line(exc)) from None
        except psycopg.ProgrammingError as exc:
            raise OptionsError(
                f"the postgres store's url {self.shown} is not a valid address: "
                f"{parse_problem(exc)}"
            ) from None

    def _connect_timeout(self) -> int:
        # libpq counts whole seconds, and treats 1 as 2.
        return max(2, round(self.settings.connect))

    def _options(self) -> str:
        # A transaction left idle (its process stopped while it held a document lock) is ended
        # by the server, so the lock never outlives the lease by much.
        idle = max(int(self.settings.lease * 1000), 5000)
        return f"-c idle_in_transaction_session_timeout={idle}"

    def _pool_of(self) -> ConnectionPool[Any]:
        with self._mutex:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=max(1, self.settings.pool, self._reserved),
                    kwargs={
                        "autocommit": True,
                        "connect_timeout": self._connect_timeout(),
                        "application_name": "fsm",
                        "options": self._options(),
                    },
                    open=True,
                    timeout=self._pool_wait(),
                    reconnect_timeout=max(self.settings.reconnect, 1.0),
                    name="fsm",
                )
            return self._pool

    def _pool_wait(self) -> float:
        """Seconds to wait for a connection of the pool: one being made, or given back by
        another thread (the pool's statements are short; a server that is down is waited for
        by the caller, up to ``reconnect``)."""
        return 2 * self.settings.connect

    def _thread(self) -> _Thread:
        state: _Thread | None = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = _Thread()
        return state

    @contextlib.contextmanager
    def bound(self) -> Iterator[_Thread]:
        """Keep one connection for this thread meanwhile (nested: the outermost one ends it)."""
        state = self._thread()
        state.depth += 1
        try:
            yield state
        finally:
            state.depth -= 1
            if state.depth == 0:
                self._unbind(state)

    def _unbind(self, state: _Thread) -> None:
        conn, state.conn = state.conn, None
        state.locks.clear()
        state.locked = False
        if conn is None:
            return
        with contextlib.suppress(psycopg.Error):
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
        self._give_back(conn)

    def _give_back(self, conn: Any) -> None:
        pool = self._pool
        if pool is None:
            with contextlib.suppress(psycopg.Error):
                conn.close()
            return
        with contextlib.suppress(Exception):
            pool.putconn(conn)

    def _take(self) -> Any:
        try:
            return self._pool_of().getconn(timeout=self._pool_wait())
        except PoolTimeout as exc:
            raise _Unreachable(str(exc)) from exc

    def run(self, work: Callable[[Any], T], *, lock: bool = False) -> T:
        """``work(connection)``, on this thread's bound connection (taking the instance locks
        it holds again first when ``lock`` and a write let them go) or a borrowed one; tried
        again on a new connection when the server goes away, for up to ``reconnect`` seconds.
        ``work`` must be safe to run again after it lost its connection (see the module
        docstring)."""
        self.check_schema()
        deadline = time.monotonic() + self.settings.reconnect
        delay = 0.05
        while True:
            try:
                return self._run_once(work, lock=lock)
            except (psycopg.OperationalError, _Unreachable) as exc:
                if isinstance(exc, psycopg.OperationalError) and not _connection_lost(exc):
                    raise StoreError(
                        f"the database {self.shown} refused: {_first_line(exc)}"
                    ) from exc
                if time.monotonic() >= deadline:
                    raise StoreUnreachableError(
                        f"the database {self.shown} cannot be reached (tried for "
                        f"{self.settings.reconnect:.0f}s): {_first_line(exc)}"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except psycopg.Error as exc:
                raise StoreError(f"the database {self.shown} refused: {_first_line(exc)}") from exc

    def _run_once(self, work: Callable[[Any], T], *, lock: bool) -> T:
        state = self._thread()
        if state.depth == 0:
            conn = self._take()
            try:
                return work(conn)
            finally:
                if conn.info.transaction_status not in (
                    psycopg.pq.TransactionStatus.IDLE,
                    psycopg.pq.TransactionStatus.UNKNOWN,
                ):
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")
                self._give_back(conn)
        try:
            if state.conn is None or state.conn.closed:
                if state.conn is not None:
                    self._give_back(state.conn)
                state.conn = None
                state.locked = False
                state.conn = self._take()
            if state.locks and not state.locked and (lock or state.pending):
                if lock and len(state.locks) == 1 and _idle(state.conn):
                    # A write that takes its one lock in its own statement (inline_lock).
                    state.inline = True
                    try:
                        return work(state.conn)
                    finally:
                        state.inline = False
                # The locks are taken in the same round trip as the work's first statement.
                with state.conn.pipeline():
                    self._take_locks(state)
                    return work(state.conn)
            return work(state.conn)
        except psycopg.Error as exc:
            conn = state.conn
            if conn is not None and (conn.closed or conn.broken):
                # The connection is gone, and the locks with it: taken again on the next one.
                state.conn = None
                state.locked = False
                self._give_back(conn)
                raise
            if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
                timeout = max(state.locks.values(), default=0)
                state.locked = False
                raise LockHeldError(
                    f"{', '.join(sorted(state.locks)) or 'an instance'}: document lock not "
                    f"released within {timeout:.0f}s"
                ) from exc
            raise

    def inline_lock(self, conn: Any) -> dict[str, str] | None:
        """When the write about to run on ``conn`` is to take this thread's document lock
        itself: the parameters of the lock (``lock_key``, ``lock_timeout``) its statement takes
        first, in its own transaction, which its commit ends (one statement instead of a
        transaction of four: a run's step). None: run the write as it is (the lock is held
        already, or taken by the statements before it)."""
        state = self._thread()
        if not state.inline or state.conn is not conn:
            return None
        state.inline = False
        state.pending = False
        ((key, timeout),) = state.locks.items()
        return {"lock_key": key, "lock_timeout": f"{max(1, int(timeout * 1000))}ms"}

    def _take_locks(self, state: _Thread) -> None:
        """Begin a transaction and take the thread's document locks in it (queued: sent with
        the next statement when the connection is in pipeline mode)."""
        conn = state.conn
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            conn.execute("ROLLBACK")
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.execute("BEGIN")
        timeout = max(state.locks.values())
        conn.execute(
            "SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(timeout * 1000))}ms",)
        )
        for key in sorted(state.locks):
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        state.locked = True
        state.pending = False

    def lock(self, state: _Thread, key: str, timeout: float, *, deferred: bool = False) -> None:
        """Take the document lock ``key`` in this thread's transaction (LockHeldError after
        ``timeout`` seconds); ``deferred``: with the next statement instead (one round trip
        less: a run's step takes its lock with its commit)."""
        state.locks[key] = timeout
        if deferred:
            state.pending = True
            state.locked = False
            return
        try:
            self.run(lambda conn: self._locked_now(state, conn), lock=False)
        except BaseException:
            state.locks.pop(key, None)
            self._end_transaction(state)
            raise

    def _locked_now(self, state: _Thread, conn: Any) -> None:
        with conn.pipeline():
            self._take_locks(state)

    def unlock(self, state: _Thread, key: str) -> None:
        """Let go of the document lock ``key`` (the transaction ends with the last one)."""
        state.locks.pop(key, None)
        if not state.locks:
            self._end_transaction(state)

    def _end_transaction(self, state: _Thread) -> None:
        state.locked = False
        state.pending = False
        conn = state.conn
        if conn is None or conn.closed:
            return
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                state.conn = None
                self._give_back(conn)

    def committed(self, state: _Thread | None = None) -> None:
        """A write just committed this thread's transaction: its locks went with it."""
        state = state or self._thread()
        state.locked = False

    def in_transaction(self, conn: Any) -> bool:
        """True when ``conn`` is in a transaction (a document lock's, maybe still queued)."""
        state = self._thread()
        if state.conn is conn and state.locked:
            return True
        return bool(conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def holds_locks(self) -> bool:
        """True while this thread holds (or is about to take) a document lock: its next
        statement may run in the lock's transaction."""
        return bool(self._thread().locks)

    def session_open(self) -> bool:
        """True while this thread keeps a connection (a run's session, a lock)."""
        return self._thread().depth > 0

    # --- the schema ------------------------------------------------------------------------

    def check_schema(self) -> None:
        """Refuse a database without fsm's tables, or with another version of them (once per
        process)."""
        if self._checked:
            return
        failed = self._failed
        if failed is not None and time.monotonic() < failed[0]:
            # The same server just now: each machine's store of one command (fsm ls of every
            # machine) is not made to wait for it again.
            raise failed[1]
        try:
            version = self._direct(schema.applied_version)
        except StoreError as exc:
            self._failed = (time.monotonic() + self.settings.connect, exc)
            raise
        if version is None:
            raise StoreError(
                f"the database {self.shown} has no fsm tables: run 'fsm store init' first"
            )
        if version < schema.LATEST:
            raise StoreError(
                f"the database {self.shown} has fsm tables of version {version}, older than "
                f"this fsm's {schema.LATEST}: run 'fsm store init' to upgrade them"
            )
        if version > schema.LATEST:
            raise StoreError(
                f"the database {self.shown} has fsm tables of version {version}, made by a "
                f"newer fsm (this one knows {schema.LATEST}): upgrade fsm"
            )
        self._checked = True

    def initialize(self) -> list[str]:
        """Create or upgrade the tables (``fsm store init``)."""
        done = self._direct(schema.migrate)
        self._checked = False
        return done

    def _direct(self, work: Callable[[Any], T]) -> T:
        """``work`` on a connection of its own (the schema is checked before the pool is).

        The first connection of the process is tried once (within ``connect`` seconds): a
        server this process never reached is not waited for, and an error no retry can fix
        (a refused password, a missing role or database, an unknown host) is never retried.
        Later ones are tried again for up to ``reconnect`` seconds."""
        deadline = time.monotonic() + (self.settings.reconnect if self._reached else 0)
        delay = 0.05
        while True:
            try:
                conn = self._connect()
            except _Unreachable as exc:
                if time.monotonic() >= deadline:
                    raise StoreUnreachableError(
                        f"cannot connect to the database {self.shown}: {exc}"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            self._reached = True
            try:
                return work(conn)
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise StoreUnreachableError(
                        f"the database {self.shown} cannot be reached: {_first_line(exc)}"
                    ) from exc
            except psycopg.Error as exc:
                raise StoreError(f"the database {self.shown} refused: {_first_line(exc)}") from exc
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.close()

    # --- the lease holder ------------------------------------------------------------------

    def name_holder(self, kind: str) -> None:
        """Name this process's holder ``kind`` (``worker``; ``run`` by default) in what people
        see of the leases it holds."""
        self._holder_kind = kind

    def holder(self) -> Holder:
        """This process's live holder, registered (and its heartbeat started) if need be.

        One registration at a time: threads of a worker (``--concurrency``) asking at once all
        get the one holder the heartbeat renews (each registering its own left all but the
        last unrenewed, their claims expiring under live runs)."""
        with self._registering:
            return self._holder_now()

    def _holder_now(self) -> Holder:
        with self._mutex:
            holder = self._holder
            if holder is not None and not holder.lost.is_set():
                return holder
        lease = self.settings.lease
        name = f"{self._holder_kind} {socket.gethostname()} pid {os.getpid()}"

        def register(conn: Any) -> int:
            # Holders whose lease ended long ago are forgotten (their claims are free already).
            conn.execute(
                "DELETE FROM fsm_holders WHERE expires < now() - interval '1 day' "
                "AND id IN (SELECT id FROM fsm_holders WHERE expires < now() - interval '1 day' "
                "LIMIT 100)"
            )
            row = conn.execute(
                "INSERT INTO fsm_holders (name, expires) "
                "VALUES (%s, now() + make_interval(secs => %s)) RETURNING id",
                (name, lease),
            ).fetchone()
            return int(row[0])

        sent = time.monotonic()
        holder_id = self.run(register)
        holder = Holder(holder_id, name, sent)
        with self._mutex:
            self._holder = holder
            self._beat_wake.clear()  # a holder to renew again (after a close)
            if self._heartbeat is None or not self._heartbeat.is_alive():
                self._heartbeat = threading.Thread(
                    target=self._beat, name="fsm-heartbeat", daemon=True
                )
                self._heartbeat.start()
        return holder

    def current_holder(self) -> Holder | None:
        """The holder registered last (None before the first claim)."""
        return self._holder

    def _beat(self) -> None:
        """Renew the holder's lease every third of the lease time; mark it lost when it could
        not be renewed in time (until the process has no holder any more)."""
        link: list[Any] = [None]
        try:
            self._beat_with(link)
        finally:
            if link[0] is not None:
                with contextlib.suppress(Exception):
                    link[0].close()

    def _beat_with(self, link: list[Any]) -> None:
        lease = self.settings.lease
        while True:
            conn = link[0]
            holder = self._holder
            if holder is None or os.getpid() != self.pid:
                return
            if holder.lost.is_set():
                self._beat_wake.wait(min(lease / 3, 1.0))
                continue
            wait = holder.renewed + lease / 3 - time.monotonic()
            if wait > 0:
                self._beat_wake.wait(min(wait, 0.5))
                continue
            if time.monotonic() >= holder.renewed + lease:
                holder.mark_lost()
                continue
            sent = time.monotonic()
            try:
                if conn is None or conn.closed:
                    conn = link[0] = self._connect()
                row = conn.execute(
                    "UPDATE fsm_holders SET expires = now() + make_interval(secs => %s) "
                    "WHERE id = %s AND expires > now() RETURNING id",
                    (lease, holder.id),
                ).fetchone()
            except (psycopg.Error, _Unreachable, StoreError):
                with contextlib.suppress(Exception):
                    if conn is not None:
                        conn.close()
                link[0] = None
                self._beat_wake.wait(min(lease / 10, 0.5))
                continue
            if row is None:
                holder.mark_lost()  # it expired: the server may have handed its claims on
            else:
                holder.renewed = sent

    def end_holder(self) -> None:
        """Forget this process's holder: its claims are free at once (at the end of a worker
        or a run, instead of when its lease would expire)."""
        holder, self._holder = self._holder, None
        if holder is None or holder.lost.is_set():
            return
        with contextlib.suppress(StoreError):
            self.run(
                lambda conn: conn.execute(
                    "WITH gone AS (DELETE FROM fsm_holders WHERE id = %s RETURNING id) "
                    "SELECT pg_notify(%s, '') FROM gone",
                    (holder.id, WORK),
                )
            )

    # --- notifications ---------------------------------------------------------------------

    def wait(self, channel: str, timeout: float) -> list[str]:
        """The payloads notified on ``channel`` until the first arrives or ``timeout`` seconds
        pass (a listener kept for the process; a lost connection is opened again)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            try:
                if self._listener is None or self._listener.closed:
                    self._listener = self._connect()
                    self._listener.execute(f"LISTEN {CHANGES}")
                    self._listener.execute(f"LISTEN {WORK}")
                found = [
                    n.payload
                    for n in self._listener.notifies(timeout=remaining, stop_after=1)
                    if n.channel == channel
                ]
            except (psycopg.Error, _Unreachable, StoreError):
                with contextlib.suppress(Exception):
                    if self._listener is not None:
                        self._listener.close()
                self._listener = None
                time.sleep(min(0.5, max(remaining, 0)))
                return []
            if found:
                return found

    def close(self) -> None:
        """Close the pool and the listener (the holder is ended first)."""
        self.end_holder()
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.close(timeout=1)
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(Exception):
                listener.close()
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None and heartbeat is not threading.current_thread():
            self._beat_wake.set()  # it has no holder any more: it ends now, not after its nap
            heartbeat.join(timeout=2)


def _idle(conn: Any) -> bool:
    """True when ``conn`` is in no transaction (nor pipeline)."""
    return bool(
        conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and conn.info.pipeline_status == psycopg.pq.PipelineStatus.OFF
    )


_HOPELESS_STATES = ("28000", "28P01", "3D000", "42501")
"""Refused authorisation, a wrong password, a database that does not exist, no permission to
connect: no retry makes them succeed."""
_HOPELESS_WORDS = (
    "could not translate host name",
    "password authentication failed",
    'role "',
    "does not exist",
    "no password supplied",
    "invalid connection option",
    "invalid sslmode value",
)


def _hopeless(exc: psycopg.OperationalError) -> bool:
    """True when a failed connection is one no retry can fix."""
    if exc.sqlstate in _HOPELESS_STATES:
        return True
    text = str(exc)
    return any(words in text for words in _HOPELESS_WORDS)


def _connection_lost(exc: psycopg.OperationalError) -> bool:
    """True when ``exc`` says the connection went away (not a statement the server refused)."""
    return exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))


class _Unreachable(Exception):
    """A connection could not be made (the server is down, or the pool gave none in time)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_databases: dict[tuple[str, int], Database] = {}
_inherited: list[Database] = []
_registered: list[bool] = []
_databases_mutex = threading.Lock()


def database(settings: Settings) -> Database:
    """This process's :class:`Database` of ``settings.url`` (a forked process makes its own)."""
    key = (settings.url, os.getpid())
    with _databases_mutex:
        found = _databases.get(key)
        if found is None:
            for (url, pid), stale in list(_databases.items()):
                if pid != os.getpid():
                    # Inherited through a fork: never used here, never closed either (its
                    # connections are the parent's), kept so that nothing finalises them.
                    del _databases[(url, pid)]
                    _inherited.append(stale)
            found = _databases[key] = Database(settings)
            if not _registered:
                atexit.register(close_all)
                _registered.append(True)
        return found


def close_all() -> None:
    """End every holder and close every connection of this process (at its exit)."""
    with _databases_mutex:
        found = [db for (_, pid), db in _databases.items() if pid == os.getpid()]
        _databases.clear()
    for db in found:
        db.close()
