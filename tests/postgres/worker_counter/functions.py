"""A counter whose every count runs a command: the machine the worker tests drive.

The command stands in for an agent: it waits ``delay`` seconds (the option, or the document's
own ``delay``), then appends ``<id> <count>`` to ``effects.log`` in the workspace, a side effect
outside the document that a worker killed mid-step may leave done although the step was not
committed (and is done again by the worker that takes the instance over).
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm import Context, Registry, Update

registry = Registry()


@registry.document
class Counter(BaseModel):
    """The counter document."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["created", "running", "paused", "done", "failed"] = "created"
    phase: str = "idle"
    count: int = Field(0, ge=0)
    limit: int = Field(3, ge=0)
    delay: float = Field(0.0, ge=0)
    failure_reason: str | None = None
    updated_at: str | None = None


@registry.inputs
class CounterInputs(BaseModel):
    """What a counter is created with."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(3, ge=0)
    """Where the count stops."""
    delay: float = Field(0.0, ge=0)
    """Seconds each count's command waits."""


@registry.options
class CounterOptions(BaseModel):
    """Options of the machine."""

    model_config = ConfigDict(extra="forbid")

    folder: str = "counters"
    """Where counters are kept, relative to the workspace."""


@registry.guard(budget=True)
def below_limit(doc: Counter, ctx: Context[CounterOptions]) -> bool:
    """True while the count is under the limit."""
    return doc.count < doc.limit


@registry.action
def work(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Run the command, then count one more (a failed or killed command fails the step)."""
    note = shlex.quote(f"{ctx.instance_id} {doc.count + 1}")
    command = f"echo {note} >> effects.log"
    if doc.delay:
        command = f"sleep {doc.delay} && {command}"
    result = ctx.executor.shell(command, cwd=ctx.workspace)
    if not result.ok:
        raise RuntimeError(f"the command failed: {result.describe()}")
    return {"count": doc.count + 1}


@registry.hook
def new_counter(inputs: dict[str, Any], ctx: Context[CounterOptions]) -> dict[str, Any]:
    """A counter document from ``fsm new`` inputs."""
    return {"status": "created", "phase": "idle", "count": 0, **inputs}
