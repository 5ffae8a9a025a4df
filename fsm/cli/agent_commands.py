"""``fsm agents``: the agent CLIs fsm knows and the agents fsm.toml configures, where each was
found, its version, and whether it accepts the invocation fsm gives it (checked offline against
its own ``--help``: :mod:`fsm.process.agent_check`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fsm.base.errors import InputError
from fsm.view.terminal import emit_json, one_line, out

__all__ = ["cmd_agents"]


def cmd_agents(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """List the agents; exit 1 when one that is configured or installed cannot run."""
    from fsm.model.config import load_config
    from fsm.process.agents import KNOWN
    from fsm.process.executor import SubprocessExecutor
    from fsm.process.redaction import redacted_command

    path = Path(values.get("workspace", "."))
    if not path.is_dir():
        raise InputError(f"workspace {path} is not a folder")
    config = load_config(path)
    executor = SubprocessExecutor(path.resolve(), config.agents)
    names = args.names or sorted(set(KNOWN) | set(config.agents))
    statuses = [executor.agent_status(name) for name in names]
    # An agent fsm merely knows of and that is not installed is not a failure of a plain
    # listing ("not installed"); one that is installed or configured and cannot run is, and so
    # is any agent named on the command line that cannot run, installed or not.
    failing = [
        s for s in statuses if s.problem and (args.names or s.origin == "fsm.toml" or s.path)
    ]
    if args.json:
        shown = []
        for status in statuses:
            data = status.to_json()
            for invocation in data["invocations"].values():
                invocation["argv"] = list(redacted_command(invocation["argv"], {})[0])
            shown.append(data)
        emit_json(shown)
        return 1 if failing else 0
    for status in statuses:
        where = status.path or "not found"
        version = status.version or ("?" if status.path else "-")
        if status.problem and status not in failing:
            verdict = "not installed"
        elif status.problem:
            verdict = "CANNOT RUN"
        elif not status.invocations:
            verdict = "not checked (not an agent CLI fsm knows)" if status.path else ""
        elif status.checked:
            verdict = "accepted"
        else:
            verdict = "not checked"
        out(one_line(f"{status.name:<8} {version:<10} {status.origin:<9} {where}  {verdict}"))
        for invocation in status.invocations:
            argv = " ".join(redacted_command(invocation.argv, {})[0])
            out(one_line(f"  {invocation.mode:<9} {argv}"))
            if invocation.unchecked:
                out(one_line(f"  {'':<9} not checked: {invocation.unchecked}"))
        if status.invocations or status.origin == "fsm.toml":
            out(f"  {'output':<9} {status.output}")
        if status.warning:
            out(one_line(f"  warning: {status.warning}"))
        if status.problem:
            out(one_line(f"  {status.problem}"))
    return 1 if failing else 0
