"""``fsm serve --drive``: the server drives the runnable instances of the machines it shows.

What a driven instance is, is ``fsm run --all``'s rule: not in a final state, and running or
created and waiting for a run to start it (not paused, not stopped). The server looks at every
instance when it starts, and at each instance the change feed (:mod:`fsm.serve.watch`) says
changed, whoever changed it: a Start or Resume from the page, ``fsm new`` or ``fsm resume`` in a
terminal, the CCW dashboard. An instance another run drives (its heartbeat is alive) is left
to that run.

Each runnable instance is driven by ``fsm run MACHINE ID --actor serve`` in a process of its
own, ``workers`` at a time: the run is exactly the command's (preflight, run lock, heartbeat,
the handling of a pause from anywhere, exit codes), its steps' Python work never slows the
pages, and a run that crashes takes nothing else with it. Its heartbeat names ``serve`` as the
driver, which is what the instance page shows. A process start (a fraction of a second) is
paid per run, not per step: driving thousands of instances in bulk is ``fsm run --all``'s work.

Each run's result line is printed by the server (``fsm serve: drove counter c1: completed in
state 'done' after 3 steps``). A run that ends with its instance still runnable (waiting for an
event a person fires, an error, the step limit) is not started again until the instance
changes, or :data:`RETRY_AFTER` seconds have passed (``fsm worker``'s rule), so the server never
spins on it.

When the server stops (Ctrl-C, SIGTERM), its runs are interrupted as ``fsm run`` is by Ctrl-C:
the step under way is abandoned (its commands killed, nothing of it committed), the locks
released. The runs are started in sessions of their own (a Ctrl-C in the server's terminal is
the server's to forward) and, on Linux, asked to end with the server if it is killed outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

import structlog

from fsm.base.errors import FsmError
from fsm.engine.control import ControlPlane
from fsm.serve.views import Served
from fsm.serve.watch import Change, ChangeFeed
from fsm.store.heartbeat import heartbeats_of
from fsm.view.listing import belongs_to
from fsm.view.terminal import one_line

__all__ = ["ACTOR", "RETRY_AFTER", "Driver"]

ACTOR = "serve"
"""The actor of the runs the server drives (in the journal and in their heartbeats)."""
RETRY_AFTER = 60.0
"""Seconds before an instance whose run ended with it still runnable is started again, unless
it changed meanwhile."""
STOP_WAIT = 20.0
"""Seconds a run is given to end once interrupted (its commands killed, its locks released)
before it is killed."""
STILL_RUNNABLE = frozenset({"waiting", "limit", "error"})
"""Outcomes of a run that leave its instance runnable."""

Key = tuple[str, str]
"""(machine, instance id)."""

_LAUNCH = """\
import ctypes, os, signal, sys
parent = int(sys.argv[1])
if sys.platform.startswith("linux"):
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
if os.getppid() != parent:
    sys.exit(130)
os.execv(sys.executable, [sys.executable, "-m", "fsm", *sys.argv[2:]])
"""
"""Started as ``python -c``: asks Linux to end the run when the server dies (the request
outlives the exec), then becomes ``fsm``. A program of its own, not a ``preexec_fn``, which is
unsafe in a process with threads."""

log = structlog.get_logger("fsm.serve")


@dataclass
class _Run:
    """One instance's run in progress."""

    key: Key
    process: asyncio.subprocess.Process
    task: asyncio.Task[None] | None = None


