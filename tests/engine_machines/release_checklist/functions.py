"""A release checklist: the machine of the tests of typed creation inputs (its version is text)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.model.context import Context
from fsm.model.registry import Registry, Update

registry = Registry()


@registry.document
class Checklist(BaseModel):
    """The checklist document."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["created", "running", "paused", "done", "stopped"] = "created"
    phase: str = "open"
    version: str
    channel: Literal["stable", "beta"] = "stable"
    items: list[str] = Field(default_factory=list)
    ticked: int = 0
    updated_at: str | None = None


@registry.inputs
class ChecklistInputs(BaseModel):
    """What ``fsm new release-checklist`` takes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    version: str
    """The version being released, e.g. 1.0 (text: 1.10 is not 1.1)."""
    channel: Literal["stable", "beta"] = "stable"
    """Where it is released."""
    items: list[str] = Field(default_factory=lambda: ["changelog", "tag"])
    """What must be done before the release."""


@registry.guard
def has_open_item(doc: Checklist, ctx: Context) -> bool:
    """True while an item is not ticked."""
    return doc.ticked < len(doc.items)


@registry.action
def tick(doc: Checklist, ctx: Context) -> Update:
    """Tick the next item."""
    return {"ticked": doc.ticked + 1}


@registry.hook
def new_checklist(inputs: dict[str, Any], ctx: Context) -> Checklist:
    """A checklist from the validated inputs (every problem of them at once)."""
    given = ChecklistInputs.model_validate(inputs)
    return Checklist(status="created", phase="open", **given.model_dump())
