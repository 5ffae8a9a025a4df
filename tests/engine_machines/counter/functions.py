"""A small machine of the engine tests: count up to a limit, with control and error bookkeeping."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.model.context import Context
from fsm.model.registry import Recovery, Registry, Update

registry = Registry()


@registry.document
class Counter(BaseModel):
    """The counter document."""

    model_config = ConfigDict(extra="allow")

    status: Literal["created", "running", "paused", "done", "failed"] = "created"
    phase: str = "idle"
    count: int = Field(0, ge=0)
    limit: int = Field(3, ge=0)
    fail_at: int | None = None
    errors: list[dict[str, Any]] = Field(default_factory=list)
    max_errors: int = 2
    title: str = ""
    failure_reason: str | None = None
    updated_at: str | None = None


@registry.inputs
class CounterInputs(BaseModel):
    """What ``fsm new counter`` takes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    limit: int = Field(3, ge=0)
    """Where the count stops."""
    title: str = ""
    """What the counter is for."""
    fail_at: int | None = None
    """The count at which counting raises (to test failures)."""
    max_errors: int = 2
    """Errors recorded before the counter gives up."""
    errors: list[dict[str, Any]] = Field(default_factory=list)
    """Errors recorded already (to test the error limit)."""


@registry.options
class CounterOptions(BaseModel):
    """Options of the counter machine."""

    model_config = ConfigDict(extra="forbid")

    folder: str = ".counters"
    step_size: int = 1
    delay: float = 0.0


@registry.guard(budget=True)
def below_limit(doc: Counter, ctx: Context[CounterOptions]) -> bool:
    """True while the count is under the limit."""
    return doc.count < doc.limit


@registry.guard(budget=True)
def too_many_errors(doc: Counter, ctx: Context[CounterOptions]) -> bool:
    """True once max_errors errors were recorded."""
    return len(doc.errors) >= doc.max_errors


@registry.action
def increment(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Add the step size; raise at ``fail_at`` (to test failures)."""
    if doc.fail_at is not None and doc.count == doc.fail_at:
        raise RuntimeError(f"cannot count past {doc.fail_at}")
    options = ctx.options
    if options.delay:
        time.sleep(options.delay)
    return {"count": doc.count + options.step_size}


@registry.action
def corrupt(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Write a value the model refuses (a negative count)."""
    return {"count": -1}


@registry.action
def mark_stopped(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Say why the counter was stopped."""
    return {"failure_reason": "Manually stopped by user"}


@registry.hook
def record_error(doc: Counter, ctx: Context[CounterOptions], error: BaseException) -> Update:
    """Append the failure to ``errors``."""
    entry = {"action": ctx.transition.event if ctx.transition else "?", "message": str(error)}
    return {"errors": [*doc.errors, entry]}


@registry.hook
def new_counter(inputs: dict[str, Any], ctx: Context[CounterOptions]) -> dict[str, Any]:
    """A counter document from ``fsm new`` inputs."""
    return {"status": "created", "phase": "idle", "count": 0, **inputs}


@registry.hook
def summarize(doc: Counter) -> dict[str, str]:
    """Progress for ``fsm status``."""
    return {"progress": f"{doc.count}/{doc.limit}"}


@registry.hook
def rebuild(ctx: Context[CounterOptions], raw_text: str | None) -> Recovery:
    """A fresh running counter; the count cannot be recovered from a corrupt file."""
    return Recovery(
        Counter(status="running", phase="counting", count=0),
        ["count could not be recovered and restarts at 0"],
    )
