"""Every diagnosis rule: a small skill that triggers it and one that does not (with the lessons
of the blind labels' tune half, :mod:`.blind_cases`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from fsm_machines.skill_tuning.diagnosis.context import MAX_PHASE_CHARS
from fsm_machines.skill_tuning.diagnosis.run import RULES, diagnose, number_issues
from fsm_machines.skill_tuning.skill import Skill

from tests.machines.skill_tuning.blind_cases import BLIND_QUIET, BLIND_TRIGGERS
from tests.machines.skill_tuning.conftest import phase

CONSTRAINED = "# Phase 1\n\n## Constraints\n\n- Keep the API stable\n- Never delete tests\n"
CARRIED = "# Phase 2\n\nStill: keep the API stable. Never delete tests.\n"
CHECKPOINTED = "# Phase\n\nSave a checkpoint of the state.\n"

# (rule, files, first finding's (file, line)) -- line None for file-level findings
TRIGGERS: list[tuple[str, dict[str, str], tuple[str, int | None]]] = [
    (
        "context.unbounded_history",
        {"phases/01-a.md": phase("state.history.push(result);")},
        ("phases/01-a.md", 4),
    ),
    (
        "context.unbounded_history",
        {"phases/01-a.md": phase("messages.append(reply)", "python")},
        ("phases/01-a.md", 4),
    ),
    (
        "context.unbounded_history",
        {
            "phases/01-a.md": phase(
                "const batchResults = []\nfor (const batch of batches) {\n"
                "  batchResults.push(run(batch))\n"
                "  Task({ prompt: `Before: ${batchResults.join(', ')}` })\n}"
            )
        },
        ("phases/01-a.md", 6),
    ),
    (
        "context.file_read_into_prompt",
        {"phases/01-a.md": phase("Task({ prompt: `Review ${Read(file)}` });")},
        ("phases/01-a.md", 4),
    ),
    (
        "context.file_read_into_prompt",
        {
            "phases/01-a.md": phase(
                "const spec = Read('specs/a.md');\nTask({ prompt: `Follow ${spec}` });"
            )
        },
        ("phases/01-a.md", 5),
    ),
    (
        "context.state_dumped_into_prompt",
        {"phases/01-a.md": phase("Task({ prompt: `State: ${JSON.stringify(state)}` });")},
        ("phases/01-a.md", 4),
    ),
    (
        "context.oversized_phase_file",
        {"phases/01-a.md": "# Big\n" + "x" * MAX_PHASE_CHARS},
        ("phases/01-a.md", None),
    ),
    (
        "memory.constraints_not_propagated",
        {"phases/01-a.md": CONSTRAINED, "phases/02-b.md": "# Phase 2\n\nDo it.\n"},
        ("phases/02-b.md", None),
    ),
    (
        "memory.phase_without_checkpoint",
        {f"phases/0{i}-p.md": "# Phase\n" for i in (1, 2, 3)},
        ("phases/01-p.md", None),
    ),
    (
        "dataflow.state_written_to_several_places",
        {
            "phases/01-a.md": phase("Write(`${workDir}/state.json`, s);"),
            "phases/02-b.md": phase("Write('.workflow/loop-state.json', s);"),
        },
        ("phases/01-a.md", 4),
    ),
    (
        "dataflow.inconsistent_field_names",
        {
            "phases/01-a.md": phase("state.iteration_count = 1;"),
            "phases/02-b.md": phase("if (state.iterationCount > 3) stop();"),
        },
        ("phases/02-b.md", 4),
    ),
    (
        "dataflow.json_parse_unvalidated",
        {"phases/01-a.md": phase("const data = JSON.parse(text);")},
        ("phases/01-a.md", 4),
    ),
    (
        "dataflow.json_parse_unvalidated",
        {"phases/01-a.md": phase("data = json.loads(text)", "python")},
        ("phases/01-a.md", 4),
    ),
    (
        "agent.call_without_error_handling",
        {"phases/01-a.md": phase("const r = Task({ prompt: 'x' });")},
        ("phases/01-a.md", 4),
    ),
    (
        "agent.call_without_error_handling",
        {"phases/01-a.md": phase("ccw cli -p 'analyse' --tool gemini", "bash")},
        ("phases/01-a.md", 4),
    ),
    (
        # the next step reads the result but says nothing of a failed call
        "agent.call_without_error_handling",
        {
            "phases/01-a.md": "# Phase\n\n### Step 4: Review\n\n```bash\n"
            "ccw cli -p 'review' --tool gemini\n```\n\n### Step 5: Evaluate\n\n"
            "| Result | Action |\n|---|---|\n| No issues | Proceed to phase 3 |\n"
        },
        ("phases/01-a.md", 6),
    ),
    (
        "agent.result_unvalidated",
        {"phases/01-a.md": phase("const r = Task({\n  prompt: 'x'\n});\nstate.plan = r.plan;")},
        ("phases/01-a.md", 4),
    ),
    (
        "agent.nested_agent_call",
        {
            "phases/01-a.md": phase(
                "Task({\n  prompt: `Explore, then use the Task tool to review each file`\n});"
            )
        },
        ("phases/01-a.md", 4),
    ),
    (
        "agent.nested_agent_call",
        {"phases/01-a.md": phase("Task({ prompt: `run ${Task({ prompt: 'inner' })}` });")},
        ("phases/01-a.md", 4),
    ),
]

QUIET: list[tuple[str, dict[str, str]]] = [
    (
        "context.unbounded_history",
        {
            "phases/01-a.md": phase(
                "state.history.push(result);\nstate.history = state.history.slice(-10);"
            )
        },
    ),
    ("context.unbounded_history", {"phases/01-a.md": phase("state.results_count += 1;")}),
    (
        # one pass over a collection into a list made here, read once after the loop: bounded
        "context.unbounded_history",
        {
            "phases/01-a.md": phase(
                "const searchResults = []\nfor (const keyword of keywords) {\n"
                "  searchResults.push({ keyword, results: Grep(keyword) })\n}\n"
                "Write(path, `${searchResults.map(r => r.keyword).join(', ')}`)"
            )
        },
    ),
    (
        "context.file_read_into_prompt",
        {"phases/01-a.md": phase("Task({ prompt: `Review the file at ${path}` });")},
    ),
    (
        "context.state_dumped_into_prompt",
        {"phases/01-a.md": phase("Write(statePath, JSON.stringify(state, null, 2));")},
    ),
    (
        "context.oversized_phase_file",
        {"phases/01-a.md": "# Small\n", "specs/big.md": "x" * (MAX_PHASE_CHARS + 1)},
    ),
    (
        "memory.constraints_not_propagated",
        {"phases/01-a.md": CONSTRAINED, "phases/02-b.md": CARRIED},
    ),
    ("memory.constraints_not_propagated", {"phases/01-a.md": CONSTRAINED}),
    (
        "memory.phase_without_checkpoint",
        {
            "phases/01-p.md": CHECKPOINTED,
            "phases/02-p.md": CHECKPOINTED,
            "phases/03-p.md": "# Last\n",
        },
    ),
    ("memory.phase_without_checkpoint", {f"phases/0{i}-p.md": "# Phase\n" for i in (1, 2)}),
    (
        "dataflow.state_written_to_several_places",
        {
            "phases/01-a.md": phase("Write(`${workDir}/state.json`, s);"),
            "phases/02-b.md": phase(
                "Write(`${work_dir}/state.json`, s);\nWrite(`${workDir}/state-backup.json`, s);"
            ),
        },
    ),
    (
        "dataflow.inconsistent_field_names",
        {
            "phases/01-a.md": phase("state.iteration_count = 1;"),
            "phases/02-b.md": phase("if (state.iteration_count > 3) stop();"),
        },
    ),
    (
        "dataflow.json_parse_unvalidated",
        {
            "phases/01-a.md": phase(
                "const data = JSON.parse(text);\n"
                "if (typeof data !== 'object') throw new Error('bad');"
            )
        },
    ),
    (
        "agent.call_without_error_handling",
        {
            "phases/01-a.md": phase(
                "try {\n  const r = Task({ prompt: 'x' });\n"
                "} catch (e) {\n  state.errors.push(e);\n}"
            )
        },
    ),
    (
        # the next step, which reads the result, says what to do when the call failed
        "agent.call_without_error_handling",
        {
            "phases/01-a.md": "# Phase\n\n### Step 4: Review\n\n```bash\n"
            "ccw cli -p 'review' --tool gemini\n```\n\n### Step 5: Evaluate\n\n"
            "| Result | Action |\n|---|---|\n| No issues | Proceed to phase 3 |\n"
            "| Review failed/timeout | Ask the user whether to proceed or retry |\n"
        },
    ),
    (
        "agent.result_unvalidated",
        {
            "phases/01-a.md": phase(
                "const r = Task({ prompt: 'x' });\nif (!r) throw new Error('no result');"
            )
        },
    ),
    ("agent.result_unvalidated", {"phases/01-a.md": phase("const r = JSON.parse(text);")}),
    (
        "agent.nested_agent_call",
        {
            "phases/01-a.md": phase(
                "Task({ prompt: 'Review the files' });\nTask({ prompt: 'Summarise' });"
            )
        },
    ),
]


def _ids(table: Sequence[tuple[object, ...]]) -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for row in table:
        name = str(row[0])
        seen[name] = seen.get(name, 0) + 1
        ids.append(f"{name}-{seen[name]}")
    return ids


@pytest.mark.parametrize(
    ("rule", "files", "where"),
    TRIGGERS + BLIND_TRIGGERS,
    ids=_ids(TRIGGERS) + [f"blind-{i}" for i in _ids(BLIND_TRIGGERS)],
)
def test_rule_triggers(
    rule: str,
    files: dict[str, str],
    where: tuple[str, int | None],
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """The rule finds the problem, at the right file and line."""
    findings = RULES[rule].check(skill_of(files))
    assert findings, f"{rule} found nothing"
    assert (findings[0].file, findings[0].line) == where


@pytest.mark.parametrize(
    ("rule", "files"),
    QUIET + BLIND_QUIET,
    ids=_ids(QUIET) + [f"blind-{i}" for i in _ids(BLIND_QUIET)],
)
def test_rule_stays_quiet(
    rule: str, files: dict[str, str], skill_of: Callable[[dict[str, str]], Skill]
) -> None:
    """The rule finds nothing in a skill without the problem."""
    assert RULES[rule].check(skill_of(files)) == []


def test_every_rule_has_a_triggering_and_a_quiet_case() -> None:
    """No rule lacks a test of each kind."""
    assert {row[0] for row in TRIGGERS} == set(RULES)
    assert {row[0] for row in QUIET} == set(RULES)


def test_history_growing_inside_a_loop_is_critical(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """Unbounded history inside a loop grows every iteration: critical, not merely high."""
    code = "while (!done) {\n  state.history.push(step());\n}"
    findings = RULES["context.unbounded_history"].check(skill_of({"phases/01-a.md": phase(code)}))
    assert [f.severity for f in findings] == ["critical"]


def test_constraints_in_a_bracket_tag_are_recognised(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """A [CONSTRAINTS] tag (CCW's prompt style) marks constraints as a heading does."""
    first = "# Phase 1\n\n[CONSTRAINTS]\n- Use only the public API\n"
    findings = RULES["memory.constraints_not_propagated"].check(
        skill_of({"phases/01-a.md": first, "phases/02-b.md": "# Phase 2\n"})
    )
    assert findings[0].data["missing"] == "Use only the public API"


def test_orchestrator_and_state_schema_are_not_phases(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """The orchestrator and the state schema are not steps whose constraints must carry."""
    files = {
        "phases/01-a.md": CONSTRAINED,
        "phases/orchestrator.md": "# O\n",
        "phases/state-schema.md": "# S\n",
    }
    assert RULES["memory.constraints_not_propagated"].check(skill_of(files)) == []


def test_diagnosis_result_lists_checked_and_matched_patterns(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """A DiagnosisResult names every rule checked, the ones matched, their evidence and advice."""
    skill = skill_of(
        {
            "phases/01-a.md": phase(
                "state.history.push(r);\nTask({ prompt: `${JSON.stringify(state)}` });"
            )
        }
    )
    result, drafts = diagnose("context", skill)
    assert result.details.patterns_checked == [
        r.name for r in RULES.values() if r.area == "context"
    ]
    assert result.details.patterns_matched == [
        "context.unbounded_history",
        "context.state_dumped_into_prompt",
    ]
    assert [(e.file, e.line, e.severity) for e in result.details.evidence] == [
        ("phases/01-a.md", 4, "high"),
        ("phases/01-a.md", 5, "medium"),
    ]
    assert len(result.details.recommendations) == 2
    assert (result.status, result.issues_found, result.severity) == ("completed", 2, "high")
    assert [d.severity for d in drafts] == ["high", "medium"]


def test_findings_of_one_rule_in_one_file_make_one_issue(
    skill_of: Callable[[dict[str, str]], Skill],
) -> None:
    """Two findings of a rule in one file are one issue with both lines as evidence."""
    skill = skill_of({"phases/01-a.md": phase("a.history.push(1);\nb.history.push(2);")})
    _result, drafts = diagnose("context", skill)
    [issue] = number_issues(drafts, [], [])
    assert issue.id == "ISS-001"
    assert issue.type == "context_explosion"
    assert (issue.location.file, issue.location.line_start, issue.location.line_end) == (
        "phases/01-a.md",
        4,
        5,
    )
    assert issue.location.phase == "01-a"
    assert len(issue.evidence) == 2


def test_issue_ids_are_stable_across_rounds(skill_of: Callable[[dict[str, str]], Skill]) -> None:
    """A re-diagnosis reuses the id of the same rule in the same file; new issues get new ids."""
    first_skill = skill_of({"phases/01-a.md": phase("a.history.push(1);")})
    _r, drafts = diagnose("context", first_skill)
    first = number_issues(drafts, [], ["ISS-007"])
    assert [i.id for i in first] == ["ISS-008"]
    again = number_issues(drafts, first, ["ISS-007", "ISS-008"])
    assert [i.id for i in again] == ["ISS-008"]
    other = skill_of({"phases/01-a.md": phase("Task({ prompt: `${JSON.stringify(state)}` });")})
    _r, other_drafts = diagnose("context", other)
    assert [i.id for i in number_issues(other_drafts, first, ["ISS-008"])] == ["ISS-009"]
