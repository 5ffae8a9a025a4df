"""Server-sent events: the change feed of :mod:`fsm.serve.watch` as a ``text/event-stream``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fsm.serve.watch import ChangeFeed

__all__ = ["stream"]

KEEPALIVE_SECONDS = 15.0


async def stream(
    feed: ChangeFeed, machine: str | None = None, instance: str | None = None
) -> AsyncIterator[str]:
    """``ready`` once subscribed, then one ``change`` per changed instance that matches
    ``machine`` and ``instance`` (every one when they are None), until the server stops.

    A page loads its data on ``ready``: changes made while it loaded are then never missed, and
    a browser that reconnects (``retry``) reloads what it missed while it was away.
    """
    queue = feed.subscribe()
    try:
        yield "retry: 1000\nevent: ready\ndata: {}\n\n"
        while True:
            try:
                change = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if change is None:
                return
            wanted = change.everything or (
                machine in (None, change.machine) and instance in (None, change.id)
            )
            if wanted:
                yield f"event: change\ndata: {json.dumps(change.to_json())}\n\n"
    finally:
        feed.unsubscribe(queue)
