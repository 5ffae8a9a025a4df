"""The machine of the store conformance suite (:class:`fsm.testing.StoreContract`): count up to
a limit, with control commands, an external field and error bookkeeping."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.model.context import Context
from fsm.model.registry import Registry, Update

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
    errors: list[str] = Field(default_factory=list)
    title: str = ""
    failure_reason: str | None = None
    updated_at: str | None = None


@registry.inputs
class CounterInputs(BaseModel):
    """What a new counter takes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    limit: int = Field(3, ge=0)
    """Where the count stops."""
    title: str = ""
    """What the counter is for."""
    fail_at: int | None = None
    """The count at which counting raises (to test failures)."""


@registry.options
class CounterOptions(BaseModel):
    """Where the counters are kept (for stores that keep files)."""

    model_config = ConfigDict(extra="forbid")

    folder: str = ".counters"


@registry.guard(budget=True)
def below_limit(doc: Counter, ctx: Context[CounterOptions]) -> bool:
    """True while the count is under the limit."""
    return doc.count < doc.limit


@registry.action
def increment(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Count one; raise at ``fail_at``."""
    if doc.fail_at is not None and doc.count == doc.fail_at:
        raise RuntimeError(f"cannot count past {doc.fail_at}")
    return {"count": doc.count + 1}


@registry.action
def mark_stopped(doc: Counter, ctx: Context[CounterOptions]) -> Update:
    """Say why the counter was stopped."""
    return {"failure_reason": "stopped"}


@registry.hook
def record_error(doc: Counter, ctx: Context[CounterOptions], error: BaseException) -> Update:
    """Keep the failure's message."""
    return {"errors": [*doc.errors, str(error)]}


@registry.hook
def new_counter(inputs: dict[str, Any], ctx: Context[CounterOptions]) -> dict[str, Any]:
    """A counter document from its inputs."""
    return {"status": "created", "phase": "idle", "count": 0, **inputs}
