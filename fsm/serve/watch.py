"""The change feed: which instances changed, told to every open page.

Each served machine's store tells which of its instances changed
(:meth:`fsm.store.protocol.Store.changes`: the file store follows its folders with a file watcher,
whoever writes there: ``fsm run`` in a terminal, the CCW dashboard, another ``fsm serve``), and
every change is published to every subscriber (one queue per open event stream). A store that
cannot tell which instances changed (a folder that appeared, a watch that restarted) makes the
subscribers reload everything (:attr:`Change.everything`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog

from fsm.base.errors import FsmError
from fsm.engine.instance import Workspace
from fsm.model.machine import Machine
from fsm.store.protocol import Store

__all__ = ["Change", "ChangeFeed", "sources_of"]

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


def sources_of(workspace: Workspace, machines: Iterable[Machine]) -> list[tuple[str, Store]]:
    """The stores of ``machines``, by machine name (machines whose options do not resolve are
    left out: they have no instances to list either)."""
    found: list[tuple[str, Store]] = []
    for machine in machines:
        try:
            found.append((machine.name, workspace.store_for(machine)))
        except FsmError as exc:
            log.warning("watch_skipped", machine=machine.name, error=str(exc))
    return found


class ChangeFeed:
    """Publishes the instances that changed to every subscriber."""

    def __init__(self, sources: list[tuple[str, Store]]) -> None:
        self.sources = sources
        self._queues: set[asyncio.Queue[Change | None]] = set()
        self.listeners: list[Callable[[Change], None]] = []
        """Told of every change before any queue (the listing's index: a page that reloads
        on a change then lists it)."""

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
        for listener in self.listeners:
            for change in batch:
                listener(change)
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

    async def watch(self, stop: asyncio.Event) -> None:
        """Follow every store's changes until ``stop`` is set."""
        tasks = [
            asyncio.create_task(self._follow(name, store, stop)) for name, store in self.sources
        ]
        try:
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, machine: str, store: Store, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async for ids in store.changes(stop):
                    if ids is None:
                        self.publish([Change()])
                    else:
                        self.publish(Change(machine, i) for i in sorted(ids))
            except (OSError, FsmError, RuntimeError) as exc:
                log.warning("watch_restarted", machine=machine, error=str(exc))
                self.publish([Change()])
                await asyncio.sleep(RETRY_SECONDS)


def _drain(queue: asyncio.Queue[Change | None]) -> None:
    while not queue.empty():
        queue.get_nowait()
