"""``fsm store init | import | export``: a store's tables, and copies between the workspace's
files and the store that fsm.toml or ``FSM_STORE`` chooses.

* ``init`` creates or upgrades what the store keeps instances in (idempotent: a store that is up
  to date is left as it is); the file store needs nothing.
* ``import [MACHINE...]`` copies each instance the workspace's files hold (the file store's
  documents and journals, where the machine's ``storage`` puts them) into the chosen store,
  byte-exact.
* ``export [MACHINE...]`` writes each instance of the chosen store back as those files (the
  document where the CCW dashboard reads it, the journal in its meta folder), byte-exact.
* ``adopt [MACHINE...]``: the instances of the workspace's space whose workspace is not known
  (made by an fsm that guessed spaces from folder names) become this workspace's.

Neither copy ever replaces newer work (:mod:`fsm.store.copies`): a copy the other side has
already is left; one the other side has an earlier version of (its journal the first records
of this one's) is brought up to date; anything else is a conflict, listed and left alone (exit
6) unless ``--overwrite`` is given, which keeps the replaced copy first (an export's in the
instance's meta folder, ``replaced/<time>/``; an import's in the store: ``fsm_kept``). A store
that cannot be reached ends the copy at the first instance, in one line.

These belong to stores that offer :class:`fsm.store.protocol.Administered` (the PostgreSQL store).
One line per instance; exit 0, or 6 when any instance could not be copied or was a conflict.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base.errors import FsmError, InputError, StoreUnreachableError
from fsm.cli.command_values import workspace_from
from fsm.view.terminal import one_line, out

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.store.copies import Copy
    from fsm.store.file_store import FileStore

__all__ = ["cmd_store"]


def cmd_store(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """``fsm store ACTION [MACHINE...]`` (its modules imported here: ``fsm`` starts without
    them)."""
    from fsm.model.discovery import open_machine, registered_machines
    from fsm.store.file_store import FileStore
    from fsm.store.protocol import Administered

    workspace = workspace_from(values)
    if args.action == "init" and args.machines:
        raise InputError("fsm store init takes no MACHINE (the store's tables serve them all)")
    if args.overwrite and args.action not in {"import", "export"}:
        raise InputError(f"fsm store {args.action} takes no --overwrite")
    if args.action == "init" and not workspace.space and _shared(workspace):
        workspace = _give_space(workspace, values)
    names = args.machines or sorted(registered_machines())
    machines = [open_machine(name) for name in names]
    stores = [(machine, workspace.store_for(machine)) for machine in machines]
    name = stores[0][1].name if stores else "files"
    administered = [(m, s) for m, s in stores if isinstance(s, Administered)]
    if args.action == "init":
        if not administered:
            out(f"the {name} store needs no init")
            return 0
        done = administered[0][1].initialize()
        for line in done:
            out(line)
        out(f"the {name} store is up to date" if not done else f"the {name} store is ready")
        return 0
    if not administered:
        raise InputError(
            f"fsm store {args.action} copies between the workspace's files and another store; "
            f"the store chosen is '{name}' (set [store] in fsm.toml or FSM_STORE)"
        )
    if args.action == "adopt":
        for machine, store in administered:
            adopted = store.adopt()
            for instance_id in adopted:
                out(one_line(f"{machine.name} {instance_id}: adopted by space '{workspace.space}'"))
        return 0
    failed = conflicts = 0
    for machine, store in administered:
        files = FileStore.from_layout(workspace.layout_for(machine))
        copy = _import if args.action == "import" else _export
        counts = copy(workspace, machine, store, files, args.overwrite)
        failed += counts[0]
        conflicts += counts[1]
    if conflicts:
        _error(
            f"{conflicts} instances not copied: the other side has work this one lacks; "
            f"'fsm store {args.action} --overwrite' replaces them, keeping a copy"
        )
    return 6 if failed or conflicts else 0


def _shared(workspace: Workspace) -> bool:
    """True when the store chosen is not one of fsm's own (files, memory): a store that may be
    shared by several workspaces, which tells them apart by their space."""
    from fsm.store.selection import BUILT_IN, chosen

    return chosen(workspace.config.store)[0] not in BUILT_IN


def _give_space(workspace: Workspace, values: dict[str, Any]) -> Workspace:
    """Write a new space into the workspace's fsm.toml (``fsm store init`` in a workspace that
    has none) and return the workspace as it reads now."""
    from fsm.model.config import write_space

    space = write_space(workspace.path)
    out(
        f'wrote space = "{space}" into {workspace.path / "fsm.toml"}: this project\'s name in '
        "the shared store; commit it, so that its other checkouts share its instances"
    )
    return workspace_from(values)


def _copies(store: Any, instance_id: str) -> Copy | None:
    from fsm.store.copies import Copy

    exported = store.export_instance(instance_id)
    return None if exported is None else Copy(*exported)


def _import(
    workspace: Workspace, machine: Machine, store: Any, files: FileStore, overwrite: bool
) -> tuple[int, int]:
    """Copy ``machine``'s instances from ``files`` into ``store``; return how many failed and
    how many were conflicts left alone."""
    from fsm.engine.driving import belongs_to
    from fsm.engine.rules import DocumentRules
    from fsm.store.copies import Copy, compare
    from fsm.store.protocol import Proposal

    rules = DocumentRules(machine, workspace.clock, where="")
    failed = conflicts = 0
    for instance_id in files.list_ids():
        listed = files.listed(instance_id)
        if not belongs_to(machine, listed.creator):
            continue
        try:
            raw = files.read_bytes(instance_id)
            if raw is None:
                continue
            lines = [text for _, text, _ in files.journal(instance_id).scan()]
            source = Copy(raw, lines)
            proposal = Proposal(raw, [])
            try:
                loaded = rules.loaded_from(raw)
            except FsmError:
                note = " (its document does not validate: it is kept as it is, not runnable)"
            else:
                note = ""
                proposal = Proposal(
                    raw,
                    [],
                    loaded.state,
                    loaded.status,
                    rules.runnable(loaded.state, loaded.status),
                )
            target = _copies(store, instance_id)
            verdict = compare(source, target)
            where = f"{machine.name} {instance_id}"
            if verdict == "same":
                out(one_line(f"{where}: the store has it already, the same: left"))
                continue
            if verdict not in {"new", "behind"} and not overwrite:
                conflicts += 1
                _error(f"{where}: conflict: the store's copy has work the files lack: {verdict}")
                continue
            over = None if target is None else (target.raw, target.lines)
            done = store.import_instance(
                instance_id,
                raw,
                lines,
                proposal,
                over=over,
                keep=verdict not in {"new", "behind"},
            )
            if done is None:
                conflicts += 1
                _error(f"{where}: conflict: the store's copy changed while it was compared")
            else:
                out(one_line(f"{where}: {done}, {len(lines)} records{note}"))
        except StoreUnreachableError:
            raise
        except (FsmError, OSError) as exc:
            failed += 1
            _error(f"{machine.name} {instance_id}: {exc}")
    return failed, conflicts


def _export(
    workspace: Workspace, machine: Machine, store: Any, files: FileStore, overwrite: bool
) -> tuple[int, int]:
    """Write ``machine``'s instances of ``store`` as ``files``; return how many failed and how
    many were conflicts left alone."""
    from fsm.base.files import atomic_write_bytes
    from fsm.store.copies import Copy, compare

    failed = conflicts = 0
    for instance_id in store.list_ids():
        try:
            source = _copies(store, instance_id)
            if source is None:
                continue
            paths = files.paths(instance_id)
            local = files.read_bytes(instance_id)
            target = None
            if local is not None:
                target = Copy(local, [text for _, text, _ in files.journal(instance_id).scan()])
            verdict = compare(source, target)
            where = f"{machine.name} {instance_id}"
            if verdict == "same":
                out(one_line(f"{where}: the files have it already, the same: left"))
                continue
            kept = ""
            if verdict not in {"new", "behind"}:
                if not overwrite:
                    conflicts += 1
                    _error(f"{where}: conflict: the files have work the store lacks: {verdict}")
                    continue
                assert target is not None
                kept = f" (the files' copy kept in {_keep_files(workspace, files, instance_id)})"
            journal = "".join(line + "\n" for line in source.lines).encode("utf-8")
            atomic_write_bytes(paths.journal, journal, root=workspace.path)
            atomic_write_bytes(paths.document, source.raw, root=workspace.path)
            out(one_line(f"{where}: exported to {paths.document}{kept}"))
        except StoreUnreachableError:
            raise
        except (FsmError, OSError) as exc:
            failed += 1
            _error(f"{machine.name} {instance_id}: {exc}")
    return failed, conflicts


def _keep_files(workspace: Workspace, files: FileStore, instance_id: str) -> Path:
    """Copy the instance's document and journal into ``replaced/<time>/`` of its meta folder
    (before an export replaces them); return that folder."""
    import time

    from fsm.base.files import atomic_write_bytes
    from fsm.base.reading import read_limited

    paths = files.paths(instance_id)
    folder = files.folders(instance_id).meta / "replaced" / time.strftime("%Y%m%dT%H%M%S")
    for name, path in (("document.json", paths.document), ("journal.ndjson", paths.journal)):
        try:
            data = read_limited(path, 1 << 34)
        except FileNotFoundError:
            continue
        atomic_write_bytes(folder / name, data, root=workspace.path)
    return folder


def _error(message: str) -> None:
    print(f"fsm: error: {one_line(message)}", file=sys.stderr)
