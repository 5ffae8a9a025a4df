"""Fixes: mechanical changes, proposals, application with backups, verification, rollback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fsm_machines.skill_tuning.backup import tree_bytes
from fsm_machines.skill_tuning.diagnosis.rule import AREAS
from fsm_machines.skill_tuning.diagnosis.run import RULES, diagnose, number_issues
from fsm_machines.skill_tuning.fixes.apply import (
    apply_by_agent,
    apply_mechanical,
    select_batch,
    settle,
)
from fsm_machines.skill_tuning.fixes.mechanical import mechanical_changes
from fsm_machines.skill_tuning.fixes.proposal import propose
from fsm_machines.skill_tuning.fixes.verify import verification_problems
from fsm_machines.skill_tuning.model import AppliedFix, FileChange, Fix, Issue
from fsm_machines.skill_tuning.skill import Skill, read_skill

from fsm.process.executor import AgentCommand, SubprocessExecutor

SKILL = "---\nname: probe\n---\n# Probe skill\n"
CONSTRAINED = "# Phase 1\n\n## Constraints\n\n- Keep the API stable\n- Never delete tests\n"


def phase(code: str, lang: str = "javascript") -> str:
    """A phase file with one code block."""
    return f"# Phase\n\n```{lang}\n{code}\n```\n"


MECHANICAL: list[tuple[str, str, dict[str, str]]] = [
    (
        "sliding_window",
        "context.unbounded_history",
        {"phases/01-a.md": phase("state.history.push(r);")},
    ),
    (
        "sliding_window",
        "context.unbounded_history",
        {
            "phases/01-a.md": phase(
                "log = log_history.concat(r);\nlog_history = log_history.concat(r);"
            )
        },
    ),
    (
        "sliding_window",
        "context.unbounded_history",
        {"phases/01-a.md": phase("for x in xs:\n    messages.append(x)", "python")},
    ),
    (
        "constraint_injection",
        "memory.constraints_not_propagated",
        {"phases/01-a.md": CONSTRAINED, "phases/02-b.md": "# Phase 2\n\nKeep the API stable.\n"},
    ),
    (
        "checkpoint_restore",
        "memory.phase_without_checkpoint",
        {
            f"phases/0{i}-p.md": phase(f"const a{i} = Read(`${{workDir}}/in.md`);")
            for i in (1, 2, 3)
        },
    ),
    (
        "schema_enforcement",
        "dataflow.json_parse_unvalidated",
        {"phases/01-a.md": phase("const data = JSON.parse(\n  text\n);\nuse(data);")},
    ),
    (
        "schema_enforcement",
        "dataflow.json_parse_unvalidated",
        {"phases/01-a.md": phase("data = json.loads(text)", "python")},
    ),
    (
        "schema_enforcement",
        "dataflow.inconsistent_field_names",
        {
            "phases/01-a.md": phase("state.iteration_count = 1;\nstate.iteration_count += 1;"),
            "phases/02-b.md": phase("if (state.iterationCount > 3) stop();"),
        },
    ),
    (
        "schema_enforcement",
        "agent.result_unvalidated",
        {"phases/01-a.md": phase("const r = Task({\n  prompt: 'x'\n});\nstate.plan = r.plan;")},
    ),
]

JUDGEMENT: list[tuple[str, dict[str, str]]] = [
    ("context.unbounded_history", {"phases/01-a.md": phase("state.context += Read(path);")}),
    ("context.unbounded_history", {"phases/01-a.md": phase("history.push(x)", "bash")}),
    ("dataflow.json_parse_unvalidated", {"phases/01-a.md": phase("return JSON.parse(text);")}),
    ("context.file_read_into_prompt", {"phases/01-a.md": phase("Task({ prompt: `${Read(f)}` });")}),
    (
        "agent.nested_agent_call",
        {"phases/01-a.md": phase("Task({ prompt: 'use the Task tool' });")},
    ),
]


@pytest.fixture
def skill_at(make_skill: Callable[..., Path]) -> Callable[[dict[str, str]], Path]:
    """Write a skill folder of SKILL.md plus the given files."""
    return lambda files: make_skill({"SKILL.md": SKILL, **files})


def issues_of(rule: str, skill: Skill) -> list[Issue]:
    """The issues ``rule``'s area reports for ``rule``."""
    _result, drafts = diagnose(RULES[rule].area, skill)
    return [i for i in number_issues(drafts, [], []) if i.rule == rule]


