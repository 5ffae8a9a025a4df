"""The hooks, actions and codec of the skill-tuning machine, called directly."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from fsm_machines.skill_tuning.actions import active_areas
from fsm_machines.skill_tuning.backup import OutsideSkillError, tree_bytes
from fsm_machines.skill_tuning.codec import TuningCodec
from fsm_machines.skill_tuning.functions import registry
from fsm_machines.skill_tuning.model import TuningState
from fsm_machines.skill_tuning.options import TuningOptions
from fsm_machines.skill_tuning.skill import TargetSkillError

from fsm.base.errors import DocumentInputError
from fsm.errors import UnsafePathError
from fsm.model.context import Context
from fsm.testing import applied
from tests.machines.skill_tuning.conftest import Tuning, context, tune
from tests.machines.skill_tuning.test_model import SEED_INITIAL_STATE

CREATE = registry.hooks["create"]
ON_ERROR = registry.hooks["on_error"]
SUMMARY = registry.hooks["summary"]
ACT = registry.actions


@pytest.fixture
def started(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> tuple[TuningState, Context, Path]:
    """An initialised instance on the fixable sample skill, and the engine's context for it."""
    root = make_skill(samples.fixable)
    instance = tune(tuning, root)
    doc, ctx = instance.doc, instance.context(TuningOptions)
    return applied(doc, ACT["init"](doc, ctx)), ctx, root


def test_create_takes_dotted_inputs_and_sets_the_work_dir(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """Inputs like target_skill.path nest; work_dir is the instance folder, backups inside it."""
    make_skill(samples.clean)
    ctx = context(tuning)
    created = CREATE(
        {
            "target_skill.path": ".claude/skills/sample-skill",
            "max_iterations": "3",
            "focus_areas": ["memory"],
        },
        ctx,
    )
    doc = TuningState.model_validate(created)
    assert (created["status"], created["target_skill"]["path"], created["max_iterations"]) == (
        "pending",
        ".claude/skills/sample-skill",
        3,
    )
    assert doc.work_dir == f".workflow/.scratchpad/{ctx.instance_id}"
    assert doc.backup_dir == f".workflow/.scratchpad/{ctx.instance_id}/backups"
    assert TuningCodec().read(doc) == "pending"


def test_a_new_state_json_has_the_shape_of_the_seed_template(
    make_skill: Callable[..., Path], samples: SimpleNamespace, tuning: Tuning
) -> None:
    """The engine writes every key of the seed's Initial State Template, with its values
    except those the inputs and the instance's paths set."""
    make_skill(samples.clean)
    instance = tune(tuning, Path(".claude/skills/sample-skill"), user_issue_description="slow")
    written = instance.data
    template = json.loads(SEED_INITIAL_STATE)
    work = f".workflow/.scratchpad/{instance.id}"
    set_by_create = {
        "updated_at": "2026-01-01T00:00:00.000Z",
        "target_skill": {**template["target_skill"], "path": ".claude/skills/sample-skill"},
        "user_issue_description": "slow",
        "work_dir": work,
        "backup_dir": f"{work}/backups",
    }
    assert written == template | set_by_create


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        pytest.param({}, "no target skill given", id="no-path"),
        pytest.param({"target_skill.path": "nowhere"}, "does not exist", id="missing-path"),
        pytest.param({"target_skill.path": ".claude"}, "has no SKILL.md", id="no-skill-md"),
        pytest.param(
            {"target_skill.path": ".claude/skills/sample-skill/SKILL.md"},
            "not a folder",
            id="a-file",
        ),
        pytest.param(
            {"target_skill.path": ".claude/skills/sample-skill", "max_errors": 0},
            "max_errors",
            id="bad-limit",
        ),
    ],
)
def test_create_rejects_unusable_inputs_clearly(
    inputs: dict[str, object],
    message: str,
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning: Tuning,
) -> None:
    """A missing path, a folder without SKILL.md or invalid values are a clear input error."""
    make_skill(samples.clean)
    with pytest.raises(DocumentInputError, match=message):
        CREATE(inputs, context(tuning))


