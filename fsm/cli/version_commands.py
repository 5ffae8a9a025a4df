"""``fsm migrate``: instances of an earlier version of their machine moved to the installed one
(:mod:`fsm.engine.migration`)."""

from __future__ import annotations

import argparse
from typing import Any

from fsm.base.errors import FsmError, InputError
from fsm.cli.command_values import workspace_from
from fsm.view.terminal import json_text, one_line, out

__all__ = ["cmd_migrate", "cmd_replay"]


def cmd_replay(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """``fsm replay MACHINE ID``: the journal reproduces the document; with ``--decisions``, the
    replay of decisions (:mod:`fsm.engine.decisions`): exit 1 when a journal diverges."""
    if not args.decisions:
        if args.definition is not None or args.journals is not None:
            raise InputError("--definition and --journals go with --decisions")
        if len(args.ids) != 1:
            raise InputError("fsm replay checks one instance: give one ID (or --decisions)")
        from fsm.cli.command_values import instance_from
        from fsm.view.inspect import check_replay

        args.id = args.ids[0]
        report = check_replay(instance_from(args, values))
        for note in report.notes:
            out(f"note: {note}")
        out(f"{args.id}: journal of {report.records} records reproduces state '{report.state}'")
        return 0
    from fsm.engine.replay_decisions import replay_decisions

    workspace = workspace_from(values)
    decisions = replay_decisions(
        workspace,
        workspace.machine(args.machine),
        args.definition,
        ids=args.ids,
        journals=args.journals,
    )
    for line in decisions.lines():
        out(one_line(line))
    return 1 if decisions.diverged or decisions.forecast else 0


def cmd_migrate(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Show (``--dry-run``) or apply the migrations of one instance or of all; exit 2 when one
    cannot be migrated (each such instance named with why, the others migrated)."""
    from fsm.engine.engine import Engine

    if args.run_all == (args.id is not None):
        raise InputError("fsm migrate needs an ID or --all (not both)")
    workspace = workspace_from(values)
    machine = workspace.machine(args.machine)
    ids = sorted(workspace.store_for(machine).list_ids()) if args.run_all else [args.id]
    refused = migrated = 0
    for instance_id in ids:
        instance = workspace.instance(machine, instance_id)
        if not instance.exists():
            from fsm.base.errors import UnknownInstanceError

            raise UnknownInstanceError(
                f"no {machine.name} instance '{instance_id}' (expected {instance.where})"
            )
        try:
            plan = Engine(instance).migrate(dry_run=args.dry_run)
        except FsmError as exc:
            refused += 1
            out(one_line(f"{instance_id}: cannot migrate: {exc}"))
            continue
        if plan is None:
            if not args.run_all:
                out(f"{instance_id}: runs under the installed {machine.name}: nothing to migrate")
            continue
        migrated += 1
        out(one_line(plan.text(machine.name) + (" (dry run)" if args.dry_run else "")))
        if args.dry_run:
            for op in plan.changes:
                value = "" if "value" not in op else " " + json_text(op["value"])[:120]
                out(one_line(f"  {op['op']} {op['path'] or '/'}{value}"))
    if args.run_all:
        verb = "would migrate" if args.dry_run else "migrated"
        out(f"{machine.name}: {verb} {migrated}, {refused} cannot, of {len(ids)} instances")
    return 2 if refused else 0
