"""What a diagnosis rule is, what it finds, and the small scanners the rules share.

A rule is a named pure function of a :class:`~fsm_machines.skill_tuning.skill.Skill` that returns
:class:`Finding` s, each with a file, a line, the offending text and a severity. The issue text
(root cause, impact, suggested fix) and the fix strategy belong to the rule, so one rule is one
kind of problem end to end: found, described, and (for mechanical strategies) fixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..model import FixStrategy, IssueType, Severity
from ..skill import CodeBlock, Skill, SkillFile

__all__ = [
    "AREAS",
    "ISSUE_TYPES",
    "SKILL_WIDE",
    "Area",
    "Finding",
    "Rule",
    "code_lines",
    "statement_end",
]

Area = Literal["context", "memory", "dataflow", "agent"]
AREAS: tuple[Area, ...] = ("context", "memory", "dataflow", "agent")
ISSUE_TYPES: Mapping[Area, IssueType] = {
    "context": "context_explosion",
    "memory": "memory_loss",
    "dataflow": "dataflow_break",
    "agent": "agent_failure",
}
SKILL_WIDE = "SKILL.md"
"""The location of an issue that concerns the skill as a whole rather than one file."""


@dataclass(frozen=True)
class Finding:
    """One match of a rule, as a claim with its evidence: where it is (``line`` to ``end``; no
    line for a whole file), the text it rests on (``context``: the offending line, or for a
    whole file what was measured), how bad it is, and ``reason``: why nothing in the skill
    excuses it, i.e. what the rule looked for and did not find ("no try/catch around it; its
    section 'Step 2' (lines 30-41) says nothing of failure; ...").

    ``data`` carries what a mechanical fixer needs (a variable name, a language); ``anchor`` is
    the file the resulting issue is filed under (the finding's own file unless the problem spans
    the skill).
    """

    file: str
    line: int | None
    context: str
    severity: Severity
    data: Mapping[str, str] = field(default_factory=dict)
    anchor: str | None = None
    end: int | None = None
    reason: str = field(kw_only=True)

    @property
    def issue_file(self) -> str:
        """The file the issue for this finding is located in."""
        return self.anchor or self.file

    @property
    def where(self) -> str:
        """``file``, ``file:12`` or ``file:12-18``."""
        if self.line is None:
            return self.file
        if self.end is None or self.end <= self.line:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}-{self.end}"

    @property
    def claim(self) -> str:
        """The finding in one line: where, the text quoted, and why it is not excused."""
        return f"{self.where}: `{_shortened(self.context)}` (not excused: {self.reason})"


def _shortened(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass(frozen=True)
class Rule:
    """A named check with everything needed to turn its findings into issues and fixes."""

    name: str
    area: Area
    title: str
    root_cause: str
    impact: str
    suggested_fix: str
    strategy: FixStrategy
    check: Callable[[Skill], list[Finding]]


def code_lines(
    skill: Skill, *, specs: bool = False
) -> Iterator[tuple[SkillFile, CodeBlock, int, str]]:
    """Every code line inside a fenced block of the files the workflow runs (and of the
    specifications too with ``specs``): (file, block, line number, code)."""
    for skill_file in skill.files if specs else skill.workflow_files:
        for block in skill_file.code_blocks:
            for number, text in block.numbered():
                yield skill_file, block, number, text


_OPENERS = re.compile(r"[(\[{]")
_CLOSERS = re.compile(r"[)\]}]")


def statement_end(block: CodeBlock, line: int) -> int:
    """The line where the statement starting at ``line`` ends: where its brackets balance.

    Brackets inside prompts are counted too; that is good enough for the call statements the
    rules look at, and an unbalanced statement ends with the block.
    """
    depth = 0
    for number, text in block.numbered():
        if number < line:
            continue
        depth += len(_OPENERS.findall(text)) - len(_CLOSERS.findall(text))
        if depth <= 0:
            return number
    return block.start + len(block.lines) - 1
