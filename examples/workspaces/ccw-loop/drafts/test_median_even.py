"""The test the first task adds: the median of an even count (it exposes the bug in stats.py)."""

from __future__ import annotations

import pytest
from stats import median


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1.0, 3.0], 2.0), ([4.0, 1.0, 3.0, 2.0], 2.5)],
    ids=["two", "four-unsorted"],
)
def test_median_of_even_count(values: list[float], expected: float) -> None:
    """With an even count the median is the mean of the two middle values."""
    assert median(values) == expected
