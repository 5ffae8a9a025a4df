"""Copies between a workspace's files and the PostgreSQL store (``fsm store import``,
``export``, ``adopt``): the statements that write an imported instance.

An import writes an instance's row and journal in one transaction, under the instance's
document lock and a lock of its row, and only if the row still holds what the caller compared
the files with (``over``): nothing written by a run meanwhile is replaced. Bringing the store up
to date appends the journal lines it lacks; replacing it (``--overwrite``) first keeps the
store's document and journal in ``fsm_kept`` (kind ``replaced``), then deletes the journal's
rows: the journal's append-only trigger lets a ``DELETE`` through only in a transaction that
names the instance in ``fsm.replacing`` (see :mod:`fsm.postgres.schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fsm.base import jsonio
from fsm.base.errors import InstanceHeldError
from fsm.model.records import version_named
from fsm.postgres.database import CHANGES

if TYPE_CHECKING:
    from fsm.store.protocol import Proposal

__all__ = ["import_instance"]

_ROW = """
SELECT i.raw, i.records, (SELECT h.name FROM fsm_holders h
                          WHERE h.id = i.holder AND h.expires > statement_timestamp())
FROM fsm_instances i
WHERE i.space = %(space)s AND i.machine = %(machine)s AND i.id = %(id)s
FOR UPDATE OF i
"""


def import_instance(
    where: dict[str, Any],
    queue: str | None,
    instance_id: str,
    raw: bytes,
    lines: Sequence[str],
    proposal: Proposal,
    over: tuple[bytes, Sequence[str]] | None,
    keep: bool,
    conn: Any,
) -> str | None:
    """Write ``raw`` and ``lines`` as the instance's, on ``conn`` (``where``: its ``space``,
    ``machine`` and ``key``; ``queue``: the store's default queue); what was done, or None when
    the row is not what the caller compared with (``over``: the store's document and journal
    lines it read; None: the instance must have none), and nothing was written.

    With ``over``: ``keep`` replaces the row and journal (the old ones kept in ``fsm_kept``),
    else ``lines`` extend ``over``'s lines (the caller checked) and only the rest is appended.
    InstanceHeldError when a live run or worker holds the instance."""
    params: dict[str, Any] = {**where, "id": instance_id}
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0))", params)
        conn.execute(
            "INSERT INTO fsm_instances (space, machine, id, workspace) "
            "VALUES (%(space)s, %(machine)s, %(id)s, %(space)s) ON CONFLICT DO NOTHING",
            params,
        )
        found_raw, records, held_by = conn.execute(_ROW, params).fetchone()
        start = 0
        done = "imported"
        if over is None:
            if found_raw is not None or records:
                return None
        else:
            if found_raw is None or bytes(found_raw) != over[0] or records != len(over[1]):
                return None
            if held_by is not None:
                raise InstanceHeldError(
                    f"instance '{instance_id}' is being run by {held_by}: not replaced"
                )
            if keep:
                kept = conn.execute(
                    "INSERT INTO fsm_kept (kind, space, machine, id, raw, journal) "
                    "SELECT 'replaced', %(space)s, %(machine)s, %(id)s, %(raw)s, "
                    "coalesce(string_agg(line, E'\\n' ORDER BY position), '') FROM fsm_journal "
                    "WHERE space = %(space)s AND machine = %(machine)s AND id = %(id)s "
                    "RETURNING number",
                    {**params, "raw": bytes(found_raw)},
                ).fetchone()
                conn.execute("SELECT set_config('fsm.replacing', %(key)s, true)", params)
                conn.execute(
                    "DELETE FROM fsm_journal "
                    "WHERE space = %(space)s AND machine = %(machine)s AND id = %(id)s",
                    params,
                )
                done = f"replaced (the store's copy kept as fsm_kept row {kept[0]})"
            else:
                start = len(over[1])
                done = f"brought up to date ({len(lines) - start} records added)"
        _write(conn, queue, params, raw, lines, proposal, start)
    return done


def _write(
    conn: Any,
    default_queue: str | None,
    params: dict[str, Any],
    raw: bytes,
    lines: Sequence[str],
    proposal: Proposal,
    start: int,
) -> None:
    """The row's document and what it says of itself, and the journal lines from ``start``."""
    creator = queue = None
    first = _parsed(lines[0]) if lines else None
    if first is not None and first.get("kind") == "create":
        named = first.get("machine")
        creator = named if isinstance(named, str) else None
        queue = first.get("queue")
    values = {
        **params,
        "raw": raw,
        "state": proposal.state,
        "status": proposal.status,
        "runnable": proposal.runnable,
        "count": len(lines),
        "lines": list(lines[start:]),
        "start": start,
        "queue": queue if isinstance(queue, str) else default_queue,
        "creator": creator,
        "definition": _definition(lines),
    }
    conn.execute(
        "UPDATE fsm_instances SET raw = %(raw)s, version = version + 1, "
        "state = %(state)s, status = %(status)s, runnable = %(runnable)s, "
        "records = %(count)s, queue = %(queue)s, creator = %(creator)s, "
        "definition = %(definition)s, modified = clock_timestamp() "
        "WHERE space = %(space)s AND machine = %(machine)s AND id = %(id)s",
        values,
    )
    conn.execute(
        "INSERT INTO fsm_journal (space, machine, id, position, line) "
        "SELECT %(space)s, %(machine)s, %(id)s, %(start)s + l.n, l.line "
        "FROM unnest(%(lines)s::text[]) WITH ORDINALITY AS l(line, n)",
        values,
    )
    conn.execute(f"SELECT pg_notify('{CHANGES}', %(key)s)", values)


def _parsed(line: str) -> dict[str, Any] | None:
    try:
        data = jsonio.loads(line)
    except jsonio.JsonError:
        return None
    return data if isinstance(data, dict) else None


def _definition(lines: Sequence[str]) -> str | None:
    """The version of its machine the journal ``lines`` say the instance runs under last."""
    for line in reversed(lines):
        found = _parsed(line)
        named = version_named(found) if found is not None else None
        if named is not None:
            return named
    return None
