"""Clocks: the only source of "now" for the engine and for actions.

Actions must take time from ``ctx.clock`` rather than ``datetime.now()`` so that tests can drive
them with a :class:`SimulatedClock`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "SimulatedClock", "SystemClock", "iso_utc"]


def iso_utc(moment: datetime) -> str:
    """Format ``moment`` as ISO-8601 UTC with millisecond precision and a ``Z`` suffix."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Clock(Protocol):
    """Where the engine and actions read the time."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware."""
        ...

    def monotonic(self) -> float:
        """Return a monotonic reading in seconds, for durations."""
        ...

    def iso(self) -> str:
        """Return :meth:`now` as ISO-8601 UTC text."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()

    def iso(self) -> str:
        """Return the current UTC time as ISO-8601 text (:func:`iso_utc` of :meth:`now`, which
        is in UTC already: a step reads the time three times)."""
        return datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class SimulatedClock:
    """A clock that moves only when told to (or by ``tick`` on every reading)."""

    def __init__(self, start: datetime | None = None, tick: float = 0.0) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._tick = timedelta(seconds=tick)
        self._mono = 0.0

    def now(self) -> datetime:
        """Return the simulated time, then advance it by the tick."""
        current = self._now
        self._now += self._tick
        self._mono += self._tick.total_seconds()
        return current

    def monotonic(self) -> float:
        """Return the simulated monotonic reading."""
        return self._mono

    def iso(self) -> str:
        """Return the simulated time as ISO-8601 text."""
        return iso_utc(self.now())

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
