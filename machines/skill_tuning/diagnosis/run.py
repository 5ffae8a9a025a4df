"""Running the rules of one area over a skill, and turning findings into issues.

Findings of one rule in one file become one issue (its evidence lists every finding as a claim:
the lines quoted and why nothing excuses them), so a fix for that file addresses exactly one
issue; its location spans the lines of its findings, first to last. An issue keeps its id
across rounds: a re-diagnosis that finds the same rule in the same file again reuses the id the
document already has, and new problems get numbers never used before. That is what lets
verification ask "is the issue this fix addressed still there?" by id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..model import (
    SEVERITIES,
    DiagnosisDetails,
    DiagnosisResult,
    Evidence,
    Issue,
    IssueLocation,
    Severity,
)
from ..skill import Skill
from . import agent, context, dataflow, memory
from .rule import AREAS, ISSUE_TYPES, Area, Finding, Rule

__all__ = [
    "RULES",
    "RULES_BY_AREA",
    "Draft",
    "diagnose",
    "number_issues",
    "skipped_result",
]

RULES_BY_AREA: Mapping[Area, tuple[Rule, ...]] = {
    "context": context.RULES,
    "memory": memory.RULES,
    "dataflow": dataflow.RULES,
    "agent": agent.RULES,
}
RULES: Mapping[str, Rule] = {rule.name: rule for area in AREAS for rule in RULES_BY_AREA[area]}
_ISSUE_ID = re.compile(r"^ISS-(\d+)$")


@dataclass(frozen=True)
class Draft:
    """The findings of one rule in one file: an issue without its id yet."""

    rule: Rule
    file: str
    findings: tuple[Finding, ...]
    to_review: bool = False

    @property
    def severity(self) -> Severity:
        """The worst severity among the findings."""
        return min((f.severity for f in self.findings), key=SEVERITIES.index)

    def to_issue(self, issue_id: str) -> Issue:
        """The issue, with its id."""
        here = [f for f in self.findings if f.file == self.file and f.line is not None]
        lines = [f.line for f in here if f.line is not None]
        ends = [max(f.line, f.end or 0) for f in here if f.line is not None]
        shown = f" (line {', '.join(map(str, lines[:5]))})" if lines else ""
        return Issue(
            id=issue_id,
            type=ISSUE_TYPES[self.rule.area],
            severity=self.severity,
            priority=SEVERITIES.index(self.severity) + 1,
            location=IssueLocation(
                file=self.file,
                line_start=min(lines) if lines else None,
                line_end=max(ends) if ends else None,
                phase=self.file.split("/")[-1].removesuffix(".md")
                if self.file.startswith("phases/")
                else None,
            ),
            description=f"{self.rule.title} in {self.file}{shown}",
            evidence=[f.claim for f in self.findings],
            root_cause=self.rule.root_cause,
            impact=self.rule.impact,
            suggested_fix=self.rule.suggested_fix,
            rule=self.rule.name,
        )


def diagnose(
    area: Area,
    skill: Skill,
    elapsed_ms: float = 0.0,
    review: Callable[[str], bool] = lambda _rule: False,
) -> tuple[DiagnosisResult, list[Draft]]:
    """Run every rule of ``area`` on ``skill``: the area's result and its issue drafts. The
    drafts of a rule ``review`` names are only to review: the result's count and severity
    leave them out, as the quality gate does."""
    rules = RULES_BY_AREA[area]
    drafts: list[Draft] = []
    evidence: list[Evidence] = []
    matched: list[str] = []
    for rule in rules:
        findings = rule.check(skill)
        if not findings:
            continue
        matched.append(rule.name)
        evidence.extend(
            Evidence(
                file=f.file,
                line=f.line,
                pattern=rule.name,
                context=f"{f.context} (not excused: {f.reason})",
                severity=f.severity,
            )
            for f in findings
        )
        by_file: dict[str, list[Finding]] = {}
        for finding in findings:
            by_file.setdefault(finding.issue_file, []).append(finding)
        doubtful = review(rule.name)
        drafts.extend(Draft(rule, file, tuple(group), doubtful) for file, group in by_file.items())
    counted = [d for d in drafts if not d.to_review]
    worst = min((d.severity for d in counted), key=SEVERITIES.index, default=None)
    result = DiagnosisResult(
        status="completed",
        issues_found=len(counted),
        severity=worst or "none",
        execution_time_ms=elapsed_ms,
        details=DiagnosisDetails(
            patterns_checked=[rule.name for rule in rules],
            patterns_matched=matched,
            evidence=evidence,
            recommendations=[RULES[name].suggested_fix for name in matched],
        ),
    )
    return result, drafts


def skipped_result(area: Area) -> DiagnosisResult:
    """The result of an area left out by ``focus_areas``."""
    return DiagnosisResult(
        status="skipped",
        issues_found=0,
        severity="none",
        execution_time_ms=0,
        details=DiagnosisDetails(patterns_checked=[r.name for r in RULES_BY_AREA[area]]),
    )


def number_issues(
    drafts: Iterable[Draft], known: Iterable[Issue], used_ids: Iterable[str]
) -> list[Issue]:
    """Issues for ``drafts``: the id of a known issue of the same rule and file, else the next
    ``ISS-nnn`` after every id in ``used_ids``."""
    by_key = {(i.rule, i.location.file): i.id for i in known}
    numbers = [int(m.group(1)) for m in map(_ISSUE_ID.match, used_ids) if m is not None]
    next_number = max(numbers, default=0) + 1
    issues = []
    for draft in drafts:
        issue_id = by_key.get((draft.rule.name, draft.file))
        if issue_id is None:
            issue_id = f"ISS-{next_number:03d}"
            next_number += 1
        issues.append(draft.to_issue(issue_id))
    return issues
