"""Small statistics helpers: the project the ccw-loop demo works on."""

from __future__ import annotations


def mean(values: list[float]) -> float:
    """The arithmetic mean of ``values``."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)


def median(values: list[float]) -> float:
    """The middle value of ``values`` (for an even count, the mean of the two middle ones)."""
    if not values:
        raise ValueError("median of an empty list")
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