def test_init_reads_the_skill_and_backs_it_up(started: tuple[TuningState, Context, Path]) -> None:
    """init fills target_skill from the folder and copies the whole skill to the backup dir."""
    doc, ctx, root = started
    assert doc.status == "running"
    assert doc.started_at is not None
    assert doc.target_skill.name == "sample-skill"
    assert doc.target_skill.execution_mode == "sequential"
    assert doc.target_skill.phases == [
        "phases/01-collect.md",
        "phases/02-analyse.md",
        "phases/03-report.md",
    ]
    assert doc.target_skill.specs == ["specs/quality.md"]
    backup = ctx.workspace / (doc.backup_dir or "") / "sample-skill-backup"
    assert tree_bytes(backup) == tree_bytes(root)
    [entry] = doc.action_history
    assert (entry.action, entry.result) == ("action-init", "success")
    assert entry.output_files == [f"{doc.backup_dir}/sample-skill-backup"]
    assert doc.completed_actions == ["action-init"]


def test_init_marks_a_skill_with_an_orchestrator_autonomous(
    make_skill: Callable[..., Path], tuning: Tuning
) -> None:
    """phases/orchestrator.md makes the execution mode autonomous; no frontmatter name means the
    folder name."""
    root = make_skill(
        {"SKILL.md": "# No frontmatter\n", "phases/orchestrator.md": "# O\n"}, name="auto"
    )
    instance = tune(tuning, root)
    doc, ctx = instance.doc, instance.context(TuningOptions)
    doc = applied(doc, ACT["init"](doc, ctx))
    assert (doc.target_skill.name, doc.target_skill.execution_mode) == ("auto", "autonomous")


def test_init_fails_clearly_when_skill_md_has_gone(
    make_skill: Callable[..., Path],
    samples: SimpleNamespace,
    tuning: Tuning,
) -> None:
    """A SKILL.md removed after create is a TargetSkillError naming the folder."""
    root = make_skill(samples.clean)
    instance = tune(tuning, root)
    doc, ctx = instance.doc, instance.context(TuningOptions)
    (root / "SKILL.md").unlink()
    with pytest.raises(TargetSkillError, match=r"has no SKILL\.md"):
        ACT["init"](doc, ctx)


def test_diagnosis_replaces_only_its_own_area_and_writes_its_file(
    started: tuple[TuningState, Context, Path], tuning: Tuning
) -> None:
    """A diagnosis sets diagnosis.<area>, swaps that area's issues, and writes its JSON file."""
    doc, ctx, _root = started
    doc = applied(doc, ACT["diagnose_memory"](doc, ctx))
    doc = applied(doc, ACT["diagnose_context"](doc, ctx))
    assert sorted(i.type for i in doc.issues) == ["context_explosion", "memory_loss", "memory_loss"]
    assert doc.issues_by_severity.model_dump() == {"critical": 0, "high": 2, "medium": 1, "low": 0}
    again = applied(doc, ACT["diagnose_context"](doc, ctx))
    assert [i.id for i in again.issues] == [i.id for i in doc.issues]
    assert doc.diagnosis.context is not None and doc.diagnosis.context.status == "completed"
    written = doc.action_history[-1].output_files
    assert written == [f"{doc.work_dir}/diagnosis/context-diagnosis.json"]
    saved = json.loads((ctx.workspace / written[0]).read_text(encoding="utf-8"))
    assert saved["diagnosis"]["details"]["patterns_matched"] == ["context.unbounded_history"]


def test_areas_outside_the_focus_are_skipped(
    started: tuple[TuningState, Context, Path], tuning: Tuning
) -> None:
    """With focus_areas set, other areas get a skipped result and no issues."""
    doc, ctx, _root = started
    doc = applied(doc, {"focus_areas": ["memory"]})
    doc = applied(doc, ACT["diagnose_context"](doc, ctx))
    assert doc.diagnosis.context is not None
    assert (doc.diagnosis.context.status, doc.issues) == ("skipped", [])
    assert doc.action_history[-1].result == "skipped"


def test_on_error_counts_every_failure_and_keeps_the_last_five(
    started: tuple[TuningState, Context, Path], tuning: Tuning
) -> None:
    """Each failure adds an ErrorEntry (only five are kept) and one to error_count."""
    doc, ctx, _root = started
    bound = ctx.for_transition("diagnose_memory", "context_diagnosed", "memory_diagnosed")
    for n in range(7):
        doc = applied(doc, ON_ERROR(doc, bound, RuntimeError(f"boom {n}")))
    assert doc.error_count == 7
    assert [e.message for e in doc.errors] == [f"boom {n}" for n in range(2, 7)]
    assert {(e.action, e.recoverable) for e in doc.errors} == {("action-diagnose-memory", True)}
    assert doc.action_history[-1].result == "failure"


