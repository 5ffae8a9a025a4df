"""The tests the project starts with: they pass, because none covers an even count."""

from __future__ import annotations

import pytest
from stats import mean, median


@pytest.mark.parametrize(
    ("values", "expected"),
    [([2.0], 2.0), ([1.0, 2.0, 6.0], 3.0), ([-1.0, 1.0], 0.0)],
    ids=["one", "three", "signed"],
)
def test_mean(values: list[float], expected: float) -> None:
    """The mean is the sum over the count."""
    assert mean(values) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [([5.0], 5.0), ([3.0, 1.0, 2.0], 2.0), ([9.0, 1.0, 5.0, 7.0, 3.0], 5.0)],
    ids=["one", "three-unsorted", "five"],
)
def test_median_of_odd_count(values: list[float], expected: float) -> None:
    """With an odd count the median is the middle value."""
    assert median(values) == expected


@pytest.mark.parametrize("function", [mean, median])
def test_empty_list_is_an_error(function: object) -> None:
    """Neither is defined for an empty list."""
    with pytest.raises(ValueError, match="empty list"):
        function([])  # type: ignore[operator]
