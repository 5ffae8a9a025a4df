"""The listing's rows kept in memory, current by the change feed, for large workspaces.

A listing reads every document (:func:`fsm.view.listing.list_instances`): 2,000 counters cost
about a second, 10,000 several, and every client's every request paid it. Once a workspace's
listing has :data:`INDEX_FROM` rows or more, the rows are kept here and only the instances the
change feed (:mod:`fsm.serve.watch`) names are read again: a request then filters and sorts rows
in memory. Smaller workspaces are read on each request as before (they cost less than the
tolerated 300 ms), so what a client wrote is listed in its very next request; in a large one it is
listed once the watcher has seen it (the feed that tells the pages to reload tells this index
first, so a page reloading on a change always sees it). A change the feed cannot name (a
watch restarted, a folder appeared) rebuilds everything. Machines that keep their documents in
one place (issue-manager and skill-tuning) are listed together, so a change of one of them
lists that group again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from fsm.base.errors import FsmError
from fsm.view.listing import ListedInstance, list_instances, row_of

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.serve.watch import Change

__all__ = ["INDEX_FROM", "RowIndex"]

_T = TypeVar("_T")

INDEX_FROM = 1000
"""Rows from which the listing is kept in memory rather than read on each request."""


class RowIndex:
    """The rows of the served machines, newest first, kept current by the change feed."""

    def __init__(
        self, workspace: Workspace, machines: Iterable[Machine], index_from: int | None = None
    ) -> None:
        self.workspace = workspace
        self.machines = {machine.name: machine for machine in machines}
        self.index_from = INDEX_FROM if index_from is None else index_from
        groups: dict[str, list[Machine]] = {}
        for machine in self.machines.values():
            groups.setdefault(machine.spec.storage.document, []).append(machine)
        self._groups = {place: tuple(group) for place, group in groups.items()}
        self._place_of = {m.name: place for place, group in groups.items() for m in group}
        self._rows: dict[str, dict[str, ListedInstance]] | None = None  # machine -> id -> row
        self._ordered: list[ListedInstance] | None = None
        self._build = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: set[tuple[str, str]] = set()
        self._details: dict[tuple[str, str], tuple[ListedInstance, Any]] = {}
        self._everything = True
        self._large = False
        """Whether a listing had INDEX_FROM rows: from then on they are kept here."""

    def changed(self, change: Change) -> None:
        """Told by the change feed (in the event loop: it only takes note)."""
        with self._pending_lock:
            if change.machine is None or change.id is None:
                self._everything = True
                self._pending.clear()
            elif not self._everything:
                self._pending.add((change.machine, change.id))

    def remembered(self, row: ListedInstance, make: Callable[[], _T]) -> _T:
        """``make()``'s answer for ``row`` (its title and progress), kept while the index holds
        this very row: a change of the instance replaces the row, and so forgets it."""
        if self._rows is None:
            return make()
        key = (row.machine, row.id)
        found = self._details.get(key)
        if found is not None and found[0] is row:
            value: _T = found[1]
            return value
        value = make()
        if len(self._details) > 4 * self.index_from + sum(map(len, self._rows.values())):
            self._details.clear()  # rows gone long ago
        self._details[key] = (row, value)
        return value

    def warm(self) -> None:
        """List everything once (when the server starts, off the event loop): a large workspace
        is then indexed before its first page asks."""
        with self._build:
            self._rebuild()
            with self._pending_lock:
                self._everything, self._pending = False, set()
            assert self._rows is not None
            self._large = sum(len(rows) for rows in self._rows.values()) >= self.index_from
            if not self._large:
                self._rows = None

    def listing(self, machines: list[Machine]) -> list[ListedInstance]:
        """The rows of ``machines``, newest first (ties by id, descending)."""
        with self._build:
            with self._pending_lock:
                everything, pending = self._everything, self._pending
                self._everything, self._pending = False, set()
            if self._rows is None and not self._large:  # small: read on each request
                listed = list_instances(self.workspace, machines)
                self._large = len(listed) >= self.index_from
                return listed
            if everything or self._rows is None:
                self._rebuild()
            elif pending:
                self._apply(pending)
            assert self._rows is not None
            if self._ordered is None:
                every = [row for rows in self._rows.values() for row in rows.values()]
                every.sort(key=lambda row: (row.updated, row.id), reverse=True)
                self._ordered = every
            names = {machine.name for machine in machines}
            if names == set(self.machines):
                return list(self._ordered)
            return [row for row in self._ordered if row.machine in names]

    def _rebuild(self) -> None:
        rows: dict[str, dict[str, ListedInstance]] = {name: {} for name in self.machines}
        for group in self._groups.values():
            for row in list_instances(self.workspace, list(group)):
                rows.setdefault(row.machine, {})[row.id] = row
        self._rows = rows
        self._ordered = None

    def _apply(self, pending: set[tuple[str, str]]) -> None:
        assert self._rows is not None
        regrouped: set[str] = set()
        for name, instance_id in pending:
            place = self._place_of.get(name)
            if place is None:
                continue
            group = self._groups[place]
            if len(group) > 1:  # one document may be either machine's: list them together
                regrouped.add(place)
                continue
            machine = group[0]
            try:
                store = self.workspace.store_for(machine)
                row = row_of(machine, store, instance_id) if store.exists(instance_id) else None
            except (OSError, FsmError):
                row = None
            if row is None:
                self._rows[name].pop(instance_id, None)
            else:
                self._rows[name][instance_id] = row.listed
        for place in regrouped:
            group = self._groups[place]
            for machine in group:
                self._rows[machine.name] = {}
            for listed in list_instances(self.workspace, list(group)):
                self._rows.setdefault(listed.machine, {})[listed.id] = listed
        self._ordered = None
