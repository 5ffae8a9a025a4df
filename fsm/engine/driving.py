"""What driving many instances shares (``fsm run --all``, ``fsm worker``, ``fsm ls``): how the
run of one instance ended, the exit code of many, forked workers that end with their parent,
and which instances are a machine's (a light module: ``fsm ls`` imports it).

The exit code of many (:func:`exit_code`) is 0 only when every instance driven completed; 4 when
any ended failed or could not be driven; otherwise 5 (one stopped before a final state, or was
skipped because another run holds it). Failure wins over stopping.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsm.model.machine import Machine

__all__ = ["FAILED", "Driven", "belongs_to", "end_with_parent", "exit_code"]

_PR_SET_PDEATHSIG = 1  # prctl(2)

FAILED = frozenset({"failed", "error"})
"""Outcomes of instances that did not get done and need attention (exit 4)."""


@dataclass(frozen=True)
class Driven:
    """How the run of one instance of a fleet ended (``outcome`` is a run's outcome, or
    ``skipped`` when another run holds the instance, ``released`` when a worker told to stop
    let it go, or ``error`` when it could not run)."""

    machine: str
    id: str
    outcome: str
    state: str | None
    steps: int
    reason: str

    def text(self) -> str:
        """``<machine> <id>: <outcome> in state '<state>' after <n> steps: <reason>`` (as it is:
        the command line prints it escaped to one line)."""
        where = f" in state '{self.state}' after {self.steps} steps" if self.state else ""
        return f"{self.machine} {self.id}: {self.outcome}{where}: {self.reason}"


def exit_code(results: list[Driven]) -> int:
    """0 when every instance completed, 4 when any failed, else 5 (``fsm run --all``, ``fsm
    worker --drain``)."""
    outcomes = {result.outcome for result in results}
    if outcomes & FAILED:
        return 4
    return 0 if outcomes <= {"completed"} else 5


def end_with_parent(parent: int) -> None:
    """In a forked worker process: be sent SIGTERM when ``parent`` dies (Linux), or else watch
    for being reparented, so that a parent killed outright (SIGKILL, out of memory) never
    leaves its workers running alone: each abandons its step, releases its locks and ends."""
    if not _end_with_parent():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def _end_with_parent() -> bool:
    """Ask Linux to send this process SIGTERM when its parent dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def belongs_to(machine: Machine, creator: str | None) -> bool:
    """False when the journal's first record says another machine (``creator``) created the
    instance.

    Machines may share a storage layout (issue-manager and skill-tuning both keep
    ``.workflow/.scratchpad/{id}/state.json``); documents written by other programs (the CCW
    dashboard) have no journal yet and are listed.
    """
    return creator is None or creator == machine.name
