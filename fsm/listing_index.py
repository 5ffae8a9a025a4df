"""The index of ``fsm ls``: the rows of one machine's instances in one workspace, kept in the
cache (:mod:`fsm.cache`) with the stamps of the files each row was read from.

Listing thousands of instances costs reading and validating every document, after importing
the machine's module and pydantic, which costs more than the listing itself. With the index,
``fsm ls`` reads a document only when it changed since it was last listed (its inode, size,
modification and change times differ, or its journal's do), and imports the machine only then.

An index is used only while everything the rows were derived from is as it was: the machine
file, the Python files of the machine's package (or of the folder of its ``.py`` module), fsm's
own modules, pydantic's version, ``fsm.toml`` and the ``-o`` options given. A row is kept only
once its files have been left alone for :data:`SETTLED_NS` (two seconds), so a document
rewritten in place within one tick of the file system clock is never mistaken for the version
listed before it. Code a machine imports from outside its package is not watched: clear the
cache (or set ``FSM_CACHE_DIR`` empty) after changing it.
"""

from __future__ import annotations

import functools
import json
import os
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm import cache
from fsm.discovery import MachineEntry, find_machine, open_machine
from fsm.errors import OptionsError
from fsm.listing import ListedInstance, Row, newest_first, options_error_row, row_of, stamp_of
from fsm.store import FileStore

if TYPE_CHECKING:
    from fsm.instance import Workspace
    from fsm.machine import Machine

__all__ = ["SETTLED_NS", "list_indexed"]

FORMAT = "1"
"""The shape of an index; an index of another shape is not read."""

SETTLED_NS = 2_000_000_000
"""A row is kept once its document and journal have not changed for this long."""
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

    ``open_workspace`` makes the :class:`~fsm.instance.Workspace` (with the ``-o`` options)
    when an index has to be made: a listing whose indexes are all current needs none.
    """
    settings = _read_settings(workspace_path)
    rows: list[Row] = []
    workspace: Workspace | None = None
    for target in targets:
        entry = find_machine(target)
        name = cache.digest(str(workspace_path), str(entry.path.resolve()), entry.name)
        key = cache.digest(FORMAT, sys.version, settings, *option_items)
        index = _Index.load(name, key)
        if index is None:
            machine = open_machine(target)
            workspace = workspace or open_workspace()
            try:
                options = workspace.options_for(machine)
                store = workspace.store_for(machine, options)
            except OptionsError as exc:
                if len(targets) == 1:
                    raise
                # One machine's bad options must not hide the other machines' instances.
                rows.append(options_error_row(machine.name, exc))
                continue
            index = _Index.made(key, machine, entry, options.model_dump())
            if index is None:
                rows.extend(_unindexed(machine, store))
                continue
        rows.extend(index.rows(workspace_path, functools.partial(open_machine, target)))
        if index.changed:
            index.save(name)
    return newest_first(rows, status_filter)


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
        cls,
        key: str,
        machine: Machine,
        entry: MachineEntry,
        options: dict[str, Any],
    ) -> _Index | None:
        """A new, empty index of ``machine``'s instances, stored at the paths its storage and
        ``options`` give; None when they are listed without one."""
        storage = machine.spec.storage
        code = cache.stamp(_code_files(machine, entry))
        if not _plain(storage.document, storage.meta) or len(code) > MAX_CODE_FILES:
            return None
        layout = {
            "document": storage.document,
            "meta": storage.meta,
            "values": {name: format(value, "") for name, value in options.items()},
        }
        index = cls(key, layout, code, {})
        index.changed = True
        return index

    def save(self, name: str) -> None:
        """Store the index (silently nothing when the cache cannot be written)."""
        stored = {"key": self.key, "layout": self.layout, "code": self.code, "rows": self.entries}
        cache.write("listings", name, json.dumps(stored, separators=(",", ":")).encode())

    def rows(self, workspace: Path, machine: Callable[[], Machine]) -> list[Row]:
        """A row per instance: the indexed one when its files are unchanged, else read anew
        (``machine`` loads the machine the first time that is needed)."""
        layout = self.layout
        store = FileStore(workspace, layout["document"], layout["meta"], layout["values"])
        loaded: Machine | None = None
        now = time.time_ns()
        kept: dict[str, Any] = {}
        rows: list[Row] = []
        for instance_id in store.list_ids():
            document, journal = store.locations(instance_id)
            entry = self.entries.get(instance_id)
            if entry is not None and _current(entry, document, journal):
                kept[instance_id] = entry
                if entry[2]:
                    rows.append(_indexed_row(entry, instance_id))
                continue
            loaded = loaded or machine()
            row = row_of(loaded, instance_id, document, journal, stamped=True)
            if row is None:
                entry = [None, stamp_of(journal), False]
            else:
                rows.append(row)
                entry = _entry(row) if row.stamps is not None else None
            if entry is not None and _settled(entry, now):
                kept[instance_id] = entry
        self.changed = self.changed or kept != self.entries
        self.entries = kept
        return rows


def _current(entry: list[Any], document: str, journal: str) -> bool:
    """True when the document and journal are the files ``entry`` was read from."""
    if stamp_of(journal) != entry[1]:
        return False
    if not entry[2]:
        return True  # another machine's instance: only its journal's first line counted
    try:
        info = os.stat(document, follow_symlinks=False)
    except OSError:
        return False
    stamp: list[int] = [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    return bool(stamp == entry[0])


def _settled(entry: list[Any], now: int) -> bool:
    """True when neither file changed within the last :data:`SETTLED_NS`."""
    changed = [stamp[3] for stamp in entry[:2] if stamp is not None]
    return all(now - moment > SETTLED_NS for moment in changed)


def _entry(row: Row) -> list[Any]:
    assert row.stamps is not None
    listed = row.listed
    document, journal = row.stamps
    return [
        document,
        journal,
        True,
        listed.machine,
        listed.status,
        listed.state,
        listed.updated,
        listed.error,
        listed.outcome,
        listed.reason,
        row.modified,
    ]


def _indexed_row(entry: list[Any], instance_id: str) -> Row:
    _, _, _, machine, status, state, updated, error, outcome, reason, modified = entry
    listed = ListedInstance(machine, instance_id, status, state, updated, error, outcome, reason)
    return Row(listed, modified, None)


def _unindexed(machine: Machine, store: FileStore) -> list[Row]:
    found = (row_of(machine, i, *store.locations(i)) for i in store.list_ids())
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

    import fsm

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
    files += sorted(str(path) for path in Path(fsm.__file__).parent.glob("*.py"))
    files += [str(pydantic.__file__), str(pydantic_core.__file__)]
    return files
