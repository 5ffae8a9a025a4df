"""Memory-loss rules: what makes a long skill forget what it was told at the start.

The symptoms looked for: the constraints the first phase states are not carried into the later
phases (an agent running phase 4 never sees them), and a multi-phase workflow keeps no
checkpoints, so an interruption loses everything done so far.
"""

from __future__ import annotations

import itertools
import re

from ..skill import Skill, SkillFile
from .rule import Finding, Rule

__all__ = [
    "MIN_PHASES_FOR_CHECKPOINTS",
    "RULES",
    "constraints_of",
    "hands_over",
    "normalise",
    "persists_output",
]

MIN_PHASES_FOR_CHECKPOINTS = 3
"""Below this many phases a restart is cheap enough that checkpoints are not required."""

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
_TAG = re.compile(r"^\s*\[(?P<title>[A-Z][A-Z _-]*)\]\s*$")
_CONSTRAINT_TITLE = re.compile(r"constraint|requirement|\brules\b|must", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?P<text>\S.*?)\s*$")
_CHECKPOINT = re.compile(r"checkpoint|snapshot|savepoint", re.IGNORECASE)
_WRITES_FILE = re.compile(
    r"\b(?:Write|writeFileSync|writeFile|write_text)\(|\bopen\([^)]*['\"][wa]['\"]"
    r"|(?:^|[\s;|&])>>?\s*['\"]?[\w${}./-]+\.\w+"
)
_SAVES_PROSE = re.compile(
    r"\b(?:write|writes|save|saves|persist|persists|store|stores)\b[^.\n]{0,60}?\bto\s+`[^`]+`",
    re.IGNORECASE,
)


_ROUTER = re.compile(r"\brout(?:e|er|es|ed|ing)\b|\bdispatch", re.IGNORECASE)


def hands_over(skill: Skill) -> bool:
    """Whether the phases form a pipeline. They are alternative modes, not a pipeline, when
    no phase names the phase after it (its file, ``02-plan``, or ``Phase 2``) and the skill
    speaks of routing to them (CCW's memory-manage: a router picks one mode, each returns to
    it); the memory rules, about what one phase passes to the next, do not apply then."""
    return _handover(skill) is not None


def _handover(skill: Skill) -> str | None:
    """Why the phases form a pipeline (:func:`hands_over`), or None when they do not."""
    sequence = skill.phase_sequence
    for index, (phase, following) in enumerate(itertools.pairwise(sequence)):
        stem = following.path.rsplit("/", 1)[-1].removesuffix(".md")
        if stem in phase.text or re.search(rf"\bPhase\s+{index + 2}\b", phase.text):
            return f"{phase.path} names the phase after it"
    main = skill.file("SKILL.md")
    if _ROUTER.search(main.text if main is not None else ""):
        return None
    return "SKILL.md speaks of no router picking one of them"


def persists_output(phase: SkillFile) -> bool:
    """Whether the phase writes what it produced to a file (that file is its checkpoint)."""
    code = any(
        _WRITES_FILE.search(text) for block in phase.code_blocks for _n, text in block.numbered()
    )
    return code or any(_SAVES_PROSE.search(line) for line in phase.lines)


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
    pipeline = _handover(skill) if len(sequence) >= 2 else None
    if pipeline is None:
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
            shown = "; ".join(repr(c) for c in missing[:3]) + ("; ..." if len(missing) > 3 else "")
            reason = (
                f"{first.path} lists {len(constraints)} constraint(s) under a constraints "
                f"heading and this phase neither repeats nor names {len(missing)} of them "
                f"(compared without markup or case): {shown}; the phases run in sequence "
                f"({pipeline})"
            )
            findings.append(Finding(phase.path, None, context, "high", data, reason=reason))
    return findings


def _phase_without_checkpoint(skill: Skill) -> list[Finding]:
    sequence = skill.phase_sequence
    pipeline = _handover(skill) if len(sequence) >= MIN_PHASES_FOR_CHECKPOINTS else None
    if pipeline is None:
        return []
    reason = (
        f"{len(sequence)} phases run in sequence ({pipeline}); this one writes no file "
        "(Write(, writeFileSync(, open(..., 'w'), a shell redirection), says nowhere that it "
        "saves to a named file, and names no checkpoint, snapshot or savepoint"
    )
    return [
        Finding(
            phase.path,
            None,
            f"{phase.path} saves no checkpoint before the next phase",
            "medium",
            reason=reason,
        )
        for phase in sequence[:-1]
        if _CHECKPOINT.search(phase.text) is None and not persists_output(phase)
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
