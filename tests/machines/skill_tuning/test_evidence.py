"""A finding is a claim with evidence: the lines it rests on, quoted, and why nothing in the
skill excuses them, carried into the issues the machine writes, its diagnosis files and the
report the user reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fsm_machines.skill_tuning.diagnosis.run import RULES, diagnose, number_issues
from fsm_machines.skill_tuning.skill import Skill

from tests.machines.skill_tuning.conftest import PROBE_SKILL, Tuning, md, tune
from tests.machines.skill_tuning.test_diagnosis_rules import TRIGGERS, _ids


@pytest.mark.parametrize(("rule", "files", "where"), TRIGGERS, ids=_ids(TRIGGERS))
def test_every_finding_quotes_its_lines_and_says_why_it_is_not_excused(
    rule: str,
    files: dict[str, str],
    where: tuple[str, int | None],
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """Every kind of finding quotes the line it starts on (or, for a whole file, what was
    measured), says what the rule looked for and did not find, and its issue's evidence is
    exactly those claims."""
    skill = skill_of(files)
    findings = RULES[rule].check(skill)
    assert findings
    for finding in findings:
        assert len(finding.reason) > 40, finding
        if finding.line is not None:
            source = skill.file(finding.file)
            assert source is not None
            assert source.lines[finding.line - 1].strip() in finding.context
            assert finding.end is None or finding.end >= finding.line
        assert finding.claim.startswith(f"{finding.where}: `")
        assert finding.claim.endswith(f"(not excused: {finding.reason})")
    _result, drafts = diagnose(RULES[rule].area, skill)
    issues = number_issues([d for d in drafts if d.rule.name == rule], [], [])
    claims = [f.claim for d in drafts if d.rule.name == rule for f in d.findings]
    assert [item for issue in issues for item in issue.evidence] == claims


def test_an_unhandled_call_names_the_section_and_the_error_section_it_read(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """The reason an agent call is unhandled names its section with its lines and the
    error-handling section that does not cover agents."""
    skill = skill_of(
        {
            "phases/01-a.md": md(
                """
                # Phase

                ## Step 1: Review

                ```javascript
                const review = Task({
                  prompt: 'review the diff'
                });
                ```

                ## Error Handling

                | Error | Resolution |
                |---|---|
                | Config file missing | Create it with defaults |
                """
            )
        }
    )
    [finding] = RULES["agent.call_without_error_handling"].check(skill)
    assert (finding.line, finding.end) == (6, 8)
    assert finding.where == "phases/01-a.md:6-8"
    assert "no try whose catch" not in finding.reason  # what was looked for, not a double no
    assert "a try whose catch does something" in finding.reason
    assert "its section 'Step 1: Review' (lines 3-10)" in finding.reason
    assert "'Error Handling' (line 11) speaks of no agent, tool or timeout" in finding.reason


def test_the_result_claim_names_the_variable_and_where_it_is_used(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """An unvalidated agent result says which variable holds it and the line that uses it."""
    skill = skill_of(
        {
            "phases/01-a.md": "# Phase\n\n```javascript\nconst r = Task({ prompt: 'x' });\n"
            "state.plan = r.plan;\n```\n"
        }
    )
    [finding] = RULES["agent.result_unvalidated"].check(skill)
    assert finding.reason.startswith("r, the call's result, is used on line 5")


def test_the_report_and_the_diagnosis_file_carry_the_evidence(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """The report lists each remaining issue with its claims under it, and the area's diagnosis
    file keeps every finding with its quote and reason, beside the seeds' issue shape."""
    root = make_skill(
        {
            "SKILL.md": PROBE_SKILL,
            "phases/01-a.md": "# Phase\n\n```bash\nccw cli -p 'analyse' --tool gemini\n```\n",
        }
    )
    instance = tune(tuning, root, max_iterations=1)
    instance.run(max_steps=200)
    doc = instance.doc
    [issue] = [i for i in doc.issues if i.rule == "agent.call_without_error_handling"]
    [claim] = issue.evidence
    assert claim.startswith("phases/01-a.md:4: `ccw cli -p 'analyse' --tool gemini` (not excused:")
    assert doc.work_dir is not None
    work = tuning.root / doc.work_dir
    report = (work / "tuning-report.md").read_text(encoding="utf-8")
    assert f"  - {claim}\n" in report
    record = json.loads((work / "diagnosis" / "agent-diagnosis.json").read_text(encoding="utf-8"))
    [kept] = [f for f in record["findings"] if f["rule"] == "agent.call_without_error_handling"]
    assert kept["issue"] == issue.id
    assert (kept["file"], kept["line"]) == ("phases/01-a.md", 4)
    assert kept["quote"] == "ccw cli -p 'analyse' --tool gemini"
    assert kept["not_excused_because"] in claim
