"""The counter: count up to a limit, one step at a time (the smallest complete machine).

``fsm new examples/counter/machine.yaml --set limit=3`` creates one, ``fsm run`` counts it to
its limit. docs/writing-a-machine.md builds a larger machine step by step.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm import Context, Registry, Update

registry = Registry()


@registry.document
class Counter(BaseModel):
    """The counter document."""

    model_config = ConfigDict(extra="allow")

    status: Literal["created", "running", "paused", "done", "failed"] = "created"
    phase: str = "idle"
    count: int = Field(0, ge=0)
    limit: int = Field(3, ge=0)
    title: str = ""
    failure_reason: str | None = None
    updated_at: str | None = None


@registry.inputs
class CounterInputs(BaseModel):
    """What ``fsm new`` takes for a counter (``--set limit=3 --set title=...``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    limit: int = Field(3, ge=0)
    """Where the count stops."""
    title: str = ""
    """What the counter is for."""


@registry.options
class CounterOptions(BaseModel):
    """Options of the counter machine."""

    model_config = ConfigDict(extra="forbid")

    folder: str = ".counters"
    """Where counters are kept, relative to the workspace."""
    step_size: int = Field(1, ge=1)
    """How much one step adds."""


@registry.guard(budget=True)
def below_limit(doc: Counter, ctx: Context[CounterOptions]) -> bool:
    """True while the count is under the limit (each step raises it: the loop ends)."""
    return doc.count < doc.limit


@registry.action
def increment(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Add the step size."""
    return {"count": doc.count + ctx.options.step_size}


@registry.action
def mark_stopped(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Say why the counter was stopped."""
    return {"failure_reason": "Manually stopped by user"}


@registry.hook
def new_counter(inputs: dict[str, Any], ctx: Context[CounterOptions]) -> dict[str, Any]:
    """A counter document from ``fsm new`` inputs (only the inputs model's keys reach it)."""
    return {"status": "created", "phase": "idle", "count": 0, **inputs}


@registry.hook
def summarize(doc: Counter) -> dict[str, str]:
    """Progress for ``fsm status``."""
    return {"progress": f"{doc.count}/{doc.limit}"}
