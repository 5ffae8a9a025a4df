"""Options of the skill-tuning machine (``[machine.skill-tuning]`` in fsm.toml, or ``-o``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fsm.context import Context

__all__ = ["TuningContext", "TuningInputs", "TuningOptions"]


class TuningOptions(BaseModel):
    """How fixes are made.

    ``fix_tool`` is the agent (``ctx.executor.agent`` tool name, e.g. ``codex``) given the fixes
    whose strategy needs judgement (context summarisation, orchestrator refactoring, state
    centralisation). Unset, those fixes stay proposed and only mechanical fixes are applied.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    fix_tool: str | None = None
    """The agent given the fixes that need judgement (e.g. codex); unset, they stay proposed."""
    fix_timeout: float = Field(600.0, gt=0)
    """Seconds one agent fix may take."""
    history_window: int = Field(10, ge=1)
    """Entries a sliding_window fix keeps of a growing history."""


class TargetSkillInput(BaseModel):
    """The skill to tune."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    path: str = ""
    """The skill's folder (holding SKILL.md), relative to the workspace."""


class TuningInputs(BaseModel):
    """What ``fsm new skill-tuning`` takes (``--set KEY=VALUE``; dotted keys reach nested fields).

    Listed by ``fsm options skill-tuning``; the ``create`` hook checks the values.
    """

    model_config = ConfigDict(use_attribute_docstrings=True)

    target_skill: TargetSkillInput = Field(default_factory=TargetSkillInput)
    user_issue_description: str = ""
    """What goes wrong with the skill, in your words (kept in the report)."""
    focus_areas: list[str] = Field(default_factory=list)
    """Diagnoses to run: any of context, memory, dataflow, agent (default: all four)."""
    max_iterations: int = 5
    """Diagnose-fix-verify rounds before the run ends (at least 1)."""
    max_errors: int = 3
    """Failed actions after which the run ends failed."""


TuningContext = Context[TuningOptions]
"""The context the machine's guards, actions and hooks get: ``ctx.options`` is a TuningOptions."""
