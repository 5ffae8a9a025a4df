"""A worker driving several instances at once (``fsm worker --concurrency K``): K threads of one
process, each a worker loop of its own (:func:`fsm.engine.worker.work`'s claim, drive, report)
with its own stores and kernels, sharing the process's connection pool and lease holder.

Why threads: a step of a worker on PostgreSQL spends most of its time waiting, for its round
trips and for its commit to reach the disk. Threads of one process overlap those waits, and
their commits reach the server together: the server writes and flushes its write-ahead log for
every commit waiting at that moment with one flush (a group commit), so that K instances' steps
share flushes. Each step is still acknowledged only when its own commit has returned, that is
once it is on disk (``synchronous_commit`` stays on for steps): a crash of the worker or the
server loses no step reported done. Each instance keeps its own claim, fencing token and lease
(renewed by the process's holder), so that leases, fencing and a pause seen at the next step
boundary hold as with one instance at a time. The Python of the steps runs one thread at a time;
``--jobs N`` (processes) still spreads the CPU over cores, and both combine (N processes of K).

Signals: the first SIGTERM (or Ctrl-C) lets every step in progress finish, releases the
instances and ends the worker; a second one abandons the steps at once in every thread (a
KeyboardInterrupt raised in each, as in a single worker: their commands are killed and nothing
of them is committed).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsm.engine.driving import Driven
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.store.protocol import Claiming

__all__ = ["in_threads"]

Loop = Callable[..., list["Driven"]]
"""The worker loop (:func:`fsm.engine.worker._loop`): (workspace, machines, options, on_result,
state, wait) -> the instances it drove."""


def in_threads(
    count: int,
    loop: Loop,
    workspace: Workspace,
    machines: list[Machine],
    options: Any,
    on_result: Callable[[Driven], None],
    state: Any,
) -> list[Driven]:
    """Run ``count`` worker loops in threads until they end (told to stop, or drained); return
    every instance driven, in the order they ended."""
    reported = threading.Lock()
    results: list[Driven] = []
    failures: list[BaseException] = []
    listening = threading.Lock()

    def report(driven: Driven) -> None:
        with reported:  # one line at a time, in the order instances end
            results.append(driven)
            on_result(driven)

    def wait(claiming: Claiming, timeout: float) -> None:
        # One thread listens for work at a time (the process has one listening connection);
        # the others wait for it to be done, then look for work themselves.
        if listening.acquire(timeout=timeout):
            try:
                claiming.wait_for_work(timeout)
            finally:
                listening.release()

    def run() -> None:
        try:
            loop(workspace, machines, options, report, state, wait)
        except BaseException as exc:  # the others stop too; the first failure is raised
            failures.append(exc)
            state.stopping.set()

    threads = [
        threading.Thread(target=run, name=f"fsm-worker-{number}", daemon=True)
        for number in range(count)
    ]
    for thread in threads:
        thread.start()
    try:
        _join(threads)
    except KeyboardInterrupt:  # the second signal: abandon every step in progress
        for thread in threads:
            _interrupt(thread)
        _join(threads)
        raise
    interrupted = [exc for exc in failures if isinstance(exc, KeyboardInterrupt)]
    if interrupted:
        raise interrupted[0]
    if failures:
        raise failures[0]
    return results


def _join(threads: list[threading.Thread]) -> None:
    """Wait for every thread, in short waits, so that a signal reaches the main thread."""
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)


def _interrupt(thread: threading.Thread) -> None:
    """Raise KeyboardInterrupt in ``thread`` at its next Python instruction (a thread waiting in
    a system call gets it when the call returns: fsm's waits are short polls)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt)
        )
