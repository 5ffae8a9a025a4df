"""The change feed: which instances changed on disk, told to every open page.

A file watcher (watchfiles: inotify on Linux, no polling) follows the folders that the served
machines keep their instances in, whoever writes there (``fsm run`` in a terminal, the CCW
dashboard, another ``fsm serve``). Each changed path is matched against the document and journal
paths of each machine, with the id in its place, and the instance it belongs to is published to
every subscriber (one queue per open event stream). A folder that does not exist yet is awaited
by watching its nearest existing parent without recursion; when it appears the watch starts
over and the subscribers are told to reload everything (:attr:`Change.everything`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from watchfiles import awatch

from fsm.errors import FsmError
from fsm.instance import Workspace
from fsm.machine import Machine

__all__ = ["Change", "ChangeFeed", "Location", "locations_of"]

MARK = "fsmservemark0"
"""A valid instance id standing for every id while the paths of a machine are resolved."""
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
QUEUE_SIZE = 256
RETRY_SECONDS = 1.0

log = structlog.get_logger("fsm.serve")


@dataclass(frozen=True)
class Change:
    """An instance whose document or journal changed; no machine means "reload everything"."""

    machine: str | None = None
    id: str | None = None

    @property
    def everything(self) -> bool:
        """True when subscribers should reload all they show."""
        return self.machine is None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"machine": self.machine, "id": self.id}


@dataclass(frozen=True)
class Location:
    """Where one machine keeps one kind of instance file (document or journal)."""

    machine: str
    pattern: re.Pattern[str]
    root: Path


def locations_of(workspace: Workspace, machines: Iterable[Machine]) -> list[Location]:
    """The document and journal locations of ``machines`` (machines whose options do not
    resolve are left out: they have no instances to list either)."""
    found: list[Location] = []
    for machine in machines:
        try:
            paths = workspace.store_for(machine).locations(MARK)
        except FsmError as exc:
            log.warning("watch_skipped", machine=machine.name, error=str(exc))
            continue
        for path in paths:
            first, *others = path.split(MARK)
            regex = re.escape(first) + f"(?P<id>{ID_PATTERN})"
            regex += "(?P=id)".join(re.escape(part) for part in others)
            root = Path(first + "x").parent
            found.append(Location(machine.name, re.compile(regex + r"\Z"), root))
    return found


class ChangeFeed:
    """Publishes the instances that changed to every subscriber."""

    def __init__(self, workspace: Path, locations: list[Location]) -> None:
        self.workspace = workspace
        self.locations = locations
        self._queues: set[asyncio.Queue[Change | None]] = set()

    def subscribe(self) -> asyncio.Queue[Change | None]:
        """A new queue of changes; ``None`` on it means the server is stopping."""
        queue: asyncio.Queue[Change | None] = asyncio.Queue(QUEUE_SIZE)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change | None]) -> None:
        """Stop feeding ``queue``."""
        self._queues.discard(queue)

    @property
    def subscribers(self) -> int:
        """How many queues are fed."""
        return len(self._queues)

    def publish(self, changes: Iterable[Change]) -> None:
        """Put ``changes`` on every queue; a queue that is full is told to reload instead."""
        batch = list(changes)
        for queue in self._queues:
            for change in batch:
                try:
                    queue.put_nowait(change)
                except asyncio.QueueFull:
                    _drain(queue)
                    queue.put_nowait(Change())
                    break

    def close(self) -> None:
        """Tell every subscriber that the server is stopping."""
        for queue in self._queues:
            _drain(queue)
            queue.put_nowait(None)

    def changes_of(self, paths: Iterable[str]) -> set[Change]:
        """The instances the changed ``paths`` belong to."""
        changes = set()
        for path in paths:
            for location in self.locations:
                match = location.pattern.match(path)
                if match and ".." not in match.group("id"):
                    changes.add(Change(location.machine, match.group("id")))
        return changes

    def is_wanted(self, change: object, path: str) -> bool:
        """The watcher's filter: only the files of instances."""
        return any(location.pattern.match(path) for location in self.locations)

    async def watch(self, stop: asyncio.Event) -> None:
        """Follow the instance folders until ``stop`` is set."""
        while not stop.is_set():
            watched, awaited = self._roots()
            round_over = asyncio.Event()
            tasks = [asyncio.create_task(_set_when(stop, round_over))]
            if watched:
                tasks.append(asyncio.create_task(self._follow(watched, round_over)))
            if awaited:
                tasks.append(asyncio.create_task(self._await_roots(awaited, round_over)))
            await round_over.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if not stop.is_set():
                self.publish([Change()])

    def _roots(self) -> tuple[list[Path], dict[Path, list[Path]]]:
        """The instance folders that exist, and for the others their nearest existing parent."""
        roots = sorted({location.root for location in self.locations})
        outermost = [r for r in roots if not any(o != r and o in r.parents for o in roots)]
        watched = [root for root in outermost if root.is_dir()]
        awaited: dict[Path, list[Path]] = {}
        for root in outermost:
            if root.is_dir():
                continue
            parent = root.parent
            while not parent.is_dir() and self.workspace in parent.parents:
                parent = parent.parent
            awaited.setdefault(parent, []).append(root)
        return watched, awaited

    async def _follow(self, roots: list[Path], round_over: asyncio.Event) -> None:
        names = {str(root) for root in roots}

        def wanted(change: object, path: str) -> bool:
            return path in names or self.is_wanted(change, path)

        try:
            async for batch in awatch(
                *roots,
                watch_filter=wanted,
                debounce=200,
                step=20,
                stop_event=round_over,
                recursive=True,
            ):
                self.publish(self.changes_of(path for _, path in batch))
                if not all(root.is_dir() for root in roots):
                    break  # a watched folder was removed: await it again
        except (OSError, RuntimeError) as exc:  # the watch itself failed: start over
            log.warning("watch_restarted", error=str(exc))
            await asyncio.sleep(RETRY_SECONDS)
        round_over.set()

    async def _await_roots(
        self, awaited: dict[Path, list[Path]], round_over: asyncio.Event
    ) -> None:
        """Wait until a missing folder (or one of its missing parents) appears."""
        start = self._roots()
        if start[1] != awaited:  # something appeared while the round started
            round_over.set()
            return
        with contextlib.suppress(OSError, RuntimeError):
            async for _ in awatch(
                *awaited, watch_filter=None, stop_event=round_over, recursive=False, step=20
            ):
                if self._roots() != start:
                    break
        round_over.set()


async def _set_when(stop: asyncio.Event, round_over: asyncio.Event) -> None:
    await stop.wait()
    round_over.set()


def _drain(queue: asyncio.Queue[Change | None]) -> None:
    while not queue.empty():
        queue.get_nowait()
