"""The tables of the PostgreSQL store, as numbered migrations (``fsm store init``).

Each migration is applied once, in order, in a transaction of its own that also records it in
``fsm_schema``; ``fsm store init`` applies those a database lacks (idempotent: a database that
is up to date is left alone) under an advisory lock, so two hosts initialising at once do not
both apply one. A store refuses a database whose schema is older (run ``fsm store init``) or
newer (made by a newer fsm) than it knows.

The tables:

* ``fsm_instances``: one row per instance of a machine in a space (``space``, ``machine``,
  ``id``; a space is a project whose checkouts share their instances: see
  :attr:`fsm.store.protocol.Layout.space`): the document's
  exact bytes (``raw``; NULL while the instance has none: leased before it was created, or its
  document quarantined), its ``version`` (grows with every write: the compare-and-swap's), what
  it says of itself (``state``, ``status``, ``runnable``), its ``queue``, the machine its create
  record names (``creator``), the number of its journal records (``records``), and its lease:
  the ``holder`` that holds it and the fencing token of the latest claim (``fence``, never
  smaller).
* ``fsm_journal``: one row per journal record, numbered from 1 per instance, holding the record's
  JSON text exactly as the file store writes its line; a trigger refuses UPDATE, DELETE and
  TRUNCATE (append-only).
* ``fsm_holders``: the processes that hold leases (a worker, an ``fsm run``): a name for people
  and the time their lease expires unless renewed (the server's clock: hosts' clocks never
  matter).
* ``fsm_kept``: documents quarantined as unreadable, step results that could not be
  committed, and instances ``fsm store import --overwrite`` replaced (the document in ``raw``,
  the journal's lines in ``journal``), never deleted by fsm.

Migration 3 records each instance's ``workspace``: the space it was made in, written by its
first write and never changed by fsm. Rows made before it have none (their space may have
been guessed from a folder's name by an older fsm, and two projects may share it): workers
never claim them and ``fsm run`` refuses them until ``fsm store adopt`` in their own checkout
makes them its space's. A worker claims only rows whose workspace is their space, and a run
refuses a row whose workspace is another (moved by hand), naming both. The migration also
makes another program's ``UPDATE`` of a document that leaves its version as it was (a script,
an admin) bump the version (a trigger, which also notifies): the next step sees a newer
version and merges and journals it as it does a dashboard's write to a file, never writing over
it. The journal's trigger lets a ``DELETE`` through only in a transaction that set
``fsm.replacing`` to that instance's key (``fsm store import --overwrite``, after it kept the
old records in ``fsm_kept``).
* ``fsm_heartbeats``: the heartbeat of the run driving each instance (its host, pid, actor and
  the action in progress: :mod:`fsm.store.heartbeat`), one row per instance, with the time it
  was published by the server's clock, so that a reader on any host sees who drives.

Partial indexes keep claims as fast with 100,000 finished instances as with none: the claim
looks only at rows that are runnable.
"""

from __future__ import annotations

from typing import Any

from fsm.base.errors import StoreError

__all__ = ["LATEST", "MIGRATIONS", "applied_version", "migrate"]

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "instances, journal (append-only), holders, kept documents",
        """
CREATE TABLE fsm_holders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    started timestamptz NOT NULL DEFAULT now(),
    expires timestamptz NOT NULL
);

CREATE TABLE fsm_instances (
    space text NOT NULL,
    machine text NOT NULL,
    id text NOT NULL,
    raw bytea,
    version bigint NOT NULL DEFAULT 0,
    modified timestamptz NOT NULL DEFAULT clock_timestamp(),
    state text,
    status text,
    runnable boolean NOT NULL DEFAULT false,
    queue text,
    creator text,
    records integer NOT NULL DEFAULT 0,
    holder bigint REFERENCES fsm_holders (id) ON DELETE SET NULL,
    fence bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (space, machine, id)
);
CREATE INDEX fsm_instances_runnable ON fsm_instances (space, machine, modified)
    WHERE runnable AND raw IS NOT NULL;
CREATE INDEX fsm_instances_held ON fsm_instances (holder) WHERE holder IS NOT NULL;

CREATE TABLE fsm_journal (
    space text NOT NULL,
    machine text NOT NULL,
    id text NOT NULL,
    position integer NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (space, machine, id, position)
);

CREATE FUNCTION fsm_journal_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'fsm_journal is append-only: % refused', TG_OP;
END
$$;
CREATE TRIGGER fsm_journal_append_only BEFORE UPDATE OR DELETE ON fsm_journal
    FOR EACH ROW EXECUTE FUNCTION fsm_journal_refuse();
CREATE TRIGGER fsm_journal_no_truncate BEFORE TRUNCATE ON fsm_journal
    FOR EACH STATEMENT EXECUTE FUNCTION fsm_journal_refuse();

CREATE TABLE fsm_kept (
    number bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('quarantined', 'parked')),
    space text NOT NULL,
    machine text NOT NULL,
    id text NOT NULL,
    raw bytea NOT NULL,
    kept timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    (
        2,
        "heartbeats of the runs driving instances",
        """
