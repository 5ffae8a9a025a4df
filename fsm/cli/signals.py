"""How the ``fsm`` process ends on a signal: SIGTERM and SIGHUP interrupt like Ctrl-C (a step in
progress is abandoned, its commands' process groups killed, its document untouched, locks
released), and the exit code says which signal it was (130 for Ctrl-C, 143 for SIGTERM, 129 for
SIGHUP: 128 plus the signal's number, as shells report it).

Light on purpose: the console script installs these handlers before it imports the rest of the
command line, so that a signal during start-up (imports take a good part of a short command's
time) is one line too, never a traceback or a silent exit.
"""

from __future__ import annotations

import signal

__all__ = ["catch_signals", "exit_code_of_interrupt"]

_received: list[int] = []
"""The signals that interrupted this process, in order (SIGTERM and SIGHUP; Ctrl-C is Python's
own KeyboardInterrupt and is not recorded)."""


def catch_signals() -> None:
    """Make SIGTERM and SIGHUP raise KeyboardInterrupt, noting which arrived."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def exit_code_of_interrupt() -> int:
    """The exit code of a process a KeyboardInterrupt ends: 128 plus the signal that raised it
    (130 when it was Ctrl-C)."""
    return 128 + (_received[-1] if _received else signal.SIGINT)
