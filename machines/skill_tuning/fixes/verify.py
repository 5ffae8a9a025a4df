"""Verifying one applied fix: a full re-diagnosis of the whole skill plus its consistency checks.

A fix is compared with the skill as it was just before it (the skill it was computed for),
on every rule of every area whatever ``focus_areas`` says:

* the issues it addressed must be gone: no finding of their rule is left in their file;
* it must add no finding at all, of any rule, anywhere. Findings are counted per rule, file
  and severity rather than by line, so lines that only moved (a fix inserted a line above them)
  or a line a rename touched are not mistaken for new ones;
* it must pass :func:`~.consistency.consistency_problems` (names, links, file names, data
  files, fences);
* it must pass :func:`~.properties.property_checks`: the blocks it changed still parse in
  their language, and the calls and parses its issues named are still there and handled.

Each failed condition is one line of the reason the fix is rolled back for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..diagnosis.rule import Finding, Rule
from ..diagnosis.run import RULES
from ..model import Issue
from ..skill import Skill
from .consistency import consistency_problems
from .properties import property_checks

__all__ = ["all_findings", "verification", "verification_problems"]

_Key = tuple[str, str, str, str]


def all_findings(skill: Skill) -> list[tuple[Rule, Finding]]:
    """Every finding of every rule on ``skill``."""
    return [(rule, finding) for rule in RULES.values() for finding in rule.check(skill)]


def _key(rule: Rule, finding: Finding) -> _Key:
    return rule.name, finding.issue_file, finding.file, finding.severity


def _shown(rule: Rule, finding: Finding) -> str:
    where = f"{finding.file}:{finding.line}" if finding.line is not None else finding.file
    return f"{rule.title.lower()} ({rule.name}) in {where}: {finding.context[:120]}"


def _new_findings(
    before: list[tuple[Rule, Finding]], after: list[tuple[Rule, Finding]]
) -> list[tuple[Rule, Finding]]:
    """The findings ``after`` has more of than ``before``, per rule, file and severity; of a
    group that grew, the ones whose text was not there before are shown first."""
    counts = Counter(_key(rule, finding) for rule, finding in before)
    old_texts = {(_key(rule, finding), finding.context) for rule, finding in before}
    groups: dict[_Key, list[tuple[Rule, Finding]]] = {}
    for rule, finding in after:
        groups.setdefault(_key(rule, finding), []).append((rule, finding))
    new: list[tuple[Rule, Finding]] = []
    for key, group in groups.items():
        excess = len(group) - counts[key]
        if excess > 0:
            ranked = sorted(group, key=lambda item: (key, item[1].context) in old_texts)
            new += ranked[:excess]
    return new


def verification_problems(before: Skill, after: Skill, addressed: Iterable[Issue]) -> list[str]:
    """Why the change from ``before`` to ``after`` fails as a fix of ``addressed``; empty when
    it passes."""
    return verification(before, after, addressed)[0]


def verification(
    before: Skill, after: Skill, addressed: Iterable[Issue]
) -> tuple[list[str], list[str]]:
    """The problems of the change from ``before`` to ``after`` as a fix of ``addressed`` (empty
    when it passes) and the notes of what was checked."""
    addressed = list(addressed)
    found_before, found_after = all_findings(before), all_findings(after)
    problems = []
    for issue in addressed:
        still = [
            finding
            for rule, finding in found_after
            if rule.name == issue.rule and finding.issue_file == issue.location.file
        ]
        if still:
            problems.append(
                f"{issue.id} ({issue.rule}) is still reported in {issue.location.file} "
                f"({len(still)} finding(s))"
            )
    problems += [
        f"adds a finding: {_shown(*new)}" for new in _new_findings(found_before, found_after)
    ]
    problems += consistency_problems(before, after)
    checked, notes = property_checks(before, after, addressed)
    return list(dict.fromkeys(problems + checked)), notes
