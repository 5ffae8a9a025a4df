"""Commands left running by a run that died without cleaning up (SIGKILL, a machine crash).

Commands run in a session of their own so that a timeout can kill their whole tree (see
:mod:`fsm.process.proctree`), which also means nothing stops them when the ``fsm run`` that started
them is killed outright. While a command runs, the executor records it in
``<meta>/running/<pid>.json``: its session and process group id, its program, the start time of its
leader, and every process of its tree found so far with its start time (updated as the tree grows,
so a child that left the session is recorded too). The record is removed when the command ends. A
run or step that starts on the instance first *reaps* what is recorded: the process group and the
session's members, when the leader is the recorded process or gone (a session id is not reused while
the session has members), and each recorded process whose start time matches (so a reused pid is
never killed); the fact is logged, and records of commands that are gone are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fsm.base import jsonio
from fsm.base.errors import FsmError
from fsm.base.files import open_nofollow, write_all
from fsm.process.proctree import ProcessTree, start_time

__all__ = ["forget", "reap", "record", "update"]

_roots: dict[Path, Path | None] = {}
"""The workspace each live record was written under (its updates are confined the same way)."""


def record(folder: Path, pid: int, argv: Sequence[str], root: Path | None = None) -> Path | None:
    """Note that the process group ``pid`` runs the program ``argv[0]``; return the record's
    path. Only the program is kept: the arguments may hold a secret (an agent's token)."""
    path = folder / f"{pid}.json"
    data = {"pgid": pid, "program": argv[0] if argv else "", "start_time": start_time(pid)}
    if not _write(path, data, root):
        return None  # bookkeeping must never stop a command from running
    _roots[path] = root
    return path


def update(path: Path | None, members: Mapping[int, str]) -> None:
    """Record the processes of the command's tree (pid -> start time) in its record."""
    if path is None or path not in _roots:
        return
    try:
        data = jsonio.loads(path.read_bytes())
    except (OSError, ValueError):
        return
    data["members"] = sorted([pid, started] for pid, started in members.items())
    _write(path, data, _roots[path])


def _write(path: Path, data: dict[str, Any], root: Path | None) -> bool:
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=root)
        try:
            write_all(fd, json.dumps(data).encode("utf-8"))
        finally:
            os.close(fd)
    except (OSError, FsmError):
        return False
    return True


def forget(path: Path | None) -> None:
    """Remove a record once its command has ended."""
    if path is not None:
        _roots.pop(path, None)
        with contextlib.suppress(OSError):
            path.unlink()


def reap(folder: Path) -> list[dict[str, Any]]:
    """Kill what is still alive of the recorded commands; return the records of those killed."""
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
            members = {int(pid): str(started) for pid, started in data.get("members") or []}
        except (OSError, ValueError, KeyError, TypeError):
            forget(path)
            continue
        started = data.get("start_time")
        leader = start_time(pgid)
        if leader is not None and leader != started:
            # the pid (and so the session id) belongs to another program now: only the
            # recorded processes that are still the same are the command's
            members.pop(pgid, None)
            tree = ProcessTree(None, members)
        else:
            tree = ProcessTree(pgid, members)
        if tree.kill() or (leader is not None and leader == started):
            killed.append(data)
        forget(path)
    return killed
