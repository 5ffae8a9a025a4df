"""Connections before requests: a deadline for a request's headers, and a cap per client.

uvicorn drops a keep-alive connection that stays idle after a response (``timeout_keep_alive``),
but holds one whose request headers never finish for as long as the client likes: 1,200 such
connections kept 1,200 open files. Here a connection has :data:`HEADER_TIMEOUT` seconds, from
when it is opened or from the end of its last response, to finish a request's headers, or it is
closed. A client (an address) may hold :data:`PER_CLIENT` connections; one more closes that
client's oldest connection still waiting for its headers, or, when none waits, the new one. A
browser holds a handful and twenty polling clients twenty, so the cap touches only a flood, and
within a flood of slow headers every complete request is still served (the waiting connections
are the ones dropped).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_TIMEOUT", "IDLE_TIMEOUT", "PER_CLIENT", "guarded_protocol"]

HEADER_TIMEOUT = 10.0
"""Seconds a connection has to finish a request's headers."""
IDLE_TIMEOUT = 5
"""Seconds a keep-alive connection may stay idle after a response (uvicorn's own timer)."""
PER_CLIENT = 64
"""Connections one client address may hold at a time."""


def guarded_protocol(
    header_timeout: float = HEADER_TIMEOUT, per_client: int = PER_CLIENT
) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with the header deadline and the cap per client (the
    bookkeeping is the returned class's own: one per server)."""
    waiting: dict[str, dict[Guarded, None]] = {}  # per client, oldest first
    counts: dict[str, int] = {}

    class Guarded(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._peer = self.client[0] if self.client else "?"
            self._deadline: asyncio.TimerHandle | None = None
            self._begun: Any = None
            counts[self._peer] = counts.get(self._peer, 0) + 1
            if counts[self._peer] > per_client and not self._evict():
                transport.close()
                return
            self._wait()

        def _evict(self) -> bool:
            """Close this client's oldest connection waiting for its headers, if any."""
            queue = waiting.get(self._peer)
            if not queue:
                return False
            oldest = next(iter(queue))
            oldest._give_up()
            return True

        def _wait(self) -> None:
            waiting.setdefault(self._peer, {})[self] = None
            self._deadline = self.loop.call_later(header_timeout, self._give_up)

        def _done_waiting(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            queue = waiting.get(self._peer)
            if queue is not None:
                queue.pop(self, None)
                if not queue:
                    del waiting[self._peer]

        def _give_up(self) -> None:
            self._done_waiting()
            if not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and self.cycle is not self._begun:
                self._begun = self.cycle  # a request's headers arrived
                self._done_waiting()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # The next request's headers have their deadline too, unless a pipelined request
            # began meanwhile (handle_events saw its headers).
            cycle = self.cycle
            idle = cycle is self._begun and (cycle is None or cycle.response_complete)
            if idle and not self.transport.is_closing():
                self._wait()

        def connection_lost(self, exc: Exception | None) -> None:
            self._done_waiting()
            left = counts.get(self._peer, 1) - 1
            if left > 0:
                counts[self._peer] = left
            else:
                counts.pop(self._peer, None)
            super().connection_lost(exc)

    return Guarded
