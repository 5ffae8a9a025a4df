"""Quality score and gate, exactly as SPEC 4.3 defines them."""

from __future__ import annotations

import pytest
from fsm_machines.skill_tuning.model import IssuesBySeverity
from fsm_machines.skill_tuning.quality import quality_gate, quality_score


@pytest.mark.parametrize(
    ("critical", "high", "medium", "low", "score", "gate"),
    [
        pytest.param(0, 0, 0, 0, 100, "pass", id="no-issues"),
        pytest.param(0, 0, 0, 19, 81, "pass", id="many-low-still-pass"),
        pytest.param(0, 0, 0, 21, 79, "review", id="score-79-review"),
        pytest.param(0, 0, 4, 0, 80, "pass", id="score-80-pass"),
        pytest.param(0, 1, 0, 0, 85, "pass", id="one-high"),
        pytest.param(0, 2, 0, 0, 70, "review", id="two-high-score-70"),
        pytest.param(0, 0, 6, 0, 70, "review", id="score-70-review"),
        pytest.param(0, 0, 8, 0, 60, "review", id="score-60-review"),
        pytest.param(0, 0, 9, 0, 55, "fail", id="score-55-fail"),
        pytest.param(0, 3, 0, 0, 55, "fail", id="three-high-score-55"),
        pytest.param(1, 0, 0, 0, 75, "fail", id="any-critical-fails"),
        pytest.param(0, 6, 0, 0, 10, "fail", id="six-high"),
        pytest.param(4, 2, 5, 10, 0, "fail", id="floor-at-zero"),
    ],
)
def test_score_and_gate(
    critical: int, high: int, medium: int, low: int, score: int, gate: str
) -> None:
    """Score is 100-25c-15h-5m-1l floored at 0; the gate follows the SPEC's thresholds."""
    counts = IssuesBySeverity(critical=critical, high=high, medium=medium, low=low)
    assert quality_score(counts) == score
    assert quality_gate(counts) == gate


def test_more_than_two_high_is_review_even_with_a_good_score(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three high issues make the gate review even when the score alone would pass."""
    from fsm_machines.skill_tuning import quality

    monkeypatch.setitem(quality.WEIGHTS, "high", 1)
    counts = IssuesBySeverity(high=3)
    assert quality_score(counts) == 97
    assert quality_gate(counts) == "review"
