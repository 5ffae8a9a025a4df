"""The bodies the JSON API answers and takes (they make its OpenAPI document)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fsm.view.listing import ListedInstance

__all__ = [
    "Changes",
    "CommandInfo",
    "CommandRequest",
    "ControlRequest",
    "CreateRequest",
    "Driver",
    "ErrorBody",
    "Fired",
    "History",
    "InstanceInfo",
    "JournalRecord",
    "Listing",
    "MachineSummary",
    "PatchOp",
    "RetryRequest",
    "Row",
    "Session",
    "Version",
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
    title: str | None = None
    """The document's ``title``, when it has one."""
    private: bool = False
    """Shown without its details: its document others may not read, and this client has no
    token."""


class Listing(BaseModel):
    """A page of instances, newest first."""

    total: int
    offset: int
    rows: list[Row]
    counts: dict[str, int] = Field(default_factory=dict)
    """How many instances each status has among those the other filters leave (the status
    filter aside): the page's counts per status."""


class PatchOp(BaseModel):
    """One operation of a JSON Patch (RFC 6902)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    op: Literal["add", "remove", "replace", "move", "copy", "test"]
    path: str
    value: Any = None
    from_: str | None = Field(None, alias="from")


class JournalRecord(BaseModel):
    """A journal record as the journal holds it (``fsm history --json``): the fields every
    kind has; a kind's own fields (``guards``, ``actions``, ``error``, ``reason``, ...) and
    ``agents`` ride along."""

    model_config = ConfigDict(extra="allow")

    kind: str
    time: str | None = None
    event: str | None = None
    source: str | None = None
    dest: str | None = None
    actor: str | None = None
    duration_ms: float | None = None
    merged: bool | None = None
    state: str | None = None
    status: str | None = None
    doc_hash: str | None = None
    core_hash: str | None = None
    format: int | None = None
    changes: list[PatchOp] | None = None
    """What the record changed: a JSON Patch against the version before it."""
    changed: list[str] | None = None
    """The paths it changed, instead of ``changes`` when the patch was large."""


class History(BaseModel):
    """The latest journal records, oldest first, with the journal line of each (``lines``);
    ``more`` when older ones were left out."""

    records: list[JournalRecord]
    lines: list[int]
    more: bool


class Check(BaseModel):
    """How a rebuilt version checks out against its record's hashes."""

    verdict: Literal["exact", "core", "foreign", "mismatch", "unchecked", "unknown"]
    reason: str


class Version(BaseModel):
    """The document as of one record, rebuilt from the journal's changes."""

    line: int
    record: JournalRecord
    document: dict[str, Any] | None
    """None when it cannot be rebuilt (``check.reason`` says why)."""
    check: Check
    summary: dict[str, str] = Field(default_factory=dict)
    """The machine's summary lines of that version (the page's progress as of then)."""


class Changes(BaseModel):
    """What changed between the versions of two records."""

    model_config = ConfigDict(populate_by_name=True)

    from_: int = Field(alias="from")
    to: int
    known: bool
    reason: str
    changes: list[PatchOp]
    paths: list[str]


class Driver(BaseModel):
    """The run driving an instance (its heartbeat)."""

    host: str
    pid: int
    driver: str
    started: str
    beat: float
    state: str | None
    action: str | None
    action_started: float | None


class CommandInfo(BaseModel):
    """A command of the machine's own (``fsm command``): its inputs as the machine page lists
    options, and their JSON Schema (for a form)."""

    name: str
    description: str
    inputs: list[dict[str, Any]]
    input_schema: dict[str, Any] | None = None


class InstanceInfo(BaseModel):
    """``fsm status --json``, who drives the instance and the command that would."""

    machine: str
    id: str
    state: str
    state_description: str
    status: str | None
    final: bool
    outcome: str | None
    reason: str | None
    events: list[dict[str, Any]]
    control: list[str]
    summary: dict[str, str]
    document: str
    last_agent: dict[str, Any] | None = None
    driver: Driver | None = None
    """The run driving it now (None: nobody)."""
    runnable: bool = False
    """Whether a run would drive it now: with no driver, it waits for one."""
    definition: dict[str, Any] | None = None
    """The definition it runs under (``version``, ``graph``) against the installed one
    (``installed_version``, ``installed_graph``), whether the installed one runs it
    (``runnable_here``, migrating it first when ``migrates``) and why not (``problem``)."""
    run_command: str
    """The command that would drive it."""
    retry: bool = False
    """Whether ``retry`` would reopen it (it ended failed and its machine can retry)."""
    commands: list[CommandInfo] = Field(default_factory=list)
    """The machine's own commands it takes now (none once it has ended)."""


class MachineSummary(BaseModel):
    """A machine this server shows (``fsm machines --json``)."""

    name: str
    description: str
    version: str
    source: str


class ControlRequest(BaseModel):
    """Why (kept in the journal beside the server's name, ``serve``, as the actor)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(None, max_length=500)

    @model_validator(mode="before")
    @classmethod
    def _no_actor(cls, data: Any) -> Any:
        if isinstance(data, dict) and "actor" in data:
            raise ValueError(
                "the actor of a change made here is the server ('serve'); say who you are in "
                "'reason'"
            )
        return data


class RetryRequest(ControlRequest):
    """``fsm retry``: the items to reopen (the machine's names; none: every failed one)."""

    items: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=1000
    )


class CommandRequest(ControlRequest):
    """``fsm command``: the command's inputs (its model validates them)."""

    inputs: dict[str, Any] = Field(default_factory=dict)


class Fired(BaseModel):
    """What firing an event did (``fsm fire``): ``applied``, or ``failed`` with the error the
    journal holds, and the instance as it is now."""

    outcome: str
    event: str
    state: str
    error: str | None = None
    instance: InstanceInfo


class CreateRequest(BaseModel):
    """``fsm new``: the id (generated when left out) and the creation inputs."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)


class Session(BaseModel):
    """What this browser may do, and what the server does."""

    control: bool
    remote: bool
    drives: int = 0
    """How many runnable instances the server drives at a time (``fsm serve --drive``; 0: it
    drives none, ``fsm run`` does)."""