def write_changes(root: Path, fix_changes: list[FileChange]) -> None:
    """Write the new contents of ``fix_changes`` into the skill at ``root``."""
    for change in fix_changes:
        (root / change.file).write_text(change.new_content or "", encoding="utf-8")


@pytest.mark.parametrize(
    ("strategy", "rule", "files"),
    MECHANICAL,
    ids=[f"{r}-{i}" for i, (_s, r, _f) in enumerate(MECHANICAL)],
)
def test_mechanical_fix_removes_its_issue(
    strategy: str, rule: str, files: dict[str, str], skill_at: Callable[[dict[str, str]], Path]
) -> None:
    """The change computed for the issue, once written, makes the rule stop finding it."""
    root = skill_at(files)
    skill = read_skill(root)
    assert RULES[rule].strategy == strategy
    issues = issues_of(rule, skill)
    assert issues
    for issue in issues:
        changes = mechanical_changes(read_skill(root), issue, window=10)
        assert changes, f"no mechanical change for {issue.description}"
        assert all(c.action == "modify" and c.diff for c in changes)
        write_changes(root, changes)
    assert RULES[rule].check(read_skill(root)) == []


@pytest.mark.parametrize(
    ("rule", "files"), JUDGEMENT, ids=[f"{r}-{i}" for i, (r, _f) in enumerate(JUDGEMENT)]
)
def test_judgement_fixes_have_no_mechanical_change(
    rule: str, files: dict[str, str], skill_at: Callable[[dict[str, str]], Path]
) -> None:
    """Where no safe mechanical change exists the fix is left to judgement."""
    skill = read_skill(skill_at(files))
    [issue] = issues_of(rule, skill)
    assert mechanical_changes(skill, issue, window=10) is None


def test_sliding_window_keeps_the_configured_number_of_entries(
    skill_at: Callable[[dict[str, str]], Path],
) -> None:
    """The window size of a sliding_window fix comes from the option."""
    skill = read_skill(skill_at({"phases/01-a.md": phase("state.history.push(r);")}))
    [issue] = issues_of("context.unbounded_history", skill)
    [change] = mechanical_changes(skill, issue, window=3) or []
    assert "state.history.splice(0, Math.max(0, state.history.length - 3));" in (
        change.new_content or ""
    )


def test_constraint_injection_copies_only_the_missing_constraints(
    skill_at: Callable[[dict[str, str]], Path],
) -> None:
    """Constraints a later phase already states are not copied again."""
    files = {"phases/01-a.md": CONSTRAINED, "phases/02-b.md": "# Phase 2\n\nKeep the API stable.\n"}
    skill = read_skill(skill_at(files))
    [issue] = issues_of("memory.constraints_not_propagated", skill)
    [change] = mechanical_changes(skill, issue, window=10) or []
    added = (change.new_content or "").removeprefix(files["phases/02-b.md"])
    assert "- Never delete tests" in added
    assert "Keep the API stable" not in added


def _proposals(root: Path, *, can_delegate: bool) -> tuple[list[Issue], list[Fix], list[str]]:
    skill = read_skill(root)
    issues: list[Issue] = []
    for area in AREAS:
        _r, drafts = diagnose(area, skill)
        issues += number_issues(drafts, issues, [i.id for i in issues])
    proposals = propose(issues, skill, [], set(), can_delegate=can_delegate, window=10)
    return issues, proposals.fixes, proposals.pending


MIXED = {
    "phases/01-a.md": phase(
        "try {\n  Task({ prompt: `${Read(f)}` });\n} catch (e) {\n  state.errors.push(e);\n}"
    ),
    "phases/02-b.md": phase("state.history.push(r);"),
}


