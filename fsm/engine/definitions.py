"""Snapshots of every definition an instance ran under, kept by graph digest.

When an instance is created or migrated, the text of its machine file is kept as
``.fsm-definitions/<machine>-<graph>.yaml`` in the folder that holds the instances' journal
folders (``storage.meta``'s parent), or by a store that keeps definitions itself (PostgreSQL:
the ``fsm_definitions`` table, which every host reads): written once per graph, never changed.
History, diagrams, ``fsm check`` and ``fsm migrate`` read an earlier definition's names and
transitions from it after the machine file moved on.
"""

from __future__ import annotations

from pathlib import Path

from fsm.base.errors import FsmError
from fsm.base.files import atomic_write_text
from fsm.model.definition import MachineSpec, parse_definition
from fsm.model.machine import Machine
from fsm.store.protocol import Folders

__all__ = ["SNAPSHOTS", "keep_definition", "snapshot_path", "stored_definition"]

SNAPSHOTS = ".fsm-definitions"
"""The folder of the snapshots, beside the instances' journal folders."""


def snapshot_path(folders: Folders, machine: str, graph: str) -> Path:
    """Where the snapshot of ``machine``'s definition with graph digest ``graph`` is kept."""
    return folders.meta.parent / SNAPSHOTS / f"{machine}-{graph}.yaml"


def keep_definition(
    folders: Folders, machine: Machine, root: Path | None = None, store: object = None
) -> None:
    """Keep the machine file's text under its graph digest: in ``store`` when it keeps
    definitions (PostgreSQL: every host reads them there, and the workspace keeps no file of
    the store's), else beside the journals (nothing when kept already, or the file cannot be
    read: a snapshot is a convenience of history, never a reason to fail)."""
    graph = machine.identity.graph
    keeps = getattr(store, "keep_definition", None)
    path = snapshot_path(folders, machine.name, graph)
    if keeps is None and path.exists():
        return
    try:
        text = machine.path.read_text(encoding="utf-8")
        if keeps is not None:
            keeps(graph, text)
        else:
            atomic_write_text(path, text, root=root)
    except (OSError, FsmError):
        return


def stored_definition(
    folders: Folders, machine: str, graph: str, store: object = None
) -> MachineSpec | None:
    """The kept definition of ``machine`` with graph digest ``graph``: ``store``'s when it keeps
    definitions, else the file beside the journals (None when none is kept, or it no longer
    parses)."""
    text = None
    stored = getattr(store, "stored_definition", None)
    if stored is not None:
        try:
            text = stored(graph)
        except FsmError:
            text = None
    if text is None:
        try:
            text = snapshot_path(folders, machine, graph).read_text(encoding="utf-8")
        except OSError:
            return None
    spec, _, _ = parse_definition(text)
    return spec
