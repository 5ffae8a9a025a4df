"""Commands left running by a run that died without cleaning up (SIGKILL, a machine crash).

Commands run in their own session so that a timeout can kill their whole process group, which
also means nothing stops them when the ``fsm run`` that started them is killed outright. While a
command runs, the executor records it in ``<meta>/running/<pid>.json`` (its process group id,
program and the start time of its leader), and removes the record when the command ends. A run or
step that starts on the instance first *reaps* what is recorded: a process group still alive
whose leader has the recorded start time (so a reused pid is never killed) is killed, and the
fact is logged; records of commands that are gone are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fsm import jsonio
from fsm.errors import FsmError
from fsm.files import open_nofollow, write_all

__all__ = ["forget", "reap", "record"]


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (Linux), or None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def record(folder: Path, pid: int, argv: Sequence[str], root: Path | None = None) -> Path | None:
    """Note that the process group ``pid`` runs the program ``argv[0]``; return the record's
    path. Only the program is kept: the arguments may hold a secret (an agent's token)."""
    path = folder / f"{pid}.json"
    data = {"pgid": pid, "program": argv[0] if argv else "", "start_time": _start_time(pid)}
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=root)
        try:
            write_all(fd, json.dumps(data).encode("utf-8"))
        finally:
            os.close(fd)
    except (OSError, FsmError):
        return None  # bookkeeping must never stop a command from running
    return path


def forget(path: Path | None) -> None:
    """Remove a record once its command has ended."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def reap(folder: Path) -> list[dict[str, Any]]:
    """Kill the recorded process groups that are still alive; return what was killed."""
    killed: list[dict[str, Any]] = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:  # usually: no command was ever recorded
        return killed
    paths = [folder / name for name in names]
    for path in paths:
        try:
            data = jsonio.loads(path.read_bytes())
            pgid = int(data["pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            forget(path)
            continue
        started = data.get("start_time")
        if started is not None and _start_time(pgid) == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed.append(data)
        forget(path)
    return killed
