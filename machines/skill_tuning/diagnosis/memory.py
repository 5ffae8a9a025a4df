"""Memory-loss rules: what makes a long skill forget what it was told at the start.

SPEC 4.3's symptoms: the constraints the first phase states are not carried into the later
phases (an agent running phase 4 never sees them), and a multi-phase workflow keeps no
checkpoints, so an interruption loses everything done so far.
"""

from __future__ import annotations

import re

from ..skill import Skill, SkillFile
from .rule import Finding, Rule

__all__ = ["MIN_PHASES_FOR_CHECKPOINTS", "RULES", "constraints_of", "normalise"]

MIN_PHASES_FOR_CHECKPOINTS = 3
"""Below this many phases a restart is cheap enough that checkpoints are not required."""

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
_TAG = re.compile(r"^\s*\[(?P<title>[A-Z][A-Z _-]*)\]\s*$")
_CONSTRAINT_TITLE = re.compile(r"constraint|requirement|\brules\b|must", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?P<text>\S.*?)\s*$")
_CHECKPOINT = re.compile(r"checkpoint|snapshot|savepoint", re.IGNORECASE)


def normalise(text: str) -> str:
    """Text compared for "mentions": markup dropped, whitespace collapsed, lower case."""
    return " ".join(text.replace("**", "").replace("`", "").split()).lower()


def constraints_of(phase: SkillFile) -> list[str]:
    """The bullet items under the phase's constraint headings (or ``[CONSTRAINTS]`` tags)."""
    found: list[str] = []
    collecting = False
    for line in phase.lines:
        marker = _HEADING.match(line) or _TAG.match(line)
        if marker is not None:
            collecting = _CONSTRAINT_TITLE.search(marker.group("title")) is not None
            continue
        bullet = _BULLET.match(line)
        if collecting and bullet is not None and bullet.group("text") not in found:
            found.append(bullet.group("text"))
    return found


def _constraints_not_propagated(skill: Skill) -> list[Finding]:
    sequence = skill.phase_sequence
    if len(sequence) < 2:
        return []
    first, later = sequence[0], sequence[1:]
    constraints = constraints_of(first)
    findings: list[Finding] = []
    for phase in later:
        text = normalise(phase.text)
        missing = [c for c in constraints if normalise(c) not in text]
        if missing:
            context = f"{len(missing)} constraint(s) of {first.path} missing, e.g. {missing[0]!r}"
            data = {"source": first.path, "missing": "\n".join(missing)}
            findings.append(Finding(phase.path, None, context, "high", data))
    return findings


def _phase_without_checkpoint(skill: Skill) -> list[Finding]:
    sequence = skill.phase_sequence
    if len(sequence) < MIN_PHASES_FOR_CHECKPOINTS:
        return []
    return [
        Finding(
            phase.path, None, f"{phase.path} saves no checkpoint before the next phase", "medium"
        )
        for phase in sequence[:-1]
        if _CHECKPOINT.search(phase.text) is None
    ]


RULES: tuple[Rule, ...] = (
    Rule(
        name="memory.constraints_not_propagated",
        area="memory",
        title="Constraints of the first phase not carried into a later phase",
        root_cause="The first phase states constraints that the later phase never repeats or "
        "refers to.",
        impact="An agent running the later phase works without the original constraints and "
        "drifts from the request.",
        suggested_fix="Inject the first phase's constraints into every later phase.",
        strategy="constraint_injection",
        check=_constraints_not_propagated,
    ),
    Rule(
        name="memory.phase_without_checkpoint",
        area="memory",
        title="Phase ends without a checkpoint",
        root_cause="A multi-phase workflow moves on without saving what the phase produced.",
        impact="An interruption loses the work of every phase so far; a resume starts over.",
        suggested_fix="Save a checkpoint at the end of each phase and restore it on resume.",
        strategy="checkpoint_restore",
        check=_phase_without_checkpoint,
    ),
)
