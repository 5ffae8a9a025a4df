"""Which paths a run writes: ``fsm run`` in a forked child with an audit hook on file writes.

Python raises an audit event for every ``open``, ``mkdir``, rename and copy; the hook records the
paths opened for writing or created, renamed to or copied to, by fsm and the machine's code in
that process. Commands and agents the machine starts are other processes: what they write is
their own business, not recorded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from fsm.cli import main
from tests.guarantees.forked import fork_call

__all__ = ["run_recording_writes", "written_under"]

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = {"os.mkdir": 0, "os.rename": 1, "shutil.copyfile": 1, "shutil.copytree": 1}
"""Audit events that create a path, and the index of that path in their arguments."""


def _written(event: str, args: tuple[Any, ...]) -> str | None:
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int) or path is None:
            return None
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITING
        )
        return os.fsdecode(path) if writing else None
    if event in _EVENTS:
        return os.fsdecode(args[_EVENTS[event]])
    return None


def run_recording_writes(workspace: Path, argv: list[str], log: Path) -> int:
    """Fork ``fsm <argv>`` in ``workspace`` recording every path it writes in ``log`` (one per
    line); return the child's pid."""

    def body() -> int:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

        def hook(event: str, args: tuple[Any, ...]) -> None:
            path = _written(event, args)
            if path is not None:
                os.write(fd, os.fsencode(os.path.abspath(path)) + b"\n")

        sys.addaudithook(hook)
        return main([*argv, "-C", str(workspace), "--log-level", "error"])

    return fork_call(body, log.with_suffix(".out"))


def written_under(log: Path, workspace: Path) -> list[Path]:
    """The paths in ``log`` inside ``workspace``, relative to it; a temporary file counts as
    the file it was renamed to (also recorded)."""
    root = os.path.realpath(workspace)
    found: set[Path] = set()
    for line in log.read_text().splitlines():
        path = os.path.realpath(line)
        if not path.startswith(root + os.sep):
            continue
        relative = Path(path).relative_to(root)
        if relative.name.endswith(".tmp") and relative.name.startswith("."):
            continue
        found.add(relative)
    return sorted(found)