CREATE TABLE fsm_heartbeats (
    space text NOT NULL,
    machine text NOT NULL,
    id text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    data text NOT NULL,
    beat timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (space, machine, id)
);
""",
    ),
    (
        3,
        "instances record their workspace; other programs' writes bump the version; "
        "replaced copies kept",
        """
ALTER TABLE fsm_instances ADD COLUMN workspace text;

CREATE FUNCTION fsm_instances_foreign_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    NEW.modified := clock_timestamp();
    PERFORM pg_notify('fsm_changes', NEW.space || '/' || NEW.machine || '/' || NEW.id);
    RETURN NEW;
END
$$;
CREATE TRIGGER fsm_instances_foreign_write BEFORE UPDATE ON fsm_instances FOR EACH ROW
    WHEN (NEW.raw IS DISTINCT FROM OLD.raw AND NEW.version = OLD.version)
    EXECUTE FUNCTION fsm_instances_foreign_write();

CREATE OR REPLACE FUNCTION fsm_journal_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('fsm.replacing', true)
                = OLD.space || '/' || OLD.machine || '/' || OLD.id THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'fsm_journal is append-only: % refused', TG_OP;
END
$$;

ALTER TABLE fsm_kept DROP CONSTRAINT fsm_kept_kind_check;
ALTER TABLE fsm_kept ADD CONSTRAINT fsm_kept_kind_check
    CHECK (kind IN ('quarantined', 'parked', 'replaced'));
ALTER TABLE fsm_kept ADD COLUMN journal text;
""",
    ),
    (
        4,
        "the version of its machine each instance runs under, which workers claim by, the "
        "versions each worker runs, and the definitions instances ran under",
        """
ALTER TABLE fsm_instances ADD COLUMN definition text;
ALTER TABLE fsm_holders ADD COLUMN serves text[];

CREATE TABLE fsm_definitions (
    space text NOT NULL,
    machine text NOT NULL,
    graph text NOT NULL,
    text text NOT NULL,
    kept timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, machine, graph)
);
""",
    ),
]
"""(number, what it does, SQL), in order."""

LATEST = MIGRATIONS[-1][0]
"""The schema version this fsm reads and writes."""

_INIT_LOCK = 0x66736D5F696E6974  # "fsm_init": serialises concurrent `fsm store init`s

_LEDGER = """
CREATE TABLE IF NOT EXISTS fsm_schema (
    version integer PRIMARY KEY,
    description text NOT NULL,
    applied timestamptz NOT NULL DEFAULT now()
)
"""


def applied_version(conn: Any) -> int | None:
    """The latest migration the database has (None: it has no fsm tables)."""
    found = conn.execute("SELECT to_regclass('fsm_schema') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return None
    row = conn.execute("SELECT coalesce(max(version), 0) FROM fsm_schema").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Any) -> list[str]:
    """Apply the migrations the database lacks (``conn`` in autocommit mode); return one line
    per migration applied."""
    done: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INIT_LOCK,))
        conn.execute(_LEDGER)
        row = conn.execute("SELECT coalesce(max(version), 0) FROM fsm_schema").fetchone()
        current = int(row[0]) if row else 0
        if current > LATEST:
            raise StoreError(
                f"the database has fsm tables of version {current}, made by a newer fsm (this "
                f"one knows {LATEST}): nothing was changed; upgrade fsm"
            )
        for number, description, sql in MIGRATIONS:
            if number <= current:
                continue
            conn.execute(sql)
            conn.execute(
                "INSERT INTO fsm_schema (version, description) VALUES (%s, %s)",
                (number, description),
            )
            done.append(f"applied migration {number}: {description}")
            if number == 3:
                done += _unadopted(conn)
    return done


def _unadopted(conn: Any) -> list[str]:
    """What migration 3 left to do: the instances whose workspace is not known, by space."""
    rows = conn.execute(
        "SELECT space, count(*) FROM fsm_instances WHERE workspace IS NULL "
        "GROUP BY space ORDER BY space"
    ).fetchall()
    return [
        f"space '{space}': {count} instances made before spaces were explicit wait for "
        "'fsm store adopt' in their own checkout (no worker runs them until then)"
        for space, count in rows
    ]
