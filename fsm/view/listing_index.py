"""The index of ``fsm ls``: the rows of one machine's instances in one workspace, kept in the
cache (:mod:`fsm.base.cache`) with the store's stamp of what each row was read from.

Listing thousands of instances costs reading and validating every document, after importing
the machine's module and pydantic, which costs more than the listing itself. With the index,
``fsm ls`` reads a document only when the store's stamp of the instance
(:meth:`fsm.store.protocol.Store.stamp`: for files, the inode, size, modification and change times
of the document and its journal) changed since it was last listed, and imports the machine only
then. The store is made from the layout saved in the index, without the machine.

An index is used only while everything the rows were derived from is as it was: the machine
file, the Python files of the machine's package (or of the folder of its ``.py`` module), fsm's
own modules, pydantic's version, ``fsm.toml``, ``FSM_STORE`` and the ``-o`` options given. A row
is kept only when its store gave it a stamp (the file store gives none to files changed within
the last two seconds, so a document rewritten in place within one tick of the file system clock
is never mistaken for the version listed before it). Code a machine imports from outside its
package is not watched: clear the cache (or set ``FSM_CACHE_DIR`` empty) after changing it.
"""

from __future__ import annotations

import functools
import json
import os
import string
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base import cache
from fsm.base.errors import DefinitionError, FsmError, OptionsError, UnknownMachineError
from fsm.model.discovery import MachineEntry, find_machine, open_machine
from fsm.store import selection as stores
from fsm.store.protocol import Layout
from fsm.view.listing import ListedInstance, Row, newest_first, options_error_row, row_of

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.store.protocol import Store

__all__ = ["list_indexed"]

FORMAT = "3"
"""The shape of an index; an index of another shape is not read."""

MAX_CODE_FILES = 500
"""A machine whose package has more Python files than this is listed without an index."""


def list_indexed(
    workspace_path: Path,
    targets: list[str],
    status_filter: str | None,
    option_items: list[str],
    open_workspace: Callable[[], Workspace],
) -> list[ListedInstance]:
    """The rows of ``fsm ls`` for the machines named in ``targets``, newest first.

    ``open_workspace`` makes the :class:`~fsm.engine.instance.Workspace` (with the ``-o`` options)
    when an index has to be made: a listing whose indexes are all current needs none.
    """
    settings = _read_settings(workspace_path)
    rows: list[Row] = []
    workspace: Workspace | None = None
    for target in targets:
        try:
            entry = find_machine(target)
        except FsmError as exc:
            _one_row(targets, rows, target, exc)
            continue
        name = cache.digest(str(workspace_path), str(entry.path.resolve()), entry.name)
        store_name = os.environ.get(stores.ENVIRONMENT, "")
        key = cache.digest(FORMAT, sys.version, settings, store_name, *option_items)
        index = _Index.load(name, key)
        if index is None:
            workspace = workspace or open_workspace()
            try:
                machine = open_machine(target)
                options = workspace.options_for(machine)
                store = workspace.store_for(machine, options)
            except (OptionsError, UnknownMachineError, DefinitionError) as exc:
                _one_row(targets, rows, target, exc)
                continue
            layout = workspace.layout_for(machine, options)
            store_name = stores.chosen(workspace.config.store)[0]
            index = _Index.made(key, machine, entry, layout, store_name)
            if index is None:
                rows.extend(_unindexed(machine, store))
                continue
        rows.extend(index.rows(workspace_path, functools.partial(open_machine, target)))
        if index.changed:
            index.save(name)
    return newest_first(rows, status_filter)


def _one_row(targets: list[str], rows: list[Row], target: str, exc: FsmError) -> None:
    """A machine that does not load, or whose options are bad, is one row of a listing of
    several machines (it must not hide the others' instances); alone, its error is raised."""
    if len(targets) == 1:
        raise exc
    rows.append(options_error_row(target, exc))