@pytest.mark.parametrize(
    "error",
    [
        TargetSkillError("gone"),
        OutsideSkillError("refusing to write /etc/x: it is outside /s"),
        UnsafePathError("a link out of the workspace"),
    ],
    ids=["missing-target", "fix-outside-the-skill", "workspace-refuses"],
)
def test_a_missing_target_or_an_unsafe_write_is_recorded_as_not_recoverable(
    started: tuple[TuningState, Context, Path], tuning: Tuning, error: Exception
) -> None:
    """A TargetSkillError, a fix outside the skill, and fsm's UnsafePathError (the workspace
    refuses a write) are recorded with recoverable false: running again would fail the same
    way."""
    doc, ctx, _root = started
    doc = applied(doc, ON_ERROR(doc, ctx.for_transition("init", "pending", "running"), error))
    assert (doc.errors[-1].action, doc.errors[-1].recoverable) == ("action-init", False)


def test_iterate_clears_the_diagnoses(
    started: tuple[TuningState, Context, Path], tuning: Tuning
) -> None:
    """A new round starts with every diagnosis null, so each runs again."""
    doc, ctx, _root = started
    doc = applied(doc, ACT["diagnose_context"](doc, ctx))
    doc = applied(doc, ACT["iterate"](doc, ctx))
    assert doc.diagnosis.context is None
    assert doc.action_history[-1].action == "action-iterate"


def test_summary_reports_progress(started: tuple[TuningState, Context, Path]) -> None:
    """fsm status shows the target, iteration, quality, issues, fixes and errors."""
    doc, _ctx, _root = started
    lines = SUMMARY(doc)
    assert lines["iteration"] == "0/5"
    assert lines["errors"] == "0/3"
    assert lines["target"].startswith("sample-skill")


@pytest.mark.parametrize(
    ("status", "phase", "state"),
    [
        pytest.param("pending", None, "pending", id="seed-template"),
        pytest.param("running", None, "pending", id="started-not-initialised"),
        pytest.param("running", "verified", "verified", id="running"),
        pytest.param("paused", "memory_diagnosed", "memory_diagnosed", id="paused-keeps-phase"),
        pytest.param("completed", "completed", "completed", id="completed"),
        pytest.param("failed", "agent_diagnosed", "failed", id="failed-status-wins"),
        pytest.param("user_exit", "running", "user_exit", id="user-exit"),
    ],
)
def test_codec_reads_the_state_from_status_and_phase(
    status: str, phase: str | None, state: str
) -> None:
    """A final status is the state; otherwise phase is, and no phase means pending."""
    doc = TuningState.model_validate({"status": status, "phase": phase})
    assert TuningCodec().read(doc) == state
    assert TuningCodec().read(doc.model_dump()) == state


@pytest.mark.parametrize(
    ("state", "update"),
    [
        pytest.param("verified", {"phase": "verified"}, id="running-state"),
        pytest.param("failed", {"phase": "failed", "status": "failed"}, id="final-state"),
    ],
)
def test_codec_writes_phase_and_final_status(state: str, update: dict[str, str]) -> None:
    """Writing a state sets phase, and status too when the state is final."""
    assert TuningCodec().write(TuningState(), state) == update


def test_on_error_names_the_failed_action(
    started: tuple[TuningState, Context, Path], tuning: Tuning
) -> None:
    """The engine's failed_action names the error entry (finish runs the complete action)."""
    doc, ctx, _root = started
    bound = replace(ctx.for_transition("finish", "verified", "completed"), failed_action="complete")
    doc = applied(doc, ON_ERROR(doc, bound, OSError("disk full")))
    assert (doc.errors[-1].action, doc.errors[-1].message) == ("action-complete", "disk full")


@pytest.mark.parametrize(
    ("focus", "areas"),
    [
        pytest.param([], ["context", "memory", "dataflow", "agent"], id="empty-means-all"),
        pytest.param(["memory", "agent"], ["memory", "agent"], id="named-areas"),
        pytest.param(["all"], ["context", "memory", "dataflow", "agent"], id="all"),
        pytest.param(["docs"], ["context", "memory", "dataflow", "agent"], id="only-unknown-areas"),
    ],
)
def test_focus_areas_choose_the_diagnoses(focus: list[str], areas: list[str]) -> None:
    """focus_areas picks the areas it names; naming none of the four means all of them."""
    assert active_areas(TuningState(focus_areas=focus)) == areas
