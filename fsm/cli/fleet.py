"""Driving many instances at once (``fsm run --all``).

Every runnable instance of the given machines in a workspace (created, or running; not paused,
not in a final state) is run as ``fsm run MACHINE ID`` would run it, until it stops, ``jobs``
at a time. Each run holds the instance's own run lock, so a fleet run composes with
``fsm run ID`` elsewhere: an instance whose lock is held is skipped, and said to be.

``jobs`` instances run at a time in as many worker processes (``jobs=1`` runs them one after
the other in the calling process). Processes, not threads: a step is Python work (validation,
JSON, the actions) that one interpreter runs one thread at a time, and processes also keep one
instance's crash or stray module state away from the others. The workers are forked once and
each drives instance after instance, so the machine is imported and the workspace read once,
not once per instance as with one ``fsm run`` process per instance.

The fleet's exit code (:func:`exit_code`) is 0 only when every instance it drove completed;
4 when any ended failed or could not be driven (an error, a missing agent, a store error: the
line of each says which); otherwise 5 when any stopped before a final state (paused, stopped,
waiting for input, the step limit) or was skipped because another run holds it. Failure wins
over stopping: a fleet with one failed and one paused instance exits 4.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from fsm.base.errors import FsmError, LockHeldError
from fsm.engine.driving import FAILED, Driven, end_with_parent, exit_code
from fsm.view.listing import belongs_to
from fsm.view.terminal import one_line

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine

__all__ = ["FAILED", "Driven", "drive_all", "exit_code", "line_of", "runnable_ids"]


def line_of(driven: Driven) -> str:
    """``<machine> <id>: <outcome> in state '<state>' after <n> steps: <reason>``, one line."""
    return one_line(driven.text())


def runnable_ids(workspace: Workspace, machine: Machine) -> list[str]:
    """Ids of ``machine``'s instances in ``workspace`` (whether each is runnable is decided
    when its turn comes, under its run lock's protection: see :func:`_drive`)."""
    store = workspace.store_for(machine)
    return [i for i in store.list_ids() if belongs_to(machine, store.listed(i).creator)]


def drive_all(
    workspace: Workspace,
    machines: list[Machine],
    *,
    jobs: int = 1,
    max_steps: int | None = None,
    on_result: Callable[[Driven], None] | None = None,
) -> list[Driven]:
    """Run every runnable instance of ``machines`` in ``workspace``, ``jobs`` at a time; return
    how each ended, in the order they ended (``on_result`` is told as each one ends)."""
    if jobs < 1:
        raise ValueError("jobs must be 1 or more")
    tasks = [(m, i) for m in machines for i in runnable_ids(workspace, m)]
    results: list[Driven] = []
    _shared.fleet = _Fleet(workspace, {m.name: m for m in machines}, max_steps)
    try:
        for driven in _drive_each(tasks, jobs):
            results.append(driven)
            if on_result is not None:
                on_result(driven)
    finally:
        _shared.fleet = None
    return results


@dataclass(frozen=True)
class _Fleet:
    workspace: Workspace
    machines: dict[str, Machine]
    max_steps: int | None


class _Shared:
    """What the workers drive, set before they are forked (so that each inherits the loaded
    machines and the workspace instead of being sent them with every instance), and whether
    this process is driving an instance right now."""

    fleet: _Fleet | None = None
    parent = 0  # the process that forked the workers
    busy = False
    stopping = False


_shared = _Shared()


def _drive_each(tasks: list[tuple[Machine, str]], jobs: int) -> Iterator[Driven]:
    if jobs == 1 or len(tasks) <= 1:
        for machine, instance_id in tasks:
            driven = _drive(machine.name, instance_id)
            if driven is not None:
                yield driven
        return
    context = multiprocessing.get_context("fork")
    _shared.parent = os.getpid()
    workers = min(jobs, len(tasks))
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_started)
    try:
        futures = {pool.submit(_drive, m.name, i): (m.name, i) for m, i in tasks}
        for future in as_completed(futures):
            try:
                driven = future.result()
            except Exception as exc:  # the worker died (killed, out of memory)
                name, instance_id = futures[future]
                reason = f"its worker process ended abnormally: {type(exc).__name__}: {exc}"
                driven = Driven(name, instance_id, "error", None, 0, reason)
            if driven is not None:
                yield driven
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): each worker abandons the step it is in (its commands'
        # process groups are killed, its locks released) and ends, then the pool goes. The
        # pool's manager thread is waited for: left running, it closes its wake-up pipe while
        # the interpreter's exit writes to it (a traceback after "interrupted", about one
        # interrupted fleet in forty).
        children = multiprocessing.active_children()
        for child in children:
            child.terminate()
        for child in children:
            child.join(timeout=60)
            if child.is_alive():  # a worker stuck past its cleanup: it cannot keep the pool
                child.kill()
                child.join()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()


def _worker_started() -> None:
    """In each worker: Ctrl-C is the parent's to handle (it ends the workers with SIGTERM),
    and SIGTERM abandons the step in progress like an interrupted ``fsm run``.

    A parent killed outright (SIGKILL, out of memory) cannot end its workers: each asks the
    kernel for a SIGTERM when its parent dies (Linux), or else watches for being reparented,
    so that it abandons its step, releases its locks and ends instead of living on alone.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminated)
    end_with_parent(_shared.parent)


def _terminated(signum: int, frame: FrameType | None) -> None:
    _shared.stopping = True
    if _shared.busy:
        raise KeyboardInterrupt  # the run cleans up; the worker then ends (see _drive)
    os._exit(130)  # idle between instances: nothing to clean up


def _drive(machine_name: str, instance_id: str) -> Driven | None:
    """Run one instance as ``fsm run`` would; None when it is not runnable (paused, final)."""
    from fsm.engine.engine import Engine
    from fsm.engine.rules import runnable

    fleet = _shared.fleet
    assert fleet is not None
    machine = fleet.machines[machine_name]
    if _shared.stopping:
        os._exit(130)  # terminated: no new instance is started
    _shared.busy = True
    try:
        instance = fleet.workspace.instance(machine, instance_id)
        loaded = instance.load()
        if not runnable(machine, loaded.state, loaded.status):
            return None
        result = Engine(instance).run(max_steps=fleet.max_steps, actor="run-all")
        return Driven(
            machine.name,
            instance_id,
            result.outcome,
            result.state,
            len(result.steps),
            result.message,
        )
    except LockHeldError:
        reason = "another run holds its lock (it is being run elsewhere)"
        return Driven(machine.name, instance_id, "skipped", None, 0, reason)
    except FsmError as exc:
        return Driven(machine.name, instance_id, "error", None, 0, str(exc))
    except Exception as exc:  # a bug in a machine or in fsm: this instance's error only
        if os.environ.get("FSM_DEBUG"):
            traceback.print_exc()
        reason = f"internal error: {type(exc).__name__}: {exc} (set FSM_DEBUG=1 for the traceback)"
        return Driven(machine.name, instance_id, "error", None, 0, reason)
    finally:
        _shared.busy = False
        if _shared.stopping:
            # The interrupted run has released its locks; nothing is left for this worker.
            os._exit(130)
