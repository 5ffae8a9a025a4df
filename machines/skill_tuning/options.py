"""Options of the skill-tuning machine (``[machine.skill-tuning]`` in fsm.toml, or ``-o``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fsm.context import Context

__all__ = ["TuningContext", "TuningInputs", "TuningOptions"]


class TuningOptions(BaseModel):
    """How fixes are made.

    ``fix_tool`` is the agent (``ctx.executor.agent`` tool name, e.g. ``codex``) given the fixes
    whose strategy needs judgement (context summarisation, orchestrator refactoring, state
    centralisation). Unset, those fixes stay proposed and only mechanical fixes are applied.

    ``allow_outside`` is the one way to tune a skill outside the workspace: fsm writes nothing
    outside the workspace unless the user names the outside folder, in ``fsm.toml``
    (``[machine.skill-tuning] allow_outside = ["/abs/dir"]``) or with ``-o allow_outside=/abs/dir``
    on each command that creates or runs the instance.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    fix_tool: str | None = None
    """The agent given the fixes that need judgement (e.g. codex); unset, they stay proposed."""
    fix_timeout: float = Field(600.0, gt=0)
    """Seconds one agent fix may take."""
    history_window: int = Field(10, ge=1)
    """Entries a sliding_window fix keeps of a growing history."""
    allow_outside: list[str] = Field(default_factory=list)
    """Absolute folders outside the workspace whose skills may be tuned (their files are
    rewritten); by default a skill outside the workspace is refused."""

    @field_validator("allow_outside", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        """``-o allow_outside=/abs/dir`` gives one folder as text; a list gives several."""
        return [value] if isinstance(value, str) else value

    @field_validator("allow_outside")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for folder in value:
            if not folder or "\0" in folder or not Path(folder).is_absolute():
                raise ValueError(f"allow_outside must name absolute folders, got {folder!r}")
        return value


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
