"""``fsm`` commands in forked children: real separate processes without an interpreter start-up.

A child runs :func:`fsm.cli.main` exactly as ``python -m fsm`` does, its output going to a file,
and ends with ``os._exit`` so that nothing of the parent (pytest, fixtures) runs in it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fsm.cli import main

__all__ = ["fork_call", "fork_fsm", "wait_child"]


def fork_call(body: Callable[[], int], output: Path) -> int:
    """Run ``body`` in a forked child (stdout and stderr to ``output``); return its pid. The
    child's exit code is what ``body`` returns (1 when it raises)."""
    pid = os.fork()
    if pid:
        return pid
    code = 1  # pragma: no cover - runs in the child
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = sys.stderr = open(1, "w", closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = body()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            print(f"child failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(code)


def fork_fsm(workspace: Path, argv: Sequence[str], output: Path) -> int:
    """``fsm -C workspace <argv>`` in a forked child; return its pid."""
    return fork_call(lambda: main(["-C", str(workspace), "--log-level", "warning", *argv]), output)


def wait_child(pid: int, timeout: float) -> int | None:
    """The exit code of child ``pid`` (``-N`` when killed by signal N), or None when it is still
    running after ``timeout`` seconds."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    if not ready:
        return None
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
