"""Waiting on events, never on guessed sleeps: conditions polled until a generous deadline."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["DEADLINE", "is_running", "memory_folder", "wait_until"]

DEADLINE = 60.0
"""Seconds a condition may take on a busy machine before the test fails. Conditions that hold
return at once; only a test that is failing anyway waits this long."""


def wait_until(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout:.0f} s")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def is_running(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (a killed process whose parent,
    possibly init, has not collected it yet is dead for every purpose of a test)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    state = stat[stat.rfind(")") + 2 :].split(" ", 1)[0]
    return state not in ("Z", "X")


def memory_folder() -> Iterator[Path]:
    """A fresh folder in memory (``/dev/shm``) where there is one, else on disk: the crash tests
    kill thousands of runs, and on a disk most of their time would go to ``fsync``, which a
    SIGKILL does not need (the page cache survives it). Removed afterwards."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="fsm-guarantee-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
