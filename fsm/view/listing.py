"""Listing instances (``fsm ls``): one row per instance of the given machines, newest first.

A row says what loading the instance would find: its control status, its FSM state, whether
the document is unreadable or invalid (it does not validate with the machine's model, or names
an unknown state), and for an instance in a final state the machine's verdict. Each row is read
through the instance's store (:meth:`fsm.store.protocol.Store.listed`). Rows do not change while the
store's stamp of the instance does not: the command line keeps them in an index
(:mod:`fsm.view.listing_index`) and reads only the instances that changed since.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fsm.base import jsonio
from fsm.base.clock import iso_utc
from fsm.base.errors import FsmError, OptionsError
from fsm.engine.driving import belongs_to
from fsm.view.terminal import one_line

if TYPE_CHECKING:
    from pydantic import ValidationError

    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.store.protocol import Store

__all__ = [
    "ListedInstance",
    "Row",
    "belongs_to",
    "list_instances",
    "matches",
    "one_per_document",
    "row_of",
]


@dataclass(frozen=True)
class ListedInstance:
    """One line of ``fsm ls``."""

    machine: str
    id: str
    status: str | None
    state: str | None
    updated: str
    error: str | None = None
    outcome: str | None = None
    reason: str | None = None
    version: str | None = None
    """The ``version:`` of its machine it runs under (None: not recorded)."""
    runs: str | None = None
    """What the installed definition does with it when it runs under another version (it
    migrates it, or cannot run it and why); None when it runs it as it is."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class Row:
    """A listed instance, the modification time it is sorted by (0 when unreadable), and the
    store's stamp of what it was read from (None when it must be read again)."""

    listed: ListedInstance
    modified: int
    stamp: Any = None


def matches(listed: ListedInstance, status_filter: str | None) -> bool:
    """Whether ``listed`` passes ``--status``: an unreadable or invalid document has no status
    to trust, so it matches no filter."""
    return status_filter is None or (listed.error is None and listed.status == status_filter)


def list_instances(
    workspace: Workspace, machines: list[Machine], status_filter: str | None = None
) -> list[ListedInstance]:
    """Instances of ``machines`` in ``workspace``, newest first (by document modification).

    Each instance is listed once, under its machine, even when machines share a storage layout
    (see :func:`belongs_to`, :func:`one_per_document`)."""
    rows: list[Row] = []
    where: list[str] = []
    shared = len(machines) > 1  # one machine's ids name one document each: nothing to merge
    for machine in machines:
        try:
            store = workspace.store_for(machine)
        except OptionsError as exc:
            if len(machines) == 1:
                raise
            # One machine's bad options must not hide the other machines' instances.
            rows.append(options_error_row(machine.name, exc))
            continue
        for instance_id in store.list_ids():
            row = row_of(machine, store, instance_id)
            if row is not None:
                rows.append(row)
                if shared:
                    where.append(store.describe(instance_id))
    return newest_first(one_per_document(rows, where) if shared else rows, status_filter)


def one_per_document(rows: list[Row], where: list[str]) -> list[Row]:
    """``rows`` with one row per document (``where`` says each row's document).

    Machines may keep their documents in the same place (issue-manager and skill-tuning both
    keep ``.workflow/.scratchpad/{id}/state.json``). A journal that names its machine decides
    (:func:`belongs_to`); a document whose journal does not (written by another program, or
    before create records named their machine) belongs to the machines whose model it fits, or,
    when it fits none, is listed once, under the first machine, as invalid."""
    seen: dict[str, list[int]] = {}
    for index, place in enumerate(where):
        seen.setdefault(place, []).append(index)
    dropped: set[int] = set()
    for indexes in seen.values():
        if len(indexes) < 2:
            continue
        valid = [i for i in indexes if rows[i].listed.error is None]
        dropped.update(i for i in indexes if i not in (valid or indexes[:1]))
    return [row for index, row in enumerate(rows) if index not in dropped]


def options_error_row(machine: str, exc: FsmError) -> Row:
    """The row standing for a machine whose options are bad (or that does not load)."""
    return Row(ListedInstance(machine, "-", None, None, "", one_line(str(exc))), 0, None)


def newest_first(rows: list[Row], status_filter: str | None) -> list[ListedInstance]:
    """The rows passing ``status_filter``, newest first (ties by id, descending)."""
    kept = [row for row in rows if matches(row.listed, status_filter)]
    kept.sort(key=lambda row: (row.modified, row.listed.id), reverse=True)
    return [row.listed for row in kept]


