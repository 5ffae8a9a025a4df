"""The bodies the JSON API answers and takes (they make its OpenAPI document)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsm.view.listing import ListedInstance

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


@dataclass(frozen=True)
class Row(ListedInstance):
    """One instance of the listing: the fields of ``fsm ls --json``, declared once in
    :class:`fsm.view.listing.ListedInstance`, plus the machine's progress lines."""

    progress: dict[str, str] = field(default_factory=dict)


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
