"""A machine whose one action runs a long shell command (to test interrupted runs)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fsm.model.context import Context
from fsm.model.registry import Registry, Update

registry = Registry()


@registry.document
class Job(BaseModel):
    """The job document."""

    model_config = ConfigDict(extra="forbid")

    state: str = "queued"
    output: str = ""


@registry.action
def run_long_command(doc: Job, ctx: Context) -> Update:
    """Start a child that records its pid and sleeps; wait for it."""
    result = ctx.executor.shell("sleep 60 & echo $! > child.pid; wait", timeout=120)
    return {"output": result.describe()}
