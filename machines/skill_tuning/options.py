"""Options of the skill-tuning machine (``[machine.skill-tuning]`` in fsm.toml, or ``-o``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["TuningOptions"]


class TuningOptions(BaseModel):
    """How fixes are made.

    ``fix_tool`` is the agent (``ctx.executor.agent`` tool name, e.g. ``codex``) given the fixes
    whose strategy needs judgement (context summarisation, orchestrator refactoring, state
    centralisation). Unset, those fixes stay proposed and only mechanical fixes are applied.
    """

    model_config = ConfigDict(extra="forbid")

    fix_tool: str | None = None
    fix_timeout: float = Field(600.0, gt=0, description="seconds one agent fix may take")
    history_window: int = Field(
        10, ge=1, description="entries a sliding_window fix keeps of a growing history"
    )