@pytest.mark.parametrize(
    ("can_delegate", "pending"),
    [(False, ["FIX-001"]), (True, ["FIX-001", "FIX-002"])],
    ids=["no-fix-tool", "fix-tool"],
)
def test_judgement_fixes_are_pending_only_with_a_fix_tool(
    can_delegate: bool, pending: list[str], skill_at: Callable[[dict[str, str]], Path]
) -> None:
    """Mechanical fixes are always pending; judgement fixes only when an agent can make them."""
    issues, fixes, pend = _proposals(skill_at(MIXED), can_delegate=can_delegate)
    assert [(f.id, f.strategy, bool(f.changes)) for f in fixes] == [
        ("FIX-001", "sliding_window", True),
        ("FIX-002", "context_summarization", False),
    ]
    assert [f.issue_ids for f in fixes] == [
        [i.id] for i in sorted(issues, key=lambda i: (i.priority, i.id))
    ]
    assert pend == pending


def test_applied_fixes_are_not_proposed_again(skill_at: Callable[[dict[str, str]], Path]) -> None:
    """A fix that was applied keeps its record; its issue gets no second proposal."""
    root = skill_at(MIXED)
    issues, fixes, _pending = _proposals(root, can_delegate=True)
    again = propose(issues, read_skill(root), fixes, {"FIX-001"}, can_delegate=True, window=10)
    assert [f.id for f in again.fixes] == ["FIX-001", "FIX-002"]
    assert again.pending == ["FIX-002"]


def test_a_batch_holds_mechanical_fixes_on_distinct_files(
    skill_at: Callable[[dict[str, str]], Path],
) -> None:
    """One step applies mechanical fixes whose files do not overlap; agent fixes wait."""
    files = {
        "phases/01-a.md": CONSTRAINED,
        "phases/02-b.md": phase(
            "state.history.push(r);\nconst d = JSON.parse(Read(`${workDir}/t.json`));"
        ),
        "phases/03-c.md": "# Phase 3\n" + CONSTRAINED.split("\n", 1)[1] + "checkpoint\n",
    }
    _issues, fixes, pending = _proposals(skill_at(files), can_delegate=True)
    batch = select_batch(pending, {f.id: f for f in fixes})
    touched = [c.file for f in batch for c in f.changes]
    assert len(touched) == len(set(touched)) >= 2
    assert all(f.changes for f in batch)


def _apply_first(root: Path, backup: Path) -> tuple[AppliedFix, list[Issue], Skill]:
    """Apply the first proposal; return its record, its issues, and the skill before it."""
    before = read_skill(root)
    issues, fixes, _pending = _proposals(root, can_delegate=False)
    fix = fixes[0]
    record, _note = apply_mechanical(fix, root, backup, "2026-01-01T00:00:00.000Z", "backups/b")
    assert record.success and record.verification_result == "pending" and record.rollback_available
    return record, [i for i in issues if i.id in fix.issue_ids], before


