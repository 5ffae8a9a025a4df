"""The clock fsm reads time from: the system clock, and a simulated one for tests.

Public: the names are defined in :mod:`fsm.base.clock`.
"""

from fsm.base.clock import (
    Clock,
    SimulatedClock,
    SystemClock,
    iso_utc,
)

__all__ = [
    "Clock",
    "SimulatedClock",
    "SystemClock",
    "iso_utc",
]
