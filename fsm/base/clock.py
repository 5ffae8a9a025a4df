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

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")
        """A second, and its text up to the milliseconds (one tuple: threads share clocks)."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()

    def iso(self) -> str:
        """Return the current UTC time as ISO-8601 text, the text :func:`iso_utc` gives for
        :meth:`now` (milliseconds cut, not rounded). A step reads the time three times: the text
        of the second is made once per second, and no ``datetime`` is built (within a
        persisted step, building and formatting one cost ~6 µs a reading)."""
        second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
        known, prefix = self._second
        if second != known:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
            self._second = (second, prefix)
        return f"{prefix}{nanoseconds // 1_000_000:03d}Z"


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
