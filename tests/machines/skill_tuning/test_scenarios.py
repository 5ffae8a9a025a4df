"""Whole runs on sample skills, driven by the engine stand-in of conftest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from fsm.context import Context
from fsm.executor import AgentCommand
from machines.skill_tuning.backup import tree_bytes
from machines.skill_tuning.diagnosis.run import RULES
from machines.skill_tuning.functions import registry
from machines.skill_tuning.options import TuningOptions
from machines.skill_tuning.skill import read_skill

ROUND = ["diagnose_context", "diagnose_memory", "diagnose_dataflow", "diagnose_agent", "verify"]


def test_a_clean_skill_passes_at_once(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
) -> None:
    """A skill without problems is diagnosed once, passes the gate and is left untouched."""
    root = make_skill(samples.clean)
    original = tree_bytes(root)
    ctx = tuning_ctx()
    doc, events = engine.drive(engine.new(ctx, root), ctx)
    assert events == ["init", *ROUND, "complete"]
    assert (doc.status, doc.quality_score, doc.quality_gate, doc.iteration_count) == (
        "completed",
        100,
        "pass",
        1,
    )
    assert doc.issues == [] and doc.applied_fixes == []
    assert tree_bytes(root) == original
    report = ctx.workspace / (doc.final_report or "")
    assert report.name == "tuning-report.md" and report.parent == ctx.instance_dir
    assert "the quality gate passed" in report.read_text(encoding="utf-8")
    assert [h.action for h in doc.action_history][-1] == "action-complete"
    assert all(h.completed_at and h.result == "success" for h in doc.action_history)


def test_a_fixable_skill_is_fixed_verified_and_passes(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
) -> None:
    """Mechanical fixes really change the files, pass verification, and the gate passes."""
    root = make_skill(samples.fixable)
    original = tree_bytes(root)
    ctx = tuning_ctx()
    doc, events = engine.drive(engine.new(ctx, root), ctx)
    assert events == ["init", *ROUND, "apply_fix", "iterate", *ROUND, "complete"]
    assert (doc.status, doc.quality_gate, doc.iteration_count) == ("completed", "pass", 2)
    assert doc.quality_score >= 80
    assert [(r.success, r.verification_result) for r in doc.applied_fixes] == [(True, "pass")] * 2
    changed = tree_bytes(root)
    assert changed["phases/01-collect.md"] != original["phases/01-collect.md"]
    assert changed["phases/02-analyse.md"] != original["phases/02-analyse.md"]
    skill = read_skill(root)
    assert RULES["context.unbounded_history"].check(skill) == []
    assert RULES["memory.constraints_not_propagated"].check(skill) == []
    backup = ctx.workspace / (doc.backup_dir or "") / "sample-skill-backup"
    assert tree_bytes(backup) == original


def test_a_fix_that_does_not_remove_its_issue_is_rolled_back(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """An agent fix that leaves its issue in place fails verification; the files are restored
    byte for byte and the run completes without passing."""
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
    ctx = tuning_ctx(TuningOptions(fix_tool="codex"), {"codex": agent})
    doc, events = engine.drive(engine.new(ctx, root), ctx)
    assert events.count("apply_fix") == 2
    assert events[-1] == "settle"
    assert [(r.fix_id, r.verification_result, r.rollback_available) for r in doc.applied_fixes] == [
        ("FIX-001", "fail", False),
        ("FIX-002", "fail", False),
    ]
    assert tree_bytes(root) == original
    assert (doc.status, doc.quality_gate) == ("completed", "review")


def test_judgement_fixes_stay_proposed_without_a_fix_tool(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
) -> None:
    """Without fix_tool nothing that needs judgement is applied; the run settles at once."""
    root = make_skill(samples.judgement)
    original = tree_bytes(root)
    ctx = tuning_ctx()
    doc, events = engine.drive(engine.new(ctx, root), ctx)
    assert events == ["init", *ROUND, "settle"]
    assert [f.strategy for f in doc.proposed_fixes] == ["orchestrator_refactor"] * 2
    assert doc.pending_fixes == [] and doc.applied_fixes == []
    assert tree_bytes(root) == original


def test_repeated_failures_end_in_failed_at_max_errors(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
) -> None:
    """An action that keeps failing is retried until error_count reaches max_errors, then the
    run aborts with a report and errors.json."""
    root = make_skill(samples.clean)
    ctx = tuning_ctx()
    doc, _event = engine.step(engine.new(ctx, root), ctx)
    (root / "SKILL.md").unlink()
    doc, events = engine.drive(doc, ctx)
    assert events == ["diagnose_context"] * 3 + ["abort"]
    assert (doc.status, doc.phase, doc.error_count) == ("failed", "failed", 3)
    assert all("has no SKILL.md" in e.message for e in doc.errors)
    assert (ctx.instance_dir / "errors.json").is_file()
    assert "3 errors" in (ctx.instance_dir / "tuning-report.md").read_text(encoding="utf-8")


def test_the_iteration_limit_completes_the_run(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
) -> None:
    """When iteration_count reaches max_iterations the run completes with its current gate."""
    root = make_skill(samples.fixable)
    ctx = tuning_ctx()
    doc, events = engine.drive(engine.new(ctx, root, max_iterations=1), ctx)
    assert events == ["init", *ROUND, "finish"]
    assert (doc.status, doc.quality_gate, doc.iteration_count) == ("completed", "review", 1)
    assert "iteration limit" in (ctx.instance_dir / "tuning-report.md").read_text(encoding="utf-8")


def test_stop_ends_the_run_as_user_exit(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning_ctx: Callable[..., Context],
    engine: SimpleNamespace,
) -> None:
    """The stop command's action writes the report; the codec then reads user_exit."""
    root = make_skill(samples.clean)
    ctx = tuning_ctx()
    doc, _event = engine.step(engine.new(ctx, root), ctx)
    doc = engine.apply(doc, registry.actions["stop"](doc, ctx))
    assert registry.codecs["tuning_state"].read(doc) == "user_exit"
    assert engine.step(doc, ctx) == (doc, None)
    assert "stopped by the user" in (ctx.instance_dir / "tuning-report.md").read_text(
        encoding="utf-8"
    )