@dataclass
class Driver:
    """Drives the runnable instances of ``served``, ``workers`` at a time (see the module
    docstring); :meth:`run` until its ``stop`` is set, then the runs are interrupted."""

    served: Served
    feed: ChangeFeed
    workers: int
    out: TextIO = field(default_factory=lambda: sys.stdout)
    argv: Callable[[Key], list[str]] | None = None
    """The command driving an instance (default: ``fsm -C WORKSPACE run SOURCE ID -q --actor
    serve``, through the launcher); tests give their own."""
    retry_after: float = RETRY_AFTER
    pending: dict[Key, None] = field(default_factory=dict)
    """Instances to look at, in the order they were seen."""
    running: dict[Key, _Run] = field(default_factory=dict)
    skipped: dict[Key, tuple[Any, float]] = field(default_factory=dict)
    """Instances not to start again for now: what they were then (:meth:`_mark`), and until
    when (monotonic)."""
    looked: int = 0
    """How many times an instance was looked at (what a test waits on)."""
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop: asyncio.Event) -> None:
        """Drive until ``stop`` is set; then interrupt the runs and wait for them to end."""
        changes = self.feed.subscribe()
        try:
            self._look_at_everything()
            while not stop.is_set():
                await self._start_runnable(stop)
                await self._wait(changes, stop)
        finally:
            self.feed.unsubscribe(changes)
            await self.close()

    async def _wait(self, changes: asyncio.Queue[Change | None], stop: asyncio.Event) -> None:
        """Until something changed, a run ended, a skipped instance is due, or ``stop``."""
        waits: list[asyncio.Task[Any]] = [
            asyncio.create_task(changes.get()),
            asyncio.create_task(self._wake.wait()),
            asyncio.create_task(stop.wait()),
        ]
        try:
            done, _ = await asyncio.wait(
                waits, timeout=self._next_due(), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        self._wake.clear()
        if waits[0] in done and not waits[0].cancelled():
            self._changed(waits[0].result())
        while not changes.empty():
            self._changed(changes.get_nowait())
        now = time.monotonic()
        for key, (_, until) in list(self.skipped.items()):
            if until <= now:
                self.pending.setdefault(key)

    def _next_due(self) -> float | None:
        if not self.skipped:
            return None
        soonest = min(until for _, until in self.skipped.values())
        return max(0.0, soonest - time.monotonic())

    def _changed(self, change: Change | None) -> None:
        if change is None:  # the server is stopping
            return
        if change.everything:
            self._look_at_everything()
        elif change.machine in self.served.machines and change.id is not None:
            self.pending.setdefault((change.machine, change.id))

    def _look_at_everything(self) -> None:
        for name, machine in self.served.machines.items():
            try:
                ids = self.served.workspace.store_for(machine).list_ids()
            except FsmError as exc:
                log.warning("drive_skipped", machine=name, error=str(exc))
                continue
            for instance_id in ids:
                self.pending.setdefault((name, instance_id))

    async def _start_runnable(self, stop: asyncio.Event) -> None:
        while self.pending and len(self.running) < self.workers and not stop.is_set():
            key = next(iter(self.pending))
            del self.pending[key]
            if key in self.running:
                continue
            runnable = await asyncio.to_thread(self._runnable, key)
            self.looked += 1
            if runnable:
                await self._start(key)

    def _runnable(self, key: Key) -> bool:
        """Whether the server should drive the instance now (read in a thread: it reads the
        document)."""
        name, instance_id = key
        machine = self.served.machines[name]
        try:
            store = self.served.workspace.store_for(machine)
            skipped = self.skipped.get(key)
            if skipped is not None:
                mark, until = skipped
                if time.monotonic() < until and self._mark(key) == mark:
                    return False
                del self.skipped[key]
            if not belongs_to(machine, store.listed(instance_id).creator):
                return False
            instance = self.served.workspace.instance(machine, instance_id)
            loaded = instance.load()
            control = ControlPlane(instance)
            if machine.is_final(loaded.state) or not (
                control.is_active(loaded) or control.needs_start(loaded)
            ):
                return False
            beat = heartbeats_of(store).read(instance_id)
        except (FsmError, OSError):
            return False  # unreadable, invalid, gone: nothing to drive
        return beat is None or not beat.alive()

    def _mark(self, key: Key) -> tuple[str, Any]:
        """What tells whether an instance changed: its document's bytes (their hash) and its
        journal's last record. (A store's stamp is not used: the file store gives none for
        files changed within the last two seconds, exactly when a run just ended.)"""
        name, instance_id = key
        instance = self.served.workspace.instance(self.served.machines[name], instance_id)
        raw = instance.store.listed(instance_id).raw
        last = next(iter(instance.journal.backwards()), None)
        return hashlib.sha256(raw or b"").hexdigest(), last

    def _command(self, key: Key) -> list[str]:
        if self.argv is not None:
            return self.argv(key)
        name, instance_id = key
        source = self.served.sources.get(name, name)
        fsm = ["-C", str(self.served.workspace.path), "run", source, instance_id]
        return [sys.executable, "-c", _LAUNCH, str(os.getpid()), *fsm, "-q", "--actor", ACTOR]

    async def _start(self, key: Key) -> None:
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command(key),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self._say(key, f"could not be driven: {exc}")
            return
        run = _Run(key, process)
        self.running[key] = run
        run.task = asyncio.create_task(self._follow(run))

    async def _follow(self, run: _Run) -> None:
        """Wait for the run to end; say how it ended; decide when to look at it again."""
        out, err = await run.process.communicate()
        code = run.process.returncode
        instance_id = run.key[1]
        result = _last_line(out)
        problem = _last_line(err)
        outcome = _outcome(result, instance_id)
        if result:
            self._say(run.key, f"drove it: {result.removeprefix(f'{instance_id}: ')}")
        elif problem:
            self._say(run.key, f"not driven: {problem.removeprefix('fsm: error: ')}")
        elif code:
            self._say(run.key, f"its run ended with exit code {code}")
        if outcome is None or outcome in STILL_RUNNABLE:
            # Still runnable, or it could not run: not again until it changes, or for a while.
            # (Noted before the run is forgotten: a change told meanwhile must find it skipped.)
            try:
                mark = await asyncio.to_thread(self._mark, run.key)
            except (FsmError, OSError):
                mark = ("", None)
            self.skipped[run.key] = (mark, time.monotonic() + self.retry_after)
        else:
            # Paused, stopped or ended: runnable again only if changed since (a Resume just
            # after the run saw the pause is not lost).
            self.pending.setdefault(run.key)
        del self.running[run.key]
        self._wake.set()

    def _say(self, key: Key, text: str) -> None:
        machine, instance_id = key
        print(one_line(f"fsm serve: {machine} {instance_id}: {text}"), file=self.out, flush=True)

    async def close(self) -> None:
        """Interrupt every run (as Ctrl-C interrupts ``fsm run``) and wait for them to end."""
        runs = list(self.running.values())
        for run in runs:
            _signal(run.process, signal.SIGTERM)
        tasks = [run.task for run in runs if run.task is not None]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=STOP_WAIT)
        for run in runs:
            if run.process.returncode is None:
                _signal(run.process, signal.SIGKILL)
        if late:
            await asyncio.gather(*late, return_exceptions=True)


def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signum)


def _last_line(data: bytes) -> str:
    lines: Iterable[str] = data.decode(errors="replace").strip().splitlines()
    found = [line for line in lines if line.strip()]
    return found[-1] if found else ""


def _outcome(result: str, instance_id: str) -> str | None:
    """The run's outcome from its result line (``<id>: <outcome> in state ...``), or None."""
    prefix = f"{instance_id}: "
    if not result.startswith(prefix):
        return None
    words = result[len(prefix) :].split(" ", 1)
    return words[0] or None
