"""Precision and recall of the four diagnoses on real skills: CCW's own, judged by hand.

The labels (``labels/*.yaml``, this project's data) hold every finding the diagnoses made on a
chosen set of CCW's skills, before and after the precision work, each judged true or false by
reading the skill, with the reason. The skills themselves are not this project's and are not
copied into the repository: the measurement runs when ``CCW_SKILLS`` names a folder of CCW's
skills (``CCW_SKILLS=/path/to/ccw-skills pytest tests/machines/skill_tuning/test_precision.py``;
scripts/test.sh sets it when it finds them), and is skipped, saying so, otherwise; the labels'
own consistency is checked always.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fsm_machines.skill_tuning.diagnosis.run import RULES
from fsm_machines.skill_tuning.skill import read_skill

from tests.machines.skill_tuning.conftest import ccw_skills

LABELS = Path(__file__).parent / "labels"
CORPUS = ccw_skills()

Key = tuple[str, str, int | None, str]


def _labels() -> dict[Key, dict[str, Any]]:
    labels: dict[Key, dict[str, Any]] = {}
    for path in sorted(LABELS.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for item in document["findings"]:
            labels[(document["skill"], item["file"], item["line"], item["rule"])] = item
    return labels


def _found(skill: str) -> set[Key]:
    assert CORPUS is not None
    snapshot = read_skill(CORPUS / skill)
    return {
        (skill, finding.file, finding.line, rule.name)
        for rule in RULES.values()
        for finding in rule.check(snapshot)
    }


def test_every_label_has_a_verdict_and_a_reason() -> None:
    """Each labelled finding says true or false and why, so a reader can check the judgement."""
    labels = _labels()
    assert len(labels) >= 100
    for key, item in labels.items():
        assert isinstance(item["verdict"], bool), key
        assert len(item["reason"]) > 20, key
        assert item["rule"] in RULES, key


@pytest.mark.skipif(
    CORPUS is None,
    reason="optional measurement on CCW's skills: set CCW_SKILLS to a folder of them to run it",
)
def test_findings_on_real_skills_are_at_least_90_percent_true_and_lose_no_true_one() -> None:
    """On the labelled CCW skills every finding is labelled, at least 90% of them are true, and
    every finding labelled true is still found (recall 100%)."""
    labels = _labels()
    skills = sorted({key[0] for key in labels})
    found = set().union(*(_found(skill) for skill in skills))
    unlabelled = sorted(found - set(labels), key=str)
    assert not unlabelled, f"findings nobody judged yet (label them): {unlabelled}"
    true = {key for key, item in labels.items() if item["verdict"]}
    precision = len(found & true) / len(found) if found else 1.0
    lost = sorted(true - found, key=str)
    assert not lost, f"true findings no longer found: {lost}"
    assert precision >= 0.9, f"precision {precision:.0%} on {len(found)} findings"