def _read_settings(workspace: Path) -> bytes:
    try:
        with open(workspace / "fsm.toml", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


class _Index:
    """Rows by instance id, with the layout and code stamps they are valid for."""

    def __init__(self, key: str, layout: dict[str, Any], code: list[Any], rows: dict[str, Any]):
        self.key = key
        self.layout = layout
        self.code = code
        self.entries = rows
        self.changed = False

    @classmethod
    def load(cls, name: str, key: str) -> _Index | None:
        """The stored index ``name`` if it was made for ``key`` and its code is unchanged."""
        raw = cache.read("listings", name)
        if raw is None:
            return None
        try:
            stored = json.loads(raw)
            if (
                stored["key"] != key
                or cache.stamp(f for f, _, _ in stored["code"]) != stored["code"]
            ):
                return None
            return cls(key, stored["layout"], stored["code"], stored["rows"])
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def made(
        cls, key: str, machine: Machine, entry: MachineEntry, layout: Layout, store: str
    ) -> _Index | None:
        """A new, empty index of ``machine``'s instances, kept by the store named ``store``
        made with ``layout``; None when they are listed without one."""
        code = cache.stamp(_code_files(machine, entry))
        if not _plain(layout.document, layout.meta) or len(code) > MAX_CODE_FILES:
            return None
        saved = {
            "store": store,
            "machine": layout.machine,
            "document": layout.document,
            "meta": layout.meta,
            "values": {name: format(value, "") for name, value in layout.values.items()},
            "read_retries": layout.read_retries,
            "retry_interval": layout.retry_interval,
            "settings": dict(layout.settings),
            "space": layout.space,
            "queue": layout.queue,
            "runs": None if layout.runs is None else list(layout.runs),
        }
        index = cls(key, saved, code, {})
        index.changed = True
        return index

    def save(self, name: str) -> None:
        """Store the index (silently nothing when the cache cannot be written)."""
        stored = {"key": self.key, "layout": self.layout, "code": self.code, "rows": self.entries}
        cache.write("listings", name, json.dumps(stored, separators=(",", ":")).encode())

    def rows(self, workspace: Path, machine: Callable[[], Machine]) -> list[Row]:
        """A row per instance: the indexed one when its stamp is unchanged, else read anew
        (``machine`` loads the machine the first time that is needed)."""
        saved = self.layout
        layout = Layout(
            workspace,
            saved["machine"],
            saved["document"],
            saved["meta"],
            saved["values"],
            read_retries=saved["read_retries"],
            retry_interval=saved["retry_interval"],
            settings=saved["settings"],
            space=saved.get("space", ""),
            queue=saved.get("queue"),
            runs=None if saved.get("runs") is None else tuple(saved["runs"]),
        )
        store = stores.factory(saved["store"])(layout)
        loaded: Machine | None = None
        kept: dict[str, Any] = {}
        rows: list[Row] = []
        for instance_id in store.list_ids():
            stamp = store.stamp(instance_id)
            entry = self.entries.get(instance_id)
            if entry is not None and stamp is not None and entry[0] == stamp:
                kept[instance_id] = entry
                if entry[1]:
                    rows.append(_indexed_row(entry, instance_id))
                continue
            loaded = loaded or machine()
            row = row_of(loaded, store, instance_id, stamped=True)
            if row is None:
                entry = [store.stamp(instance_id), False]  # another machine's instance
            else:
                rows.append(row)
                entry = _entry(row)
            if entry[0] is not None:
                kept[instance_id] = entry
        self.changed = self.changed or kept != self.entries
        self.entries = kept
        return rows


def _entry(row: Row) -> list[Any]:
    listed = row.listed
    return [
        row.stamp,
        True,
        listed.machine,
        listed.status,
        listed.state,
        listed.updated,
        listed.error,
        listed.outcome,
        listed.reason,
        row.modified,
        listed.version,
        listed.runs,
    ]


def _indexed_row(entry: list[Any], instance_id: str) -> Row:
    _, _, machine, status, state, updated, error, outcome, reason, modified, version, runs = entry
    listed = ListedInstance(
        machine, instance_id, status, state, updated, error, outcome, reason, version, runs
    )
    return Row(listed, modified, None)


def _unindexed(machine: Machine, store: Store) -> list[Row]:
    found = (row_of(machine, store, i) for i in store.list_ids())
    return [row for row in found if row is not None]


def _plain(*templates: str | None) -> bool:
    """True when the storage templates only name values (``{state_dir}``), with no format
    specification or conversion: an index keeps the values as text."""
    for template in templates:
        if template is None:
            continue
        for _, field, spec, conversion in string.Formatter().parse(template):
            if field is not None and (spec or conversion):
                return False
    return True


def _code_files(machine: Machine, entry: MachineEntry) -> list[str]:
    """The files whose change may change a row: the machine file, its package's Python files,
    fsm's own modules and pydantic's version."""
    import pydantic
    import pydantic_core

    files = [str(entry.path.resolve())]
    module = machine.spec.module
    if module.endswith(".py"):
        folder = (machine.path.parent / module).resolve().parent
        files += sorted(str(path) for path in folder.glob("*.py"))
    else:
        loaded = sys.modules.get(module)
        source = getattr(loaded, "__file__", None)
        if source is not None:
            package = Path(source).parent if "." in module else None
            files += (
                sorted(str(p) for p in package.rglob("*.py") if "__pycache__" not in p.parts)
                if package is not None
                else [source]
            )
    fsm_folder = Path(__file__).resolve().parent.parent
    files += sorted(str(p) for p in fsm_folder.rglob("*.py") if "__pycache__" not in p.parts)
    files += [str(pydantic.__file__), str(pydantic_core.__file__)]
    return files
