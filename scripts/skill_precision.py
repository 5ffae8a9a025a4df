"""Precision and recall of skill-tuning's rules against blind labels of CCW's skills.

The labels (``tests/machines/skill_tuning/blind/<half>/*.yaml``, one file a skill) list every
place where a careful reader found one of the twelve problems, judged from the rules'
descriptions alone. A finding matches a labelled problem when the rule and the file are the
same and the places agree: the finding's lines (a call's finding spans its statement) meet the
labelled lines widened by :data:`TOLERANCE` on each side, or either side is a whole file (no
line). A finding filed for
the whole skill (anchored to ``SKILL.md``) also matches a whole-skill label (``SKILL.md``, no
lines). Then, per rule and overall::

    precision = findings that match some label / findings
    recall    = labels that some finding matches / labels

The skills are not this project's and are not copied into it: ``--skills`` (or ``CCW_SKILLS``)
names a folder of them. ``--findings`` measures findings dumped earlier instead of running the
rules (how the figures from before a change are kept). ``--write`` stores the held-out
precision per rule where the machine reads it (``machines/skill_tuning/diagnosis/
precision.yaml``): a rule under the threshold has its findings marked "to review".

    .venv/bin/python scripts/skill_precision.py --skills ../shared/ccw-skills
    .venv/bin/python scripts/skill_precision.py --half tune --list   # what to tune on
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
BLIND = REPOSITORY / "tests" / "machines" / "skill_tuning" / "blind"
JUDGED = REPOSITORY / "tests" / "machines" / "skill_tuning" / "labels"
PRECISION_FILE = REPOSITORY / "machines" / "skill_tuning" / "diagnosis" / "precision.yaml"
HALVES = ("tune", "held-out")
TOLERANCE = 3
"""Lines either side of a labelled range within which a finding's line still matches it: a
call's finding sits on the line the statement starts, a label may quote the line after."""
SKILL_WIDE = "SKILL.md"


@dataclass(frozen=True)
class Label:
    """One labelled problem: a rule, a file, and its lines (None: the whole file or skill)."""

    skill: str
    rule: str
    file: str
    lines: tuple[int, int] | None


@dataclass(frozen=True)
class Found:
    """One finding of a rule on a skill, as the measurement needs it."""

    skill: str
    rule: str
    file: str
    line: int | None
    end: int | None = None
    anchor: str | None = None


