"""Findings of a rule measured under 0.9 precision are "to review": shown with their evidence in
the state and the report, never counted by the quality gate, never given a fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fsm_machines.skill_tuning.diagnosis import trust
from fsm_machines.skill_tuning.diagnosis.run import RULES

from fsm.view.inspect import status
from tests.machines.skill_tuning.conftest import SKILL_MD, Tuning, precision_table, tune

TWO_CALLS = {
    "SKILL.md": SKILL_MD,
    "phases/01-a.md": "# Phase 1\n\n```javascript\nTask({ prompt: 'plan' });\n```\n",
    "phases/02-b.md": "# Phase 2\n\n```javascript\nTask({ prompt: 'code' });\n```\n",
}
"""Two agent calls with no error handling: two high findings of one rule."""
RULE = "agent.call_without_error_handling"
SHIPPED_PRECISION = True
"""The shipped table is read as it is; each run below writes the table it runs with."""


def _measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precision: float | None) -> None:
    path = precision_table(
        tmp_path / "precision.yaml", agent__call_without_error_handling=precision
    )
    monkeypatch.setattr(trust, "PRECISION_FILE", path)


def test_the_table_marks_only_rules_measured_under_the_threshold(tmp_path: Path) -> None:
    """Under the threshold: to review; at it or over: counted; unmeasured or unknown: counted,
    and the note says which."""
    table = trust.load(
        precision_table(
            tmp_path / "p.yaml",
            agent__call_without_error_handling=0.5,
            agent__result_unvalidated=0.9,
            agent__nested_agent_call=None,
        )
    )
    assert table.to_review("agent.call_without_error_handling")
    assert not table.to_review("agent.result_unvalidated")
    assert not table.to_review("agent.nested_agent_call")
    assert not table.to_review("no.such_rule") and not table.to_review(None)
    assert table.note("agent.call_without_error_handling") == (
        "precision 0.50 (0 of 4) on held-out skills, measured 2026-01-01"
    )
    assert table.note("agent.nested_agent_call").startswith("precision not measured")


def test_the_shipped_table_measures_every_rule() -> None:
    """The table the machine ships names every rule with its held-out figures, and a rule is
    to review exactly when its measured precision is under the threshold."""
    table = trust.load(trust.PRECISION_FILE)
    assert set(table.rules) == set(RULES)
    assert table.threshold == 0.9 and table.measured != "never"
    for name, figures in table.rules.items():
        if figures.precision is None:
            assert figures.findings == 0, name
        else:
            assert figures.precision == pytest.approx(figures.true / figures.findings, abs=1e-3)
        assert table.to_review(name) == (figures.precision is not None and figures.precision < 0.9)


def test_to_review_findings_do_not_count_in_the_gate(
    make_skill: Callable[..., Path],
    tuning: Tuning,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two unhandled agent calls of a rule measured at 0.5: the gate passes at 100 with no
    issue and 2 to review; the state lists them apart with their evidence and a note; the
    report has them under "To review"; fsm status says "no issues; 2 to review"; no fix is
    proposed; the diagnosis file marks the findings."""
    _measured(tmp_path, monkeypatch, 0.5)
    instance = tune(tuning, make_skill(TWO_CALLS), max_iterations=2)
    result = instance.run(max_steps=200)
    doc = instance.doc
    reason = "quality gate pass: 100/100, no issue left; 2 to review; no fix applied; 1 iteration"
    assert (result.exit_code, doc.status, doc.quality_gate, doc.quality_score) == (
        0,
        "completed",
        "pass",
        100,
    )
    assert result.message == reason
    assert doc.issues == [] and doc.issues_by_severity.high == 0
    assert [(i.rule, i.severity) for i in doc.issues_to_review] == [(RULE, "high")] * 2
    for issue in doc.issues_to_review:
        assert "(to review, not counted by the gate: precision 0.50" in issue.description
        [claim] = issue.evidence
        assert "(not excused: " in claim
    assert doc.proposed_fixes == [] and doc.pending_fixes == []
    agent = doc.diagnosis.agent
    assert agent is not None and (agent.issues_found, agent.severity) == (0, "none")
    assert doc.work_dir is not None
    work = tuning.root / doc.work_dir
    report = (work / "tuning-report.md").read_text(encoding="utf-8")
    assert "## To review (not counted by the gate)" in report
    assert "## Remaining issues\n\nNone." in report
    side = json.loads((work / "diagnosis" / "agent-diagnosis.json").read_text(encoding="utf-8"))
    assert {f["to_review"] for f in side["findings"] if f["rule"] == RULE} == {True}
    assert len(side["issues_to_review"]) == 2 and side["issues"] == []
    assert status(instance.instance).summary["issues"] == "no issues; 2 to review"


def test_the_same_findings_count_when_the_rule_is_trusted(
    make_skill: Callable[..., Path],
    tuning: Tuning,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same skill with the rule measured at 0.95: two high issues, gate review at 70, exit 4,
    nothing to review."""
    _measured(tmp_path, monkeypatch, 0.95)
    instance = tune(tuning, make_skill(TWO_CALLS), max_iterations=1)
    result = instance.run(max_steps=200)
    doc = instance.doc
    assert (result.exit_code, doc.quality_gate, doc.quality_score) == (4, "review", 70)
    assert doc.issues_by_severity.high == 2 and doc.issues_to_review == []
    assert result.message.startswith("quality gate review: 70/100, 2 high; 2 issues left")
