"""Whole runs on sample skills, driven by the real engine (fsm.testing's harness and
ControlPlane), checking what a user reads: the run's outcome and exit code, ``state.json``,
``tuning-report.md``, the backups, the skill files themselves, and the journal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from fsm_machines.skill_tuning.backup import restore_original, tree_bytes
from fsm_machines.skill_tuning.model import TuningState

from fsm.base.errors import ControlRefusedError
from fsm.engine.control import ControlPlane
from fsm.model.outcome import RunResult
from fsm.process.executor import AgentCommand
from fsm.testing import Driver
from fsm.view.inspect import replay, status
from tests.conftest import CliResult
from tests.machines.skill_tuning.conftest import MACHINE_YAML, Tuning, tune
from tests.machines.skill_tuning.test_model import SEED_INITIAL_STATE

ROUND = ["diagnose_context", "diagnose_memory", "diagnose_dataflow", "diagnose_agent", "verify"]
SEED_KEYS = set(json.loads(SEED_INITIAL_STATE))
SKILL = ".claude/skills/sample-skill"
WINDOW_LINE = (
    "  state.history.splice(0, Math.max(0, state.history.length - 10));"
    "  // sliding window: keep the last 10\n"
)
CARRIED_CONSTRAINTS = (
    "\n## Constraints (carried from phases/01-collect.md)\n\n"
    "The constraints of the first phase still hold in this phase:\n\n"
    "- Only read files under src/\n"
    "- Never modify the input files\n"
)


def events(result: RunResult) -> list[str | None]:
    """The events a run took, failed steps included."""
    return [step.event for step in result.steps]


def report(tuning: Tuning, instance: Driver[TuningState]) -> str:
    """The tuning report the run wrote, found through the document's final_report."""
    doc = instance.doc
    assert doc.final_report == f"{doc.work_dir}/tuning-report.md"
    return (tuning.root / doc.final_report).read_text(encoding="utf-8")


def written_outside(
    before: dict[str, bytes], after: dict[str, bytes], instance: Driver[TuningState]
) -> set[str]:
    """Workspace files created, changed or removed outside the skill and the work dir."""
    allowed = (f"{SKILL}/", f".workflow/.scratchpad/{instance.id}/")
    changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    return {path for path in changed if not path.startswith(allowed)}


def assert_consistent(
    tuning: Tuning, instance: Driver[TuningState], before: dict[str, bytes]
) -> None:
    """state.json validates with every template key, the journal replays to it, and nothing
    was written outside the skill folder and the instance's work dir."""
    data = instance.data
    TuningState.model_validate(data)
    assert data.keys() >= SEED_KEYS
    assert replay(instance.instance).problems == []
    assert written_outside(before, tree_bytes(tuning.root), instance) == set()


