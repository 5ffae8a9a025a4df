"""The review queue's document, options and creation inputs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ItemStatus = Literal["pending", "approved", "changes", "failed"]


class Item(BaseModel):
    """One file of the queue, and what its review said."""

    model_config = ConfigDict(extra="forbid")

    path: str
    status: ItemStatus = "pending"
    note: str = ""


class ReviewQueue(BaseModel):
    """The document of one queue: ``.reviews/<id>.json`` in the workspace."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["created", "running", "paused", "done", "stopped"] = "created"
    phase: Literal["queued", "reviewing", "done", "stopped"] = "queued"
    title: str = ""
    items: list[Item] = Field(default_factory=list)
    stop_reason: str | None = None
    updated_at: str | None = None

    def pending(self) -> list[Item]:
        """The files not reviewed yet, in queue order."""
        return [item for item in self.items if item.status == "pending"]


class ReviewOptions(BaseModel):
    """Options of the review queue (``[machine.review-queue]`` in fsm.toml, or ``-o``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    reviewer: str = "claude"
    """The agent that reviews each file: an [agent.NAME] table of fsm.toml, or an agent on PATH."""
    check_command: str = ""
    """A shell command run on each file before the review ({path} is the file); a file that fails
    it goes back for changes without a review. Empty: no check."""
    folder: str = ".reviews"
    """Where queues are kept, relative to the workspace."""


class ReviewInputs(BaseModel):
    """What ``fsm new review-queue`` takes (``--set files='["a.py"]' --set title=...``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    files: list[str] = Field(min_length=1)
    """The files to review, relative to the workspace, in order."""
    title: str = ""
    """What the review is for."""
