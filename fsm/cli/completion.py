"""Shell completion of ``fsm`` (bash and zsh) by `argcomplete
<https://kislyuk.github.io/argcomplete/>`_: command names and options from the command table,
machine names from the registered machines (the workspace's ``[machines]`` included), instance
ids from the workspace's instances of the machine already typed.

``fsm completion bash`` (or ``zsh``) prints the shell code to ``eval`` once per shell. When the
shell asks for completions it runs ``fsm`` with ``_ARGCOMPLETE`` set: :func:`complete_if_asked`
then builds the whole parser (a normal start builds only the command's), answers, and exits;
argcomplete is imported only then and by ``fsm completion``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from fsm.view.terminal import out

__all__ = ["cmd_completion", "complete_if_asked"]


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit, when this process is one."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    for action in _positionals(parser):
        if action.dest == "machine":
            action.completer = _machines  # type: ignore[attr-defined]
        elif action.dest == "id":
            action.completer = _instance_ids  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser)


def cmd_completion(args: argparse.Namespace, values: dict[str, Any]) -> int:
    """Print the shell code that makes the shell complete ``fsm`` commands."""
    from argcomplete.shell_integration import shellcode

    out(shellcode(["fsm"], shell=args.shell).rstrip("\n"))
    return 0


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found: list[argparse.Action] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _positionals(sub)
        elif not action.option_strings:
            found.append(action)
    return found


def _machines(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The registered machines' names (the workspace's own included)."""
    from fsm.model.discovery import registered_machines, use_workspace

    use_workspace(_workspace(parsed_args))
    return [name for name in sorted(registered_machines()) if name.startswith(prefix)]


def _instance_ids(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The ids of the typed machine's instances in the workspace (none when the machine does
    not load: completion never prints an error)."""
    from fsm.base.errors import FsmError
    from fsm.engine.instance import Workspace
    from fsm.model.discovery import use_workspace

    workspace = _workspace(parsed_args)
    use_workspace(workspace)
    try:
        space = Workspace(workspace)
        machine = space.machine(parsed_args.machine)
        ids = space.store_for(machine).list_ids()
    except (FsmError, OSError, AttributeError):
        return []
    return sorted(i for i in ids if i.startswith(prefix))


def _workspace(parsed_args: argparse.Namespace) -> Path:
    return Path(getattr(parsed_args, "workspace", None) or ".")
