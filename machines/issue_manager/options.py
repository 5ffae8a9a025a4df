"""Options of the issue-manager machine (``[machine.issue-manager]`` in fsm.toml, or ``-o``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fsm.context import Context

__all__ = ["IssueManagerContext", "IssueManagerInputs", "IssueManagerOptions", "ManagerLimits"]


class IssueManagerOptions(BaseModel):
    """Where the issues and solutions are, which agents plan and execute, and how long they may run.

    Paths are relative to the workspace (absolute paths are taken as they are). The loop limits
    (``max_rounds``, ``max_errors``) are not options: they live in the document's ``context`` so
    that they survive restarts; set them with ``fsm new ... --set context.max_rounds=N``.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    issues_file: str = Field(default=".workflow/issues/issues.jsonl", min_length=1)
    """The issues, one JSON object a line ({"id": ..., "title": ..., "status": ...})."""
    solutions_dir: str = Field(default=".workflow/issues/solutions", min_length=1)
    """Where bound solutions are read ({issue id}.jsonl) and planned ones written."""
    plan_tool: str = Field(default="codex", min_length=1)
    """The agent that plans issues without a solution file; "none": no planning agent, only
    issues with a solution file run and the others are reported unplanned."""
    execute_tool: str = Field(default="codex", min_length=1)
    """The agent that executes solution tasks that have no command."""
    plan_timeout: float = Field(default=300.0, gt=0)
    """Seconds one planning agent run may take."""
    task_timeout: float = Field(default=600.0, gt=0)
    """Seconds one solution task (a command or an agent run) may take."""


class ManagerLimits(BaseModel):
    """The loop limits a new instance may be given."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_rounds: int = Field(default=10, ge=1)
    """Passes over the issues file (new issues may keep arriving)."""
    max_errors: int = Field(default=3, ge=1)
    """Failed steps in a row after which the instance pauses."""


class IssueManagerInputs(BaseModel):
    """What ``fsm new issue-manager`` takes: ``--set context.max_rounds=N`` and
    ``--set context.max_errors=N`` (listed by ``fsm options issue-manager``)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    context: ManagerLimits = Field(default_factory=ManagerLimits)
    """The loop limits, kept in the document so that they survive restarts."""


IssueManagerContext = Context[IssueManagerOptions]
"""The context the machine's functions get: ``ctx.options`` is an IssueManagerOptions."""
