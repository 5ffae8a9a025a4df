"""How far each rule's findings can be trusted: its precision measured on skills it was not tuned
on, and which findings are therefore only "to review".

The figures are data (``precision.yaml`` beside this module, written by
``scripts/skill_precision.py --write`` from the held-out half of the blind-labelled CCW skills):
per rule, its findings there, how many a labeller had also found, and the precision. A rule
measured under the threshold (0.9) has its findings marked to review: they are listed with
their evidence in the report and the state (``issues_to_review``), but the quality gate does
not count them and no fix is proposed for them. A rule with no finding in the measurement has
no measured precision and counts as before (the report says it is unmeasured).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PRECISION_FILE", "Measured", "PrecisionTable", "current", "load"]

PRECISION_FILE = Path(__file__).with_name("precision.yaml")


@dataclass(frozen=True)
class Measured:
    """A rule's figures: its findings on the held-out skills, how many matched a labelled
    problem (``true``), and the precision."""

    findings: int
    true: int
    precision: float | None


@dataclass(frozen=True)
class PrecisionTable:
    """The measured precision of every rule, when it was measured, and the threshold."""

    measured: str
    threshold: float
    rules: Mapping[str, Measured] = field(default_factory=dict)

    def to_review(self, rule: str | None) -> bool:
        """Whether ``rule``'s findings are only to review: measured under the threshold."""
        figures = self.rules.get(rule or "")
        return (
            figures is not None
            and figures.precision is not None
            and figures.precision < self.threshold
        )

    def note(self, rule: str | None) -> str:
        """``precision 0.50 (2 of 4) on held-out skills, measured 2026-11-28``, or why none."""
        figures = self.rules.get(rule or "")
        if figures is None or figures.precision is None:
            return f"precision not measured (no finding on the held-out skills, {self.measured})"
        return (
            f"precision {figures.precision:.2f} ({figures.true} of {figures.findings}) on "
            f"held-out skills, measured {self.measured}"
        )


def _measured(raw: Mapping[str, Any]) -> Measured:
    precision = raw.get("precision")
    return Measured(
        int(raw.get("findings", 0)),
        int(raw.get("matched", 0)),
        None if precision is None else float(precision),
    )


@cache
def load(path: Path) -> PrecisionTable:
    """The table stored at ``path`` (read once per process)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return PrecisionTable(
        measured=str(document.get("measured", "never")),
        threshold=float(document.get("threshold", 0.9)),
        rules={name: _measured(raw) for name, raw in (document.get("rules") or {}).items()},
    )


def current() -> PrecisionTable:
    """The table the machine uses: :data:`PRECISION_FILE`."""
    return load(PRECISION_FILE)
