"""The blind labels and the measurement against them (``scripts/skill_precision.py``).

The labels are checked always; the figures before the rules were tuned are pinned from the
findings recorded then (``blind/before-findings.json``); the figures of the rules as they are
need CCW's skills (``CCW_SKILLS``, which scripts/test.sh sets when it finds them) and are
pinned at what was measured: a change that lowers the held-out precision or recall fails, and
so does a change of the figures the machine reads (``precision.yaml``) without measuring again.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from fsm_machines.skill_tuning.diagnosis import trust
from fsm_machines.skill_tuning.diagnosis.run import RULES

from tests.machines.skill_tuning.conftest import ccw_skills

REPOSITORY = Path(__file__).resolve().parents[3]
BLIND = Path(__file__).parent / "blind"
SHIPPED_PRECISION = True


def _script() -> ModuleType:
    path = REPOSITORY / "scripts" / "skill_precision.py"
    spec = importlib.util.spec_from_file_location("skill_precision", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


measure = _script()


CORPUS = ccw_skills()
needs_corpus = pytest.mark.skipif(
    CORPUS is None, reason="CCW's skills not found: set CCW_SKILLS to a folder of them"
)


@pytest.mark.parametrize("half", measure.HALVES)
def test_every_label_file_judges_every_rule(half: str) -> None:
    """Twelve skills a half; each file names its skill, and every rule appears among its
    problems or among the rules it found nothing for; every problem names a known rule, a
    file and lines (or none, for a whole file)."""
    paths = sorted((BLIND / half).glob("*.yaml"))
    assert len(paths) == 12
    for path in paths:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert path.name == document["skill"].replace("/", "--") + ".yaml"
        problems = document.get("problems") or []
        judged = {p["rule"] for p in problems} | set(document["rules_with_no_problem"])
        assert judged == set(RULES), path.name
        for problem in problems:
            assert problem["rule"] in RULES and problem["file"], path.name
            lines = problem.get("lines")
            assert lines is None or (len(lines) == 2 and lines[0] <= lines[1]), path.name


def test_the_halves_do_not_overlap() -> None:
    """No skill is in both halves."""
    tune, held = (set(measure.read_labels(BLIND / half)) for half in measure.HALVES)
    assert not tune & held


def test_a_finding_matches_a_label_of_its_rule_file_and_place() -> None:
    """Same rule and file; lines meeting the labelled lines widened by 3; a whole file on
    either side; a finding filed for the whole skill matches a whole-skill label."""
    label = measure.Label("s", "r", "SKILL.md", (40, 45))
    found = measure.Found
    assert measure.matches(found("s", "r", "SKILL.md", 48), label)
    assert not measure.matches(found("s", "r", "SKILL.md", 49), label)
    assert measure.matches(found("s", "r", "SKILL.md", 30, end=37), label)
    assert not measure.matches(found("s", "r", "SKILL.md", 30, end=36), label)
    assert measure.matches(found("s", "r", "SKILL.md", None), label)
    assert not measure.matches(found("s", "other", "SKILL.md", 41), label)
    assert not measure.matches(found("s", "r", "phases/a.md", 41), label)
    whole = measure.Label("s", "r", "SKILL.md", None)
    assert measure.matches(found("s", "r", "phases/a.md", 7, anchor="SKILL.md"), whole)


def _figures(found: list[object], half: str) -> tuple[int, int, int, int]:
    labels = [label for items in measure.read_labels(BLIND / half).values() for label in items]
    tally = measure.tally(found, labels)
    return tally.findings, tally.true, tally.labels, tally.recalled


@pytest.mark.parametrize(
    ("half", "figures"), [("tune", (17, 11, 30, 10)), ("held-out", (15, 8, 50, 8))]
)
def test_the_figures_before_tuning(half: str, figures: tuple[int, int, int, int]) -> None:
    """The findings of the rules before any was changed (recorded then), measured as today:
    findings, true ones, labels, labels found."""
    names = measure.read_labels(BLIND / half)
    found, _unread = measure.dumped(BLIND / "before-findings.json", names)
    assert _figures(found, half) == figures


@needs_corpus
@pytest.mark.parametrize(
    ("half", "precision", "recall"), [("tune", 14 / 14, 12 / 30), ("held-out", 6 / 7, 6 / 50)]
)
def test_the_figures_now_do_not_drop(half: str, precision: float, recall: float) -> None:
    """Precision and recall of the rules as they are, on each half, at least as measured."""
    assert CORPUS is not None
    found, _unread = measure.run_rules(CORPUS, measure.read_labels(BLIND / half))
    findings, true, labels, recalled = _figures(found, half)
    assert true / findings >= precision - 1e-9, f"{half}: {true} of {findings} findings true"
    assert recalled / labels >= recall - 1e-9, f"{half}: {recalled} of {labels} labels found"


@needs_corpus
def test_the_shipped_precision_is_the_held_out_measurement() -> None:
    """The table the machine reads holds each rule's held-out figures as they are now."""
    assert CORPUS is not None
    names = measure.read_labels(BLIND / "held-out")
    found, _unread = measure.run_rules(CORPUS, names)
    labels = [label for items in names.values() for label in items]
    table = trust.load(trust.PRECISION_FILE)
    for rule in RULES:
        tally = measure.tally(found, labels, rule)
        shipped = table.rules[rule]
        assert (shipped.findings, shipped.true) == (tally.findings, tally.true), rule
