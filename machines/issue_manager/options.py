"""Options of the issue-manager machine (``[machine.issue-manager]`` in fsm.toml, or ``-o``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["IssueManagerOptions"]


class IssueManagerOptions(BaseModel):
    """Where the issues and solutions are, which agents plan and execute, and how long they may run.

    Paths are relative to the workspace (absolute paths are taken as they are). The loop limits
    (``max_rounds``, ``max_errors``) are not options: they live in the document's ``context`` so
    that they survive restarts; set them with ``fsm new ... --set context.max_rounds=N``.
    """

    model_config = ConfigDict(extra="forbid")

    issues_file: str = Field(default=".workflow/issues/issues.jsonl", min_length=1)
    solutions_dir: str = Field(default=".workflow/issues/solutions", min_length=1)
    plan_tool: str = Field(default="codex", min_length=1)
    execute_tool: str = Field(default="codex", min_length=1)
    plan_timeout: float = Field(default=300.0, gt=0)
    task_timeout: float = Field(default=600.0, gt=0)