def test_applying_a_fix_backs_up_then_changes_the_files(
    skill_at: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    """The fix's files are copied under the backup first, then really changed."""
    root = skill_at({"phases/01-a.md": phase("state.history.push(r);")})
    before = (root / "phases/01-a.md").read_bytes()
    _apply_first(root, tmp_path / "work" / "before-FIX-001")
    assert (tmp_path / "work" / "before-FIX-001" / "phases/01-a.md").read_bytes() == before
    assert (root / "phases/01-a.md").read_bytes() != before


def test_a_stale_proposal_is_not_applied(
    skill_at: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    """A file changed since the proposal was computed is left alone; the fix fails."""
    root = skill_at({"phases/01-a.md": phase("state.history.push(r);")})
    _issues, fixes, _pending = _proposals(root, can_delegate=False)
    (root / "phases/01-a.md").write_text("edited by hand\n", encoding="utf-8")
    record, note = apply_mechanical(fixes[0], root, tmp_path / "b", "t", "b")
    assert not record.success and "changed since" in note
    assert record.failure_reason == note
    assert (root / "phases/01-a.md").read_text(encoding="utf-8") == "edited by hand\n"


def test_a_fix_that_removes_its_issue_and_breaks_nothing_passes(
    skill_at: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    """A fix whose issue is gone from a full re-diagnosis, with no new finding and no
    consistency problem, is kept with its issues resolved."""
    root = skill_at({"phases/01-a.md": phase("state.history.push(r);")})
    backup = tmp_path / "before-FIX-001"
    record, issues, before = _apply_first(root, backup)
    changed = tree_bytes(root)
    problems = verification_problems(before, read_skill(root), issues)
    assert problems == []
    settled = settle(record, problems, issues, root, backup)
    assert (settled.verification_result, settled.issues_resolved) == ("pass", [issues[0].id])
    assert tree_bytes(root) == changed


def test_a_fix_that_fails_verification_is_restored_byte_for_byte(
    skill_at: Callable[[dict[str, str]], Path], tmp_path: Path
) -> None:
    """A fix with a verification problem is rolled back to the exact original bytes (CRLF
    kept), and the record says rolled_back with the problem as its reason."""
    root = skill_at({"phases/01-a.md": phase("state.history.push(r);\r\nmore();")})
    original = tree_bytes(root)
    backup = tmp_path / "before-FIX-001"
    record, issues, _before = _apply_first(root, backup)
    assert tree_bytes(root) != original
    settled = settle(record, ["adds a finding: x"], issues, root, backup)
    assert (settled.verification_result, settled.rollback_available) == ("rolled_back", False)
    assert settled.failure_reason == "adds a finding: x"
    assert tree_bytes(root) == original


def test_agent_fix_records_what_the_agent_changed(
    skill_at: Callable[[dict[str, str]], Path],
    tmp_path: Path,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """The fix agent works in the skill folder; its changes are read back as FileChanges."""
    root = skill_at(MIXED)
    issues, fixes, _pending = _proposals(root, can_delegate=True)
    agent = agent_script(
        """
        import pathlib, sys
        assert "FIX-002" in sys.argv[1]
        path = pathlib.Path("phases/01-a.md")
        path.write_text(path.read_text().replace("${Read(f)}", "the file at ${f}"))
        pathlib.Path("specs").mkdir()
        pathlib.Path("specs/notes.md").write_text("notes")
        """
    )
    executor = SubprocessExecutor(tmp_path, agents={"codex": agent})
    record, _note = apply_by_agent(
        fixes[1],
        issues,
        root,
        tmp_path / "before-FIX-002",
        stamp=("t", "b"),
        executor=executor,
        tool="codex",
        timeout=30,
    )
    assert record.success
    assert [(c.file, c.action) for c in record.changes_made or []] == [
        ("phases/01-a.md", "modify"),
        ("specs/notes.md", "create"),
    ]
    assert RULES["context.file_read_into_prompt"].check(read_skill(root)) == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("import sys\nsys.exit(3)\n", id="agent-fails"),
        pytest.param("print('nothing to do')\n", id="agent-changes-nothing"),
    ],
)
def test_a_failed_agent_fix_leaves_the_skill_untouched(
    body: str,
    skill_at: Callable[[dict[str, str]], Path],
    tmp_path: Path,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """An agent that fails or changes nothing is a failed fix and the skill is as before."""
    root = skill_at(MIXED)
    original = tree_bytes(root)
    issues, fixes, _pending = _proposals(root, can_delegate=True)
    executor = SubprocessExecutor(tmp_path, agents={"codex": agent_script(body)})
    record, note = apply_by_agent(
        fixes[1],
        issues,
        root,
        tmp_path / "before-FIX-002",
        stamp=("t", "b"),
        executor=executor,
        tool="codex",
        timeout=30,
    )
    assert (record.success, record.verification_result, record.rollback_available) == (
        False,
        "fail",
        False,
    )
    assert "agent codex failed" in note
    assert tree_bytes(root) == original