def row_of(
    machine: Machine, store: Store, instance_id: str, *, stamped: bool = False
) -> Row | None:
    """The row of one instance; None when its journal says another machine created it (see
    :func:`belongs_to`). With ``stamped`` the row carries the store's stamp of the instance,
    taken before it is read (for the index of ``fsm ls``)."""
    stamp = store.stamp(instance_id) if stamped else None
    found = store.listed(instance_id)
    if not belongs_to(machine, found.creator):
        return None
    try:
        if found.raw is None:
            raise ValueError(found.error or "it cannot be read")
        data = jsonio.loads_quick(found.raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        row = ListedInstance(machine.name, instance_id, None, None, "", f"unreadable: {exc}")
        return Row(row, 0, None)
    state, invalid, doc = _checked(machine, data)
    seconds, nanoseconds = divmod(found.modified_ns, 1_000_000_000)
    updated = _updated(seconds + nanoseconds * 1e-9)  # st_mtime's float, as the OS module makes it
    version = found.definition
    if version is not None and version != str(machine.spec.version):
        version = _newest_version(store, instance_id) or version  # migrated since?
    listed = ListedInstance(
        machine.name,
        instance_id,
        machine.status_of(data),
        state,
        updated,
        invalid,
        version=version,
        runs=_runs(machine, version),
    )
    if invalid is None and state is not None and machine.is_final(state):
        listed = _with_verdict(machine, listed, doc)
    return Row(listed, found.modified_ns, stamp)


def _newest_version(store: Store, instance_id: str) -> str | None:
    """The version the newest record naming a definition names (journals read from their end:
    only instances created under another version than the installed one pay for it)."""
    from fsm.model.records import version_named

    for data in store.journal(instance_id).backwards():
        found = version_named(data)
        if found is not None:
            return found
    return None


def _runs(machine: Machine, version: str | None) -> str | None:
    """What the installed definition does with an instance of ``version`` (None: runs it)."""
    installed = str(machine.spec.version)
    if version is None or version == installed:
        return None
    if any(str(m.from_version) == version for m in machine.spec.migrations):
        return f"runs under {machine.name} {version}: its next run migrates it to {installed}"
    if version.isdigit() and installed.isdigit() and int(version) > int(installed):
        return f"runs under {machine.name} {version}, newer than the installed {installed}"
    return (
        f"runs under {machine.name} {version}: the installed {installed} has no migration from it"
    )


def _updated(mtime: float) -> str:
    """``iso_utc(datetime.fromtimestamp(mtime, UTC))``, the text of the second made once for
    all the files modified within it: rounded to microseconds as ``datetime`` does (half to
    even), then cut to milliseconds."""
    if mtime < 0:
        return iso_utc(datetime.fromtimestamp(mtime, UTC))
    fraction, whole = math.modf(mtime)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    return f"{_second(int(whole))}.{micro // 1000:03d}Z"


@functools.lru_cache(maxsize=4096)
def _second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()[:19]


def _with_verdict(machine: Machine, row: ListedInstance, doc: Any) -> ListedInstance:
    """``row`` with the outcome and reason of an instance that ended."""
    assert row.state is not None
    verdict = machine.verdict(row.state, doc)
    if verdict is None:
        return row
    return replace(row, outcome="success" if verdict.success else "failure", reason=verdict.reason)


def _checked(machine: Machine, data: dict[str, Any]) -> tuple[str | None, str | None, Any]:
    """The state of ``data``, ``"invalid: <reason>"`` when it would not load, and the validated
    document (None when invalid).

    The same checks as :meth:`fsm.engine.instance.Instance.load`: the document validates with the
    machine's model (which also knows its statuses), and its state is one of the machine's.
    """
    validation_error, describe, field_codec = _validation()
    try:
        doc = machine.document_model.model_validate(data)
    except validation_error as exc:
        as_read = machine.codec.read(data) if isinstance(machine.codec, field_codec) else ""
        return as_read or None, f"invalid: {describe(exc, 1)}", None
    state = machine.codec.read(doc)
    if state not in machine.states:
        return None, f"invalid: unknown state '{state}'", None
    return state, None, doc


@functools.cache
def _validation() -> tuple[type[ValidationError], Callable[[ValidationError, int], str], type]:
    """What checking a document takes, imported once, when a document is first checked (a
    listing answered from its index imports neither pydantic nor the machine)."""
    from pydantic import ValidationError

    from fsm.model.definition import describe_validation
    from fsm.model.machine import FieldCodec

    return ValidationError, describe_validation, FieldCodec
