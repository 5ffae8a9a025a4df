"""Workers (``fsm worker``): long-running processes that claim runnable instances and drive
each to a stop, on any number of hosts sharing one store.

A worker serves some machines (default: every registered one) and some queues (default: its
workspace's space, see :attr:`fsm.store.protocol.Layout.space`; instances of machines that need no
workspace have no queue and are served by every worker of the space). It loops:

1. claim a runnable instance (the rule of ``fsm run --all``: not in a final state; running, or
   created and waiting for a run to start it) that no live run holds, through the store's
   :class:`fsm.store.protocol.Claiming` primitive (the PostgreSQL store: ``FOR UPDATE SKIP LOCKED``,
   so that workers never wait for each other and never claim one instance twice); a store
   without one is scanned as ``fsm run --all`` scans it, each candidate taken with the store's
   run lease (the file store: one host's workers over its files);
2. drive it as ``fsm run`` would, with the claim as the run's lease: every commit is fenced by
   it, the document is read again at every step boundary (a pause, stop or edit from anywhere
   is seen there), and the commands its steps run are killed if the store says the lease was
   lost (the holder stopped renewing it in time: the process was stopped, cut off);
3. print one line per instance driven (as ``fsm run --all`` does), and take the next one; with
   nothing to claim, wait for the store to say something may have become claimable (or a
   short while: a claim whose holder died frees itself only by expiring).

An instance whose run ended without stopping it (it waits for an event only a person fires,
it failed in a way that leaves it running, it reached ``--max-steps``) is not claimed again by
the same worker until it changes or :data:`RETRY_AFTER` seconds have passed, so that a worker
never spins on it.

SIGTERM (or Ctrl-C) lets the steps in progress finish, releases their instances (another
worker continues them) and ends the worker with exit 0; a second one abandons the steps at
once (their commands are killed, nothing of them is committed) as an interrupted ``fsm run``
does. ``--jobs N`` drives N instances at a time in N processes, each a worker of its own with its
own lease (one process stopped is one worker's instances taken over, not N). ``--concurrency K``
drives K instances at a time in each process, on threads whose steps share the server's flushes
(:mod:`fsm.engine.concurrent`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from fsm.base.clock import SystemClock
from fsm.base.errors import CorruptDocumentError, FsmError, LockHeldError
from fsm.base.ids import validate_id
from fsm.engine.driving import Driven, belongs_to, end_with_parent
from fsm.engine.rules import DocumentRules, runnable
from fsm.store.protocol import Claim, Claiming, Lease, Store

if TYPE_CHECKING:
    from pydantic import BaseModel

    from fsm.engine.engine import Kernel
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine
    from fsm.model.outcome import StepResult

__all__ = ["MAX_CONCURRENCY", "RETRY_AFTER", "WorkerOptions", "work"]

RETRY_AFTER = 60.0
"""Seconds before a worker claims again an instance whose run ended without stopping it,
unless it changed meanwhile."""
MAX_CONCURRENCY = 64
"""Instances one worker process drives at a time at most (each holds a connection)."""
IDLE_WAIT = 2.0
"""Seconds an idle worker waits for a notification before it looks again."""


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs (the options of ``fsm worker``)."""

    queues: Sequence[str] | None = None
    """The queues served (None: the workspace's space)."""
    jobs: int = 1
    concurrency: int = 1
    """Instances each process drives at a time (threads: see :mod:`fsm.engine.concurrent`)."""
    max_steps: int | None = None
    drain: bool = False
    """Return once nothing is left to claim, instead of waiting for more."""
    idle_wait: float = IDLE_WAIT
    retry_after: float = RETRY_AFTER


class _Stop(Exception):
    """Raised at a step boundary of a worker told to stop: the run ends, its lease released."""


@dataclass
class _State:
    """What a worker process knows of itself."""

    stopping: threading.Event = field(default_factory=threading.Event)
    signals: int = 0
    busy: bool = False
    threaded: bool = False
    """Instances are driven on threads: a second signal always abandons their steps."""


