"""The bodies the JSON API answers and takes (they make its OpenAPI document)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ControlRequest",
    "CreateRequest",
    "ErrorBody",
    "History",
    "Listing",
    "Row",
    "Session",
]


class ErrorBody(BaseModel):
    """Every error answer."""

    error: str
    exit_code: int


class Row(BaseModel):
    """One instance of the listing (``fsm ls --json`` plus progress lines)."""

    machine: str
    id: str
    status: str | None
    state: str | None
    updated: str
    error: str | None = None
    outcome: str | None = None
    reason: str | None = None
    progress: dict[str, str] = Field(default_factory=dict)


class Listing(BaseModel):
    """A page of instances, newest first."""

    total: int
    offset: int
    rows: list[Row]


class History(BaseModel):
    """The latest journal records, oldest first; ``more`` when older ones were left out."""

    records: list[dict[str, Any]]
    more: bool


class ControlRequest(BaseModel):
    """Why, and who (kept in the journal)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(None, max_length=500)
    actor: str = Field("web", min_length=1, max_length=100)


class CreateRequest(BaseModel):
    """``fsm new``: the id (generated when left out) and the creation inputs."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)


class Session(BaseModel):
    """What this browser may do."""

    control: bool
    remote: bool
