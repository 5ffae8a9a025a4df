"""The three false findings reported on CCW skills the rules were not tuned on, as fixtures
(``false_findings/``, written for these tests): an agent call that the skill's error table
covers (a table of what to do when a node fails), an external tool's parameter read as the
skill's own field spelled differently, and an API reference's example read as a step. Each
fixture is quiet, and a control next to it (the same text without the excuse) is a finding,
so the excuse is what silences the rule."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from fsm_machines.skill_tuning.diagnosis.run import RULES
from fsm_machines.skill_tuning.skill import read_skill

from tests.machines.skill_tuning.conftest import Tuning, tune

FIXTURES = Path(__file__).parent / "false_findings"


def _texts(name: str) -> dict[str, str]:
    root = FIXTURES / name
    return {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*.md"))
    }


def _found(rule: str, root: Path) -> list[tuple[str, int | None]]:
    return [(f.file, f.line) for f in RULES[rule].check(read_skill(root))]


def test_a_node_failure_table_handles_the_agent_call(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """``Node failed (on_fail=retry) | Retry once, then abort`` in SKILL.md's Error Handling
    says what to do when the agent node fails: no finding, and the run's gate counts no high
    issue; without the table the same call is a finding whose reason says so."""
    rule = "agent.call_without_error_handling"
    assert _found(rule, FIXTURES / "node-error-table") == []
    texts = _texts("node-error-table")
    texts["SKILL.md"] = texts["SKILL.md"].split("## Error Handling")[0]
    control = make_skill(texts, name="control")
    [finding] = RULES[rule].check(read_skill(control))
    assert (finding.file, finding.line, finding.end) == ("phases/01-run.md", 9, 12)
    assert "no error-handling section in phases/01-run.md or SKILL.md" in finding.reason

    root = tuning.root / ".claude" / "skills" / "node-error-table"
    shutil.copytree(FIXTURES / "node-error-table", root)
    instance = tune(tuning, root, max_iterations=1)
    instance.run(max_steps=200)
    doc = instance.doc
    assert rule not in {issue.rule for issue in doc.issues}
    assert doc.issues_by_severity.high == 0


def test_an_external_tools_parameter_is_not_the_skills_field(
    make_skill: Callable[..., Path],
) -> None:
    """``session_id`` in the arguments of ``mcp__ccw-tools__session_manager({...})`` is the
    tool's parameter; the skill's own field is ``sessionId``. Quiet; but the skill spelling its
    own field both ways (a ``session_id`` key of its own note) is still a finding."""
    rule = "dataflow.inconsistent_field_names"
    assert _found(rule, FIXTURES / "tool-parameter") == []
    texts = _texts("tool-parameter")
    texts["SKILL.md"] = texts["SKILL.md"].replace(
        '  summary: ""', '  summary: "",\n  archived: { session_id: null }'
    )
    control = make_skill(texts, name="control")
    assert _found(rule, control) == [("SKILL.md", 11)]


def test_an_api_reference_example_is_not_a_step(make_skill: Callable[..., Path]) -> None:
    """The blocks of ``## Subagent API Reference`` and its subsections show what a call looks
    like: no agent or parse finding there (the real step is handled); the same blocks under a
    step heading are findings."""
    root = FIXTURES / "api-reference"
    for rule in RULES.values():
        assert rule.check(read_skill(root)) == [], rule.name
    texts = _texts("api-reference")
    texts["SKILL.md"] = texts["SKILL.md"].replace("## Subagent API Reference", "## Step 0: Set up")
    control = make_skill(texts, name="control")
    assert _found("agent.call_without_error_handling", control) == [("SKILL.md", 14)]
    assert _found("dataflow.json_parse_unvalidated", control) == [("SKILL.md", 26)]