class _Scan:
    """Claims for a store without the :class:`~fsm.store.protocol.Claiming` primitive: its instances
    are scanned as ``fsm run --all`` scans them, each runnable one taken with the store's run
    lease (refused while another run holds it)."""

    def __init__(self, store: Store, machine: Machine, default_queue: str | None) -> None:
        self.store = store
        self.machine = machine
        self.default_queue = default_queue
        self.rules = DocumentRules(machine, SystemClock(), where="")

    def claim(self, queues: Sequence[str] | None, skip: Collection[str] = ()) -> Claim | None:
        for instance_id in self.store.list_ids():
            if instance_id in skip or not self._wanted(instance_id, queues):
                continue
            try:
                lease = self.store.lease(instance_id)
            except LockHeldError:
                continue
            return _ScanClaim(lease, instance_id)
        return None

    def _wanted(self, instance_id: str, queues: Sequence[str] | None) -> bool:
        listed = self.store.listed(instance_id)
        if listed.raw is None or not belongs_to(self.machine, listed.creator):
            return False
        try:
            loaded = self.rules.loaded_from(listed.raw)
        except FsmError:
            return False
        if not runnable(self.machine, loaded.state, loaded.status):
            return False
        if queues is None:
            return True
        queue = self._queue(instance_id)
        return queue is None or queue in queues

    def _queue(self, instance_id: str) -> str | None:
        from fsm.engine.instance import QUEUE

        for _, record in self.store.journal(instance_id).entries():
            named = getattr(record, "extra", {}).get(QUEUE) if record is not None else None
            return named if isinstance(named, str) else self.default_queue
        return self.default_queue

    def wait_for_work(self, timeout: float) -> None:
        time.sleep(timeout)


class _ScanClaim:
    """A run lease taken by :class:`_Scan`, with the instance it is on (its document is read by
    the run)."""

    raw: bytes | None = None

    def __init__(self, lease: Lease, instance_id: str) -> None:
        self._lease = lease
        self.instance_id = instance_id
        self.token = lease.token

    def held(self) -> bool:
        return self._lease.held()

    def release(self) -> None:
        self._lease.release()

    def watch(self, lost: Callable[[], None]) -> None:
        self._lease.watch(lost)


@dataclass
class _Source:
    """One machine's instances, as a worker claims them: the machine's options, store and
    kernel, made once and used for every instance the worker drives (its connections, prepared
    statements and what it knows of the documents are kept from one instance to the next)."""

    machine: Machine
    options: BaseModel
    store: Store
    claiming: Claiming
    kernel: Kernel
    skipped: dict[str, tuple[Any, float]] = field(default_factory=dict)
    """Instances not to claim again for now: their stamp then, and until when."""

    def skip(self) -> list[str]:
        """The ids to leave alone now (those that changed, or waited long enough, are not)."""
        now = time.monotonic()
        for instance_id, (stamp, until) in list(self.skipped.items()):
            if now >= until or self.store.stamp(instance_id) != stamp:
                del self.skipped[instance_id]
        return list(self.skipped)


def work(
    workspace: Workspace,
    machines: list[Machine],
    options: WorkerOptions,
    on_result: Callable[[Driven], None],
) -> list[Driven]:
    """Run a worker (``options.jobs`` of them in as many processes) until it is told to stop
    (SIGTERM, Ctrl-C) or, with ``drain``, until nothing is left to claim; return how each
    instance driven ended, in order (``on_result`` is told as each ends)."""
    if options.jobs < 1:
        raise ValueError("jobs must be 1 or more")
    if options.concurrency < 1:
        raise ValueError("concurrency must be 1 or more")
    if options.jobs == 1:
        state = _State()
        with _stop_on_signals(state):
            return _one_process(workspace, machines, options, on_result, state)
    return _in_processes(workspace, machines, options, on_result)


