"""The workspace and the instance a command names, made from its parsed arguments (shared by
:mod:`fsm.cli.commands` and :mod:`fsm.cli.machine_commands`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base.errors import InputError

if TYPE_CHECKING:
    from fsm.engine.instance import Instance, Workspace

__all__ = ["instance_from", "workspace_from"]


def workspace_from(values: dict[str, Any]) -> Workspace:
    """The workspace of ``-C`` with the ``-o`` options given."""
    # Imported here: fsm ls, when its index is current, needs neither pydantic nor a machine.
    from fsm.engine.instance import Workspace
    from fsm.model.config import assignment_texts, parse_assignments

    items = values.get("options") or []
    options = parse_assignments(items, what="option")
    path = Path(values.get("workspace", "."))
    if not path.is_dir():
        raise InputError(f"workspace {path} is not a folder")
    workspace = Workspace(path, options=options, option_texts=assignment_texts(items))
    _warn_if_kept_nowhere(workspace)
    return workspace


def _warn_if_kept_nowhere(workspace: Workspace) -> None:
    """The memory store keeps nothing after the command ends (each command is a process of its
    own): said on stderr, once per command, rather than refused (a test, a demo of ``fsm
    serve`` within one process, are its uses)."""
    from fsm.store.selection import chosen

    if chosen(workspace.config.store)[0] != "memory" or values_warned:
        return
    values_warned.append(True)
    print(
        "fsm: warning: the memory store keeps nothing once this command ends: what it creates "
        "or changes is gone for the next command (choose files or postgres for lasting work)",
        file=sys.stderr,
    )


values_warned: list[bool] = []
"""Non-empty once this process said it (cleared by each command line: see program.main)."""


def instance_from(
    args: argparse.Namespace, values: dict[str, Any], *, must_exist: bool = True
) -> Instance:
    """The instance ``args.id`` of ``args.machine`` in the workspace of ``values``
    (UnknownInstanceError when it has no document and ``must_exist``)."""
    workspace = workspace_from(values)
    instance = workspace.instance(args.machine, args.id)
    if must_exist and not instance.exists():
        from fsm.base.errors import UnknownInstanceError

        raise UnknownInstanceError(
            f"no {instance.machine.name} instance '{args.id}' in {workspace.path} "
            f"(expected {instance.where}); 'fsm ls' lists them"
        )
    return instance
