"""``fsm store init | import | export``: a store's tables, and copies between the workspace's
files and the store that fsm.toml or ``FSM_STORE`` chooses.

* ``init`` creates or upgrades what the store keeps instances in (idempotent: a store that is up
  to date is left as it is); the file store needs nothing.
* ``import [MACHINE...]`` copies each instance the workspace's files hold (the file store's
  documents and journals, where the machine's ``storage`` puts them) into the chosen store,
  byte-exact; an instance the store has already is left as it is, and said to be.
* ``export [MACHINE...]`` writes each instance of the chosen store back as those files (the
  document where the CCW dashboard reads it, the journal in its meta folder), byte-exact,
  replacing what is there.

These belong to stores that offer :class:`fsm.store.protocol.Administered` (the PostgreSQL store).
One line per instance; exit 0, or 6 when any instance could not be copied.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fsm.base.errors import FsmError, InputError
from fsm.cli.command_values import workspace_from
from fsm.view.terminal import one_line, out

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.store.file_store import FileStore

__all__ = ["cmd_store"]


def cmd_store(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """``fsm store ACTION [MACHINE...]`` (its modules imported here: ``fsm`` starts without
    them)."""
    from fsm.model.discovery import open_machine, registered_machines
    from fsm.store.file_store import FileStore
    from fsm.store.protocol import Administered

    workspace = workspace_from(values)
    names = args.machines or sorted(registered_machines())
    if args.action == "init" and args.machines:
        raise InputError("fsm store init takes no MACHINE (the store's tables serve them all)")
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
    failed = 0
    for machine, store in administered:
        files = FileStore.from_layout(workspace.layout_for(machine))
        copy = _import if args.action == "import" else _export
        failed += copy(workspace, machine, store, files)
    return 6 if failed else 0


def _import(workspace: Workspace, machine: Machine, store: Any, files: FileStore) -> int:
    """Copy ``machine``'s instances from ``files`` into ``store``; return how many failed."""
    from fsm.engine.driving import belongs_to
    from fsm.engine.rules import DocumentRules
    from fsm.store.protocol import Proposal

    rules = DocumentRules(machine, workspace.clock, where="")
    failed = 0
    for instance_id in files.list_ids():
        listed = files.listed(instance_id)
        if not belongs_to(machine, listed.creator):
            continue
        try:
            raw = files.read_bytes(instance_id)
            if raw is None:
                continue
            lines = [text for _, text, _ in files.journal(instance_id).scan()]
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
            if store.import_instance(instance_id, raw, lines, proposal):
                out(one_line(f"{machine.name} {instance_id}: imported, {len(lines)} records{note}"))
            else:
                out(one_line(f"{machine.name} {instance_id}: the store has it already: left"))
        except (FsmError, OSError) as exc:
            failed += 1
            _error(f"{machine.name} {instance_id}: {exc}")
    return failed


def _export(workspace: Workspace, machine: Machine, store: Any, files: FileStore) -> int:
    """Write ``machine``'s instances of ``store`` as ``files``; return how many failed."""
    from fsm.base.files import atomic_write_bytes

    failed = 0
    for instance_id in store.list_ids():
        try:
            exported = store.export_instance(instance_id)
            if exported is None:
                continue
            raw, lines = exported
            paths = files.paths(instance_id)
            journal = "".join(line + "\n" for line in lines).encode("utf-8")
            atomic_write_bytes(paths.journal, journal, root=workspace.path)
            atomic_write_bytes(paths.document, raw, root=workspace.path)
            out(one_line(f"{machine.name} {instance_id}: exported to {paths.document}"))
        except (FsmError, OSError) as exc:
            failed += 1
            _error(f"{machine.name} {instance_id}: {exc}")
    return failed


def _error(message: str) -> None:
    print(f"fsm: error: {one_line(message)}", file=sys.stderr)