def _one_process(
    workspace: Workspace,
    machines: list[Machine],
    options: WorkerOptions,
    on_result: Callable[[Driven], None],
    state: _State,
) -> list[Driven]:
    """This process's worker: one loop, or ``options.concurrency`` of them on threads."""
    if options.concurrency == 1:
        return _loop(workspace, machines, options, on_result, state)
    from fsm.engine.concurrent import in_threads

    state.threaded = True
    return in_threads(options.concurrency, _loop, workspace, machines, options, on_result, state)


def _sources(workspace: Workspace, machines: list[Machine], concurrency: int = 1) -> list[_Source]:
    from fsm.engine.engine import Kernel

    found = []
    for machine in machines:
        options = workspace.options_for(machine)
        store = workspace.store_for(machine, options)
        reserve = getattr(store, "reserve", None)
        if reserve is not None:  # a store with a connection pool: one connection per thread
            reserve(concurrency)
        claiming: Claiming
        if isinstance(store, Claiming):
            claiming = store
        else:
            claiming = _Scan(store, machine, workspace.layout_for(machine, options).queue)
        found.append(_Source(machine, options, store, claiming, Kernel(machine)))
    return found


def _loop(
    workspace: Workspace,
    machines: list[Machine],
    options: WorkerOptions,
    on_result: Callable[[Driven], None],
    state: _State,
    wait: Callable[[Claiming, float], None] | None = None,
) -> list[Driven]:
    """One worker: claim, drive, report, until told to stop (or drained); ``wait`` waits for
    work when nothing is claimable (default: the store's own wait)."""
    sources = _sources(workspace, machines, options.concurrency)
    queues = list(options.queues) if options.queues is not None else [workspace.space]
    results: list[Driven] = []
    while not state.stopping.is_set():
        claimed = False
        for source in sources:
            if state.stopping.is_set():
                break
            claim = source.claiming.claim(queues, source.skip())
            if claim is None:
                continue
            claimed = True
            driven = _drive(workspace, source, claim, options, state)
            if driven is not None:
                results.append(driven)
                on_result(driven)
        if not claimed:
            if options.drain:
                break
            if wait is None:
                sources[0].claiming.wait_for_work(options.idle_wait)
            else:
                wait(sources[0].claiming, options.idle_wait)
    return results


def _drive(
    workspace: Workspace,
    source: _Source,
    claim: Claim,
    options: WorkerOptions,
    state: _State,
) -> Driven | None:
    """Drive the claimed instance as ``fsm run`` would; None when it turned out not to be
    runnable (its claim is released)."""
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Instance

    machine = source.machine
    instance_id = claim.instance_id
    steps = 0

    def boundary(step: StepResult) -> None:
        nonlocal steps
        steps += 1
        if state.stopping.is_set():
            raise _Stop

    state.busy = True
    try:
        instance = Instance(
            workspace, machine, validate_id(instance_id), store=source.store, options=source.options
        )
        # The document the claim read in its own statement is the run's first read.
        try:
            loaded = instance.take_claimed(claim.raw) if claim.raw is not None else instance.load()
        except CorruptDocumentError:
            # Perhaps in a state of an earlier version: the run migrates it first, or refuses
            # it naming the versions (or finds it corrupt, as this read did).
            loaded = None
        if loaded is not None and not runnable(machine, loaded.state, loaded.status):
            # Its row said runnable, its document says not (another program wrote it, a
            # pause by SQL): not claimed again until it changes, or for a while.
            claim.release()
            with contextlib.suppress(FsmError):
                stamp = source.store.stamp(instance_id)
                source.skipped[instance_id] = (stamp, time.monotonic() + options.retry_after)
            return None
        engine = Engine(instance, lease=claim, kernel=source.kernel)
        result = engine.run(max_steps=options.max_steps, actor="worker", on_step=boundary)
        driven = Driven(
            machine.name,
            instance_id,
            result.outcome,
            result.state,
            len(result.steps),
            result.message,
        )
    except _Stop:
        reason = "the worker was told to stop: released for another worker to continue"
        driven = Driven(machine.name, instance_id, "released", None, steps, reason)
    except LockHeldError as exc:
        driven = Driven(machine.name, instance_id, "error", None, steps, str(exc))
    except FsmError as exc:
        driven = Driven(machine.name, instance_id, "error", None, steps, str(exc))
    except KeyboardInterrupt:
        claim.release()
        raise
    except Exception as exc:  # a bug in a machine or in fsm: this instance's error only
        if os.environ.get("FSM_DEBUG"):
            traceback.print_exc()
        reason = f"internal error: {type(exc).__name__}: {exc} (set FSM_DEBUG=1 for the traceback)"
        driven = Driven(machine.name, instance_id, "error", None, steps, reason)
    finally:
        state.busy = False
        claim.release()  # nothing when the run released it already
    if driven.outcome in {"error", "waiting", "limit"}:
        # Still runnable: not this worker's again until it changes, or for a while.
        with contextlib.suppress(FsmError):
            stamp = source.store.stamp(instance_id)
            source.skipped[instance_id] = (stamp, time.monotonic() + options.retry_after)
    return driven