def _lines(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value, value
    numbers = [int(n) for n in value]
    return (numbers[0], numbers[-1]) if numbers else None


def read_labels(folder: Path) -> dict[str, list[Label]]:
    """The labelled problems of every skill of ``folder``, by skill."""
    labels: dict[str, list[Label]] = {}
    for path in sorted(folder.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        skill = document["skill"]
        labels[skill] = [
            Label(skill, item["rule"], item["file"], _lines(item.get("lines")))
            for item in document.get("problems") or []
        ]
    return labels


def matches(found: Found, label: Label) -> bool:
    """Whether ``found`` is the problem ``label`` describes (see the module's docstring)."""
    if found.skill != label.skill or found.rule != label.rule:
        return False
    if found.file != label.file:
        return label.lines is None and label.file == SKILL_WIDE and found.anchor == SKILL_WIDE
    if found.line is None or label.lines is None:
        return True
    first, last = label.lines
    end = max(found.line, found.end or found.line)
    return found.line <= last + TOLERANCE and end >= first - TOLERANCE


@dataclass(frozen=True)
class Tally:
    """Findings and labels of one rule (or all), and how many of each matched."""

    findings: int
    true: int
    labels: int
    recalled: int

    @property
    def precision(self) -> float | None:
        """Matched findings over findings; None without findings."""
        return self.true / self.findings if self.findings else None

    @property
    def recall(self) -> float | None:
        """Matched labels over labels; None without labels."""
        return self.recalled / self.labels if self.labels else None


def tally(found: Sequence[Found], labels: Sequence[Label], rule: str | None = None) -> Tally:
    """The tally of ``rule`` (every rule when None)."""
    mine = [f for f in found if rule is None or f.rule == rule]
    wanted = [label for label in labels if rule is None or label.rule == rule]
    true = sum(1 for f in mine if any(matches(f, label) for label in wanted))
    recalled = sum(1 for label in wanted if any(matches(f, label) for f in mine))
    return Tally(len(mine), true, len(wanted), recalled)


def run_rules(skills: Path, names: Iterable[str]) -> tuple[list[Found], list[str]]:
    """Every finding of every rule on the named skills, and the skills the machine could not
    read (their labels all count as missed)."""
    from fsm_machines.skill_tuning.diagnosis.run import RULES
    from fsm_machines.skill_tuning.skill import TargetSkillError, read_skill

    found: list[Found] = []
    unread: list[str] = []
    for name in names:
        try:
            skill = read_skill(skills / name)
        except TargetSkillError:
            unread.append(name)
            continue
        found += [
            Found(name, rule.name, f.file, f.line, f.end, f.anchor)
            for rule in RULES.values()
            for f in rule.check(skill)
        ]
    return found, unread


def dumped(path: Path, names: Iterable[str]) -> tuple[list[Found], list[str]]:
    """Findings read from a dump (``{skill: [{rule, file, line, end, anchor}] | null}``)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    found: list[Found] = []
    unread: list[str] = []
    for name in names:
        items = document.get(name)
        if items is None:
            unread.append(name)
            continue
        found += [
            Found(name, i["rule"], i["file"], i["line"], i.get("end"), i.get("anchor"))
            for i in items
        ]
    return found, unread


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(found: Sequence[Found], labels: Sequence[Label], rules: Iterable[str]) -> list[str]:
    """The per-rule and overall figures as the lines of a Markdown table."""
    lines = [
        "| rule | findings | true | precision | labels | found | recall |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rule in [*rules, None]:
        t = tally(found, labels, rule)
        name = rule or "**all**"
        lines.append(
            f"| {name} | {t.findings} | {t.true} | {_ratio(t.precision)} | {t.labels} | "
            f"{t.recalled} | {_ratio(t.recall)} |"
        )
    return lines


def details(found: Sequence[Found], labels: Sequence[Label]) -> list[str]:
    """Each finding with its verdict and each label no finding matched (for tuning)."""
    out = []
    for f in found:
        verdict = "TRUE " if any(matches(f, label) for label in labels) else "FALSE"
        out.append(f"{verdict} {f.skill} {f.rule} {f.file}:{f.line}")
    for label in labels:
        if not any(matches(f, label) for f in found):
            where = f"{label.lines[0]}-{label.lines[1]}" if label.lines else "-"
            out.append(f"MISSED {label.skill} {label.rule} {label.file}:{where}")
    return out


def judged(skills: Path) -> Tally:
    """The eight skills whose every finding was judged true or false by hand (``labels/``):
    findings, findings judged true, true findings judged, true findings still found."""
    verdicts: dict[tuple[str, str, int | None, str], bool] = {}
    for path in sorted(JUDGED.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for item in document["findings"]:
            key = (document["skill"], item["file"], item["line"], item["rule"])
            verdicts[key] = bool(item["verdict"])
    names = sorted({key[0] for key in verdicts})
    found, _unread = run_rules(skills, names)
    keys = {(f.skill, f.file, f.line, f.rule) for f in found}
    true = {key for key, verdict in verdicts.items() if verdict}
    return Tally(len(keys), len(keys & true), len(true), len(keys & true))


def write_precision(
    found: Sequence[Found], labels: Sequence[Label], rules: Iterable[str], skills: int
) -> None:
    """Store the held-out precision of every rule where the machine reads it."""
    figures: dict[str, Mapping[str, Any]] = {}
    for rule in rules:
        t = tally(found, labels, rule)
        precision = None if t.precision is None else round(t.precision, 3)
        figures[rule] = {"findings": t.findings, "matched": t.true, "precision": precision}
    header = (
        "# Precision of each rule's findings on the held-out half of the blind-labelled CCW\n"
        "# skills (tests/machines/skill_tuning/blind/held-out), never looked at while the rules\n"
        "# were changed. Written by scripts/skill_precision.py --write; the machine reads it: a\n"
        "# rule measured under the threshold has its findings marked 'to review', outside the\n"
        "# quality gate. A rule with no finding there is unmeasured (precision null).\n"
    )
    body = {
        "measured": datetime.date.today().isoformat(),
        "skills": skills,
        "threshold": 0.9,
        "rules": figures,
    }
    PRECISION_FILE.write_text(header + yaml.safe_dump(body, sort_keys=False), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=Path, default=os.environ.get("CCW_SKILLS"))
    parser.add_argument("--half", choices=[*HALVES, "both"], default="both")
    parser.add_argument("--findings", type=Path, help="a dump of findings to measure instead")
    parser.add_argument("--list", action="store_true", help="every finding's verdict, and misses")
    parser.add_argument("--judged", action="store_true", help="also the eight judged skills")
    parser.add_argument("--write", action="store_true", help="store the held-out precision")
    args = parser.parse_args(argv)
    if args.skills is None or not Path(args.skills).is_dir():
        print("skill_precision: name a folder of CCW's skills with --skills or CCW_SKILLS")
        return 2
    from fsm_machines.skill_tuning.diagnosis.run import RULES

    halves = HALVES if args.half == "both" else (args.half,)
    for half in halves:
        by_skill = read_labels(BLIND / half)
        labels = [label for items in by_skill.values() for label in items]
        if args.findings is not None:
            found, unread = dumped(args.findings, by_skill)
        else:
            found, unread = run_rules(Path(args.skills), by_skill)
        print(
            f"\n{half}: {len(by_skill)} skills"
            + (f" (not readable: {', '.join(unread)})" if unread else "")
        )
        print("\n".join(table(found, labels, RULES)))
        if args.list:
            print("\n".join(details(found, labels)))
        if args.write and half == "held-out":
            write_precision(found, labels, RULES, len(by_skill))
            print(f"written: {PRECISION_FILE.relative_to(REPOSITORY)}")
    if args.judged:
        t = judged(Path(args.skills))
        print(
            f"\njudged eight: {t.true} of {t.findings} findings true (precision "
            f"{_ratio(t.precision)}), {t.recalled} of {t.labels} true findings found"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