def test_a_clean_skill_passes_at_once(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """A skill without problems is diagnosed once, passes the gate, exits 0 and is untouched;
    the whole skill is still backed up."""
    root = make_skill(samples.clean)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    before = tree_bytes(tuning.root)
    result = instance.run(max_steps=200)
    assert (result.outcome, result.exit_code, result.state) == ("completed", 0, "completed")
    assert events(result) == ["init", *ROUND, "complete"]
    doc = instance.doc
    assert (doc.status, doc.quality_score, doc.quality_gate, doc.iteration_count) == (
        "completed",
        100,
        "pass",
        1,
    )
    assert doc.issues == [] and doc.applied_fixes == [] and doc.proposed_fixes == []
    assert all(h.completed_at and h.result == "success" for h in doc.action_history)
    assert tree_bytes(root) == original
    assert tree_bytes(tuning.root / f"{doc.backup_dir}/sample-skill-backup") == original
    text = report(tuning, instance)
    assert "- Outcome: quality gate pass: 100/100, no issue left; no fix applied; 1 iteration" in (
        text
    )
    assert "- Quality score: 100 / 100, gate **pass**" in text
    assert status(instance.instance).summary["quality"] == "100/100, gate pass"
    assert_consistent(tuning, instance, before)


def test_a_fixable_skill_is_fixed_verified_and_passes(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """Stepping one transaction at a time (state.json valid after each), mechanical fixes
    change the files, pass verification and the gate passes within the iteration limit."""
    root = make_skill(samples.fixable)
    original = tree_bytes(root)
    instance = tune(tuning, root, max_iterations=3)
    before = tree_bytes(tuning.root)
    instance.control("start", reason="scenario")
    engine = instance.engine
    taken: list[str | None] = []
    for _ in range(40):
        step = engine.step()
        if step.outcome != "applied":
            break
        taken.append(step.event)
        data = instance.data
        TuningState.model_validate(data)
        assert data.keys() >= SEED_KEYS, step.event
    assert (step.outcome, step.state) == ("final", "completed")
    assert taken == ["init", *ROUND, "apply_fix", "iterate", *ROUND, "complete"]
    doc = instance.doc
    assert (doc.status, doc.quality_gate, doc.iteration_count) == ("completed", "pass", 2)
    assert [(r.fix_id, r.success, r.verification_result) for r in doc.applied_fixes] == [
        ("FIX-001", True, "pass"),
        ("FIX-002", True, "pass"),
    ]
    now = tree_bytes(root)
    collect = original["phases/01-collect.md"].decode()
    push = "  state.history.push(result);\n"
    assert now["phases/01-collect.md"].decode() == collect.replace(push, push + WINDOW_LINE)
    analyse = original["phases/02-analyse.md"].decode()
    assert now["phases/02-analyse.md"].decode() == analyse + CARRIED_CONSTRAINTS
    assert {k: v for k, v in now.items() if not k.startswith("phases/0")} == {
        k: v for k, v in original.items() if not k.startswith("phases/0")
    }
    fix_backup = tuning.root / f"{doc.backup_dir}/before-FIX-001/phases/01-collect.md"
    assert fix_backup.read_bytes() == original["phases/01-collect.md"]
    text = report(tuning, instance)
    assert "- **FIX-001** (sliding_window, ISS-001): kept: applied and verified." in text
    assert "- Iterations: 2 of 3" in text
    assert_consistent(tuning, instance, before)


def test_a_fix_that_does_not_remove_its_issue_is_rolled_back(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning: Tuning,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """An agent fix that leaves its issue in place fails verification and the skill is
    restored byte for byte (the file it created removed); with nothing left to fix and the gate
    at review, the run fails (exit 4) saying so."""
    root = make_skill(samples.judgement)
    original = tree_bytes(root)
    agent = agent_script(
        """
        import pathlib
        for path in sorted(pathlib.Path.cwd().rglob("*.md")):
            path.write_text(path.read_text() + "<!-- looked at it -->\\n")
        pathlib.Path("notes.md").write_text("created by the agent")
        """
    )
    instance = tune(tuning, root, agents={"codex": agent}, options={"fix_tool": "codex"})
    before = tree_bytes(tuning.root)
    engine = instance.engine
    first = engine.run(max_steps=13)
    assert events(first) == ["init", *ROUND, "apply_fix", "iterate", *ROUND]
    assert first.outcome == "limit"
    doc = instance.doc
    assert [(r.fix_id, r.verification_result, r.rollback_available) for r in doc.applied_fixes] == [
        ("FIX-001", "rolled_back", False)
    ]
    assert doc.applied_fixes[0].failure_reason == (
        "ISS-001 (agent.call_without_error_handling) is still reported in phases/01-explore.md "
        "(1 finding(s))"
    )
    assert tree_bytes(root) == original
    rest = engine.run(max_steps=200)
    assert events(rest) == ["apply_fix", "iterate", *ROUND, "give_up"]
    assert (rest.outcome, rest.exit_code) == ("failed", 4)
    doc = instance.doc
    assert [(r.fix_id, r.verification_result) for r in doc.applied_fixes] == [
        ("FIX-001", "rolled_back"),
        ("FIX-002", "rolled_back"),
    ]
    assert tree_bytes(root) == original
    assert (doc.status, doc.quality_gate) == ("failed", "review")
    assert doc.failure_reason == (
        "quality gate review: 70/100, 2 high; 2 issues left unfixed after 3 iterations "
        "(2 fixes rolled back)"
    )
    assert "- **FIX-002** (orchestrator_refactor, ISS-002): rolled back: ISS-002" in (
        report(tuning, instance)
    )
    assert_consistent(tuning, instance, before)


def test_judgement_fixes_stay_proposed_without_a_fix_tool(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """Without fix_tool nothing that needs judgement is applied: the gate stays at review and
    the run fails at once (exit 4), its reason saying what is left and how to get it fixed."""
    root = make_skill(samples.judgement)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    result = instance.run(max_steps=200)
    assert events(result) == ["init", *ROUND, "give_up"]
    assert (result.outcome, result.exit_code, result.state) == ("failed", 4, "failed")
    doc = instance.doc
    reason = (
        "quality gate review: 70/100, 2 high; 2 issues left unfixed after 1 iteration (2 need "
        "judgement: set fix_tool to give them to an agent, or fix by hand)"
    )
    assert (doc.status, doc.failure_reason) == ("failed", reason)
    assert (doc.errors[-1].action, doc.errors[-1].message) == ("action-complete", reason)
    assert f"- Outcome: {reason}" in report(tuning, instance)
    assert [f.strategy for f in doc.proposed_fixes] == ["orchestrator_refactor"] * 2
    assert doc.pending_fixes == [] and doc.applied_fixes == []
    assert tree_bytes(root) == original
    assert "needs judgement (an agent via fix_tool, or by hand)" in report(tuning, instance)


def test_repeated_failures_end_in_failed_at_max_errors(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """An action that keeps failing is retried until error_count reaches max_errors; the run
    then aborts into failed (exit 4) with a report and errors.json."""
    root = make_skill(samples.clean)
    instance = tune(tuning, root)
    before = tree_bytes(tuning.root)
    engine = instance.engine
    assert events(engine.run(max_steps=1)) == ["init"]
    (root / "SKILL.md").unlink()
    result = engine.run(max_steps=200)
    assert events(result) == ["diagnose_context"] * 3 + ["abort"]
    assert [step.outcome for step in result.steps] == ["failed"] * 3 + ["applied"]
    assert (result.outcome, result.exit_code, result.state) == ("failed", 4, "failed")
    doc = instance.doc
    assert (doc.status, doc.error_count, doc.max_errors) == ("failed", 3, 3)
    assert [(e.action, e.recoverable) for e in doc.errors] == [
        ("action-diagnose-context", False)
    ] * 3
    assert all("has no SKILL.md" in e.message for e in doc.errors)
    errors = json.loads(
        (
            instance.instance.store.paths(instance.instance.id).document.parent / "errors.json"
        ).read_text()
    )
    assert len(errors) == 3
    reason = (
        "aborted after 3 action failures (max_errors 3); last: action-diagnose-context: "
        "target skill folder has no SKILL.md"
    )
    assert (doc.failure_reason or "").startswith(reason)
    assert f"- Outcome: {reason}" in report(tuning, instance)
    assert_consistent(tuning, instance, before)


def test_the_iteration_limit_completes_the_run(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """When iteration_count reaches max_iterations before the gate passed, the run fails
    (exit 4) and says the limit was reached with fixes still untried."""
    root = make_skill(samples.fixable)
    instance = tune(tuning, root, max_iterations=1)
    result = instance.run(max_steps=200)
    assert events(result) == ["init", *ROUND, "exhaust"]
    assert (result.outcome, result.exit_code, result.state) == ("failed", 4, "failed")
    doc = instance.doc
    assert (doc.status, doc.quality_gate, doc.iteration_count) == ("failed", "review", 1)
    assert doc.failure_reason == (
        "quality gate review: 60/100, 2 high, 2 medium; 4 issues left unfixed after 1 iteration "
        "(iteration limit 1 reached; 4 fixes not tried)"
    )
    assert f"- Outcome: {doc.failure_reason}" in report(tuning, instance)


def test_pause_and_resume_mid_run(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """A paused instance takes no step (run exits 5) and keeps its place; resumed, it runs to
    the same end as an uninterrupted run."""
    root = make_skill(samples.fixable)
    instance = tune(tuning, root)
    before = tree_bytes(tuning.root)
    engine, control = instance.engine, ControlPlane(instance.instance)
    first = engine.run(max_steps=4)
    assert (first.outcome, first.state) == ("limit", "dataflow_diagnosed")
    control.apply("pause", actor="test", reason="lunch")
    paused = instance.data
    assert (paused["status"], paused["phase"]) == ("paused", "dataflow_diagnosed")
    held = engine.run(max_steps=200)
    assert (held.outcome, held.exit_code, held.steps) == ("paused", 5, [])
    assert engine.step().outcome == "blocked"
    assert instance.data == paused
    control.apply("resume", actor="test")
    rest = engine.run(max_steps=200)
    assert events(first) + events(rest) == [
        "init",
        *ROUND,
        "apply_fix",
        "iterate",
        *ROUND,
        "complete",
    ]
    assert (rest.outcome, instance.doc.quality_gate) == ("completed", "pass")
    assert_consistent(tuning, instance, before)


def test_stop_ends_the_run_and_the_original_is_restorable(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """A stop after fixes were applied ends the run in user_exit with a report; the backup
    taken by init holds the original bytes and restores them."""
    root = make_skill(samples.fixable)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    before = tree_bytes(tuning.root)
    engine, control = instance.engine, ControlPlane(instance.instance)
    assert events(engine.run(max_steps=7))[-1] == "apply_fix"
    assert tree_bytes(root) != original
    control.apply("stop", actor="test", reason="enough")
    doc = instance.doc
    assert (doc.status, doc.phase) == ("user_exit", "user_exit")
    result = engine.run(max_steps=200)
    assert (result.outcome, result.exit_code, result.state, result.steps) == (
        "failed",
        4,
        "user_exit",
        [],
    )
    with pytest.raises(ControlRefusedError):
        control.apply("resume", actor="test")
    text = report(tuning, instance)
    assert "- Outcome: stopped by the user" in text
    assert_consistent(tuning, instance, before)
    backup_dir = tuning.root / (doc.backup_dir or "")
    assert tree_bytes(backup_dir / "sample-skill-backup") == original
    assert f"`{doc.backup_dir}/sample-skill-backup/`" in text
    restore_original(root, backup_dir, "sample-skill")
    assert tree_bytes(root) == original


TARGET = ["--set", f"target_skill.path={SKILL}"]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        pytest.param(
            ["--set", "target_skill.path=nowhere"],
            "target skill folder does not exist: nowhere",
            id="missing",
        ),
        pytest.param(
            ["--set", "target_skill.path=.claude"],
            "target skill folder has no SKILL.md: .claude",
            id="no-skill-md",
        ),
        pytest.param([], "no target skill given", id="not-given"),
        pytest.param(
            ["--set", "target_skill.path=123"],
            "target skill folder does not exist: 123",
            id="a-number-is-a-folder-name",  # the path is text: --set gives it as written
        ),
        pytest.param(
            [*TARGET, "--set", "max_iterations=0"],
            "max_iterations must be at least 1, got 0",
            id="no-iterations",
        ),
        pytest.param(
            [*TARGET, "--set", "error_count=99"],
            "'error_count' cannot be set: the machine sets it",
            id="machine-owned",
        ),
        pytest.param(
            [*TARGET, "--set", "max_iterations=abc"],
            "inputs do not make a document: max_iterations: Input should be a valid integer",
            id="invalid-value",
        ),
    ],
)
def test_fsm_new_refuses_an_unusable_target_in_one_line(
    setting: list[str],
    message: str,
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tmp_path: Path,
    cli: Callable[..., CliResult],
) -> None:
    """fsm new with a missing target folder, one without SKILL.md, a limit that allows no
    iteration, a field the machine owns or a value of the wrong type exits 2 with one clear line
    naming the problem and creates nothing."""
    make_skill(samples.clean)
    result = cli("new", str(MACHINE_YAML), *setting)
    assert result.code == 2
    assert result.out == ""
    [line] = result.err.strip().splitlines()
    assert line.startswith("fsm: error: ") and message in line
    assert "Traceback" not in result.err
    assert not (tmp_path / ".workflow").exists()


def test_a_file_that_is_not_utf8_is_diagnosed_and_left_to_a_person(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """A phase file with a byte that is not UTF-8 on a line the rules quote is diagnosed (the
    byte shown as \\xNN in state.json), gets no mechanical fix (state.json could not carry its
    content) and keeps its bytes, while the other files are fixed; the issues left for a person
    keep the gate at review, so the run fails and says they need judgement."""
    root = make_skill(samples.fixable)
    phase = root / "phases/02-analyse.md"
    raw = phase.read_bytes().replace(b"files.json`));", b"files.json`)); const label = 'caf\xe9';")
    phase.write_bytes(raw)
    instance = tune(tuning, root, max_iterations=3)
    before = tree_bytes(tuning.root)
    result = instance.run(max_steps=200)
    assert (result.outcome, result.state) == ("failed", "failed")
    assert "(3 need judgement" in (instance.doc.failure_reason or "")
    assert phase.read_bytes() == raw
    text = (tuning.root / f".workflow/.scratchpad/{instance.id}/state.json").read_bytes()
    assert "caf\\\\xe9" in text.decode("utf-8")
    doc = instance.doc
    stuck = [f for f in doc.proposed_fixes if "not valid UTF-8" in (f.description or "")]
    assert stuck and all(not f.changes for f in stuck)
    assert any(r.verification_result == "pass" for r in doc.applied_fixes)
    assert_consistent(tuning, instance, before)


ONE_PASS_SEARCH = (
    "\n## Search\n\n```javascript\nconst searchResults = []\n"
    "for (const keyword of keywords) {\n"
    '  searchResults.push({ keyword, results: Grep({ pattern: keyword, path: "." }) })\n'
    "}\n"
    "Write(`${workDir}/understanding.md`, searchResults.map(r => r.keyword).join('\\n'))\n"
    "```\n"
)


def test_a_list_filled_in_one_pass_is_left_alone(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """A list made afresh and filled once per keyword, read after the loop, is no growing
    history: the run passes at once and the skill is untouched (a sliding window used to be
    appended to it, dropping the first keywords' results, and kept as a verified fix)."""
    files = dict(samples.clean)
    files["phases/02-analyse.md"] += ONE_PASS_SEARCH
    root = make_skill(files)
    original = tree_bytes(root)
    instance = tune(tuning, root)
    result = instance.run(max_steps=200)
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert instance.doc.issues == [] and instance.doc.applied_fixes == []
    assert tree_bytes(root) == original