@contextlib.contextmanager
def _stop_on_signals(
    state: _State, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
) -> Any:
    """SIGTERM, SIGINT and SIGHUP: the first lets the steps in progress finish and stops the
    worker, the second abandons them (KeyboardInterrupt)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        state.signals += 1
        state.stopping.set()
        if state.signals > 1 and (state.busy or state.threaded):
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _in_processes(
    workspace: Workspace,
    machines: list[Machine],
    options: WorkerOptions,
    on_result: Callable[[Driven], None],
) -> list[Driven]:
    """``options.jobs`` workers in forked processes; their lines come back through a queue."""
    context = multiprocessing.get_context("fork")
    results: Any = context.SimpleQueue()
    single = dataclasses.replace(options, jobs=1)
    parent = os.getpid()

    def child() -> None:
        end_with_parent(parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to forward
        state = _State()
        code = 0
        try:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the parent's, as Ctrl-C is
            with _stop_on_signals(state, (signal.SIGTERM,)):
                _one_process(workspace, machines, single, results.put, state)
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            _close_stores()
            results.put(None)
        sys.stdout.flush()
        os._exit(code)

    processes = [context.Process(target=child) for _ in range(options.jobs)]
    for process in processes:
        process.start()
    state = _State()

    def forward(signum: int, frame: FrameType | None) -> None:
        state.signals += 1
        state.stopping.set()
        for process in processes:
            if process.pid is not None and process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)

    forwarded = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    before = {sig: signal.signal(sig, forward) for sig in forwarded}
    collected: list[Driven] = []
    done: set[int] = set()
    try:
        while True:
            item = results.get() if not results.empty() else _NOTHING
            if item is None:
                continue  # a worker ended (it is joined below)
            if isinstance(item, Driven):
                collected.append(item)
                on_result(item)
                continue
            for number, process in enumerate(processes):
                if number in done or process.is_alive():
                    continue
                process.join()
                if process.exitcode != 0 and not state.stopping.is_set() and not options.drain:
                    # Killed (out of memory, by hand): a new worker takes its place; its
                    # instances are taken over when their lease expires.
                    processes[number] = context.Process(target=child)
                    processes[number].start()
                else:
                    done.add(number)
            if len(done) == len(processes) and results.empty():
                break
            time.sleep(0.05)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for process in processes:
            process.join()
    return collected


_NOTHING = object()


def _close_stores() -> None:
    """End this process's hold on its stores (a database's lease holder: its claims are free at
    once), if it opened any."""
    database = sys.modules.get("fsm.postgres.database")
    if database is not None:
        with contextlib.suppress(Exception):
            database.close_all()
