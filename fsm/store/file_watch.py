"""Waiting for changes of a file store's instances (:meth:`fsm.store.file_store.FileStore.changes`).

A file watcher (watchfiles: inotify on Linux, no polling) follows the folders the store keeps
its instances in, whoever writes there (``fsm run`` in a terminal, the CCW dashboard, another
process). Each changed path is matched against the store's document and journal paths, with the
id in its place, and the ids it names are yielded in batches. A folder that does not exist yet
is awaited by watching its nearest existing parent without recursion; when it appears the watch
starts over and ``None`` is yielded (reload everything).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import structlog
from watchfiles import awatch

__all__ = ["ids_of", "watch"]

RETRY_SECONDS = 1.0

log = structlog.get_logger("fsm.store")

Location = tuple[re.Pattern[str], Path]
"""The pattern of a path holding an id (its group ``id``) and the folder it lies in."""


def ids_of(locations: list[Location], paths: list[str]) -> set[str]:
    """The ids the changed ``paths`` belong to."""
    ids = set()
    for path in paths:
        for pattern, _ in locations:
            match = pattern.match(path)
            if match and ".." not in match.group("id"):
                ids.add(match.group("id"))
    return ids


async def watch(
    workspace: Path, locations: list[Location], stop: asyncio.Event
) -> AsyncIterator[set[str] | None]:
    """Until ``stop`` is set, the ids whose files changed (None: reload everything)."""
    queue: asyncio.Queue[set[str] | None] = asyncio.Queue()
    task = asyncio.create_task(_run(workspace, locations, stop, queue))
    waiting = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            getting = asyncio.create_task(queue.get())
            done, _ = await asyncio.wait({getting, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if getting not in done:
                getting.cancel()
                break
            yield getting.result()
    finally:
        for pending in (task, waiting):
            pending.cancel()
        await asyncio.gather(task, waiting, return_exceptions=True)


async def _run(
    workspace: Path,
    locations: list[Location],
    stop: asyncio.Event,
    queue: asyncio.Queue[set[str] | None],
) -> None:
    while not stop.is_set():
        watched, awaited = _roots(workspace, locations)
        round_over = asyncio.Event()
        tasks = [asyncio.create_task(_set_when(stop, round_over))]
        if watched:
            tasks.append(asyncio.create_task(_follow(locations, watched, round_over, queue)))
        if awaited:
            tasks.append(
                asyncio.create_task(_await_roots(workspace, locations, awaited, round_over))
            )
        await round_over.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not stop.is_set():
            queue.put_nowait(None)


def _roots(workspace: Path, locations: list[Location]) -> tuple[list[Path], dict[Path, list[Path]]]:
    """The instance folders that exist, and for the others their nearest existing parent."""
    roots = sorted({root for _, root in locations})
    outermost = [r for r in roots if not any(o != r and o in r.parents for o in roots)]
    watched = [root for root in outermost if root.is_dir()]
    awaited: dict[Path, list[Path]] = {}
    for root in outermost:
        if root.is_dir():
            continue
        parent = root.parent
        while not parent.is_dir() and workspace in parent.parents:
            parent = parent.parent
        awaited.setdefault(parent, []).append(root)
    return watched, awaited


async def _follow(
    locations: list[Location],
    roots: list[Path],
    round_over: asyncio.Event,
    queue: asyncio.Queue[set[str] | None],
) -> None:
    names = {str(root) for root in roots}

    def wanted(change: object, path: str) -> bool:
        return path in names or any(pattern.match(path) for pattern, _ in locations)

    try:
        async for batch in awatch(
            *roots,
            watch_filter=wanted,
            debounce=200,
            step=20,
            stop_event=round_over,
            recursive=True,
        ):
            ids = ids_of(locations, [path for _, path in batch])
            if ids:
                queue.put_nowait(ids)
            if not all(root.is_dir() for root in roots):
                break  # a watched folder was removed: await it again
    except (OSError, RuntimeError) as exc:  # the watch itself failed: start over
        log.warning("watch_restarted", error=str(exc))
        await asyncio.sleep(RETRY_SECONDS)
    round_over.set()


async def _await_roots(
    workspace: Path,
    locations: list[Location],
    awaited: dict[Path, list[Path]],
    round_over: asyncio.Event,
) -> None:
    """Wait until a missing folder (or one of its missing parents) appears."""
    start = _roots(workspace, locations)
    if start[1] != awaited:  # something appeared while the round started
        round_over.set()
        return
    with contextlib.suppress(OSError, RuntimeError):
        async for _ in awatch(
            *awaited, watch_filter=None, stop_event=round_over, recursive=False, step=20
        ):
            if _roots(workspace, locations) != start:
                break
    round_over.set()


async def _set_when(stop: asyncio.Event, round_over: asyncio.Event) -> None:
    await stop.wait()
    round_over.set()
