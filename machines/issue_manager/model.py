"""The issue-manager state document (CCW's ``codex-issue-plan-execute`` skill's), as a draft and
as a saved document.

The original skill gives an *initial template* whose ``work_dir`` is ``""`` and whose timestamps are
the placeholder text ``"ISO-8601"``, and a ``validateState`` that rejects an empty ``work_dir``.
Both hold because they describe different things:

* :class:`IssueManagerDraft` is the shape of the document. The original skill's template parses as a
  draft unchanged: it has the right fields and types, but it is not yet an instance.
* :class:`IssueManagerState` is a document fit to be saved: the draft plus the original skill's
  ``validateState`` rules (non-empty ``status``, ``phase`` and ``work_dir``; ``issues`` an object;
  ``queue`` an array) and a few that follow from them (issue keys equal issue ids, queue item ids
  unique, queue items name known issues, timestamps are real ISO-8601 times). It is the model the
  engine validates at every save; the ``create`` hook turns the template into one.

Status. The original skill's status enum is ``pending|running|completed`` and has no word for an
instance a person has paused or stopped. ``status`` is also the control field of the machine, so
pause and stop must be visible there: the enum is extended with ``paused`` (held between steps by a
person, or by the machine itself after ``context.max_errors`` failed steps in a row; ``resume``
continues) and ``stopped`` (ended by a person; ``fsm run`` will not restart it, but ``resume``
continues with the next unfinished queue item). Neither is final: a stopped backlog is still a
backlog. Documents written by the original system only ever hold the original skill's three values,
so they still validate.

Outcome. The original skill ends every instance ``completed``, even one whose issues all failed; a
dashboard reading such a file would see success for work that was not done. So the enum also has
``failed`` (and ``phase`` the matching final state ``failed``): an instance ends ``completed`` only
when every issue it listed is completed, else ``failed`` with ``failure_reason`` saying what was
achieved and what went wrong (``"2 of 4 issues done; ISS-3 failed: ..."``). Every failed issue also
has an entry in ``errors`` (with its ``issue_id``), so the original skill's error log holds the
cause of every failure, not only the failed steps.

Every model keeps keys it does not know (``extra="allow"``): documents written by other tools
carry fields such as ``summary`` and must survive a round trip.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "ISSUE_STATUSES",
    "UNDONE_STATUSES",
    "ErrorEntry",
    "IssueManagerDraft",
    "IssueManagerState",
    "IssueState",
    "IssueStatus",
    "ItemStatus",
    "ManagerContext",
    "Phase",
    "QueueItem",
    "Status",
    "initial_template",
]

Status = Literal["pending", "running", "paused", "stopped", "completed", "failed"]
Phase = Literal["init", "listing", "planning", "executing", "complete", "failed"]
IssueStatus = Literal[
    "registered", "planning", "planned", "executing", "completed", "failed", "blocked", "unplanned"
]
ItemStatus = Literal["pending", "executing", "completed", "failed", "blocked"]

ISSUE_STATUSES: tuple[IssueStatus, ...] = (
    "registered",
    "planning",
    "planned",
    "executing",
    "completed",
    "failed",
    "blocked",
    "unplanned",
)
UNDONE_STATUSES = frozenset({"failed", "blocked", "unplanned"})
"""Issues the instance settled without doing them: what ``fsm retry`` reopens."""

_ITEM_ID = re.compile(r"^S-[1-9][0-9]*$")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class IssueState(_Open):
    """One issue as the machine tracks it.

    Lifecycle: ``registered`` (listed, awaiting a plan) -> ``planning`` (selected) -> ``planned``
    (a solution is bound) -> ``executing`` -> ``completed`` | ``failed``. ``failed`` is reached
    from any stage, with the cause in ``error``: an unsafe id when listed, a planning failure
    (then ``solution_id`` and ``planned_at`` stay null), or a failed task. The original skill
    returns an issue whose planning failed to ``registered``; that left it looking untouched
    ("pending" in the report) while it had failed, so here it is ``failed``. An issue registered
    with an ``error`` (written by older versions) is not selected again either.

    Two more ends, not in the original skill, for issues the instance settles without running them,
    the cause in ``error``: ``blocked`` (an issue it depends on failed, is blocked or unplanned, is
    not completed outside this instance, or the dependencies form a cycle) and ``unplanned`` (no
    solution file, and option ``plan_tool`` is ``"none"``). ``failed_before`` marks an issue the
    issues file already called ``failed`` when it was listed (an earlier run failed it): it is
    counted as failed, not run. ``depends_on`` holds the ids of the issues that must be completed
    before this one runs, as the issues file gives them.
    """

    id: str = Field(min_length=1)
    title: str = ""
    description: str | None = None
    status: IssueStatus = "registered"
    solution_id: str | None = None
    planned_at: str | None = None
    executed_at: str | None = None
    error: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    failed_before: bool = False


class QueueItem(_Open):
    """One planned solution waiting in the FIFO execution queue (``S-1``, ``S-2``, ...).

    Lifecycle ``pending`` -> ``executing`` -> ``completed`` | ``failed``, or ``pending`` ->
    ``blocked`` when its issue is blocked by a dependency before it runs. One queue item is one
    step, and a step is one transaction, so this machine never saves an item (or its issue) as
    ``executing``: the step's result replaces ``pending`` directly, and progress during the item
    is in ``solutions/{issue_id}-execution.json``. An item found ``executing`` (written by another
    tool) is treated as interrupted and runs next, skipping tasks its record shows completed.
    """

    item_id: str = Field(pattern=_ITEM_ID.pattern)
    issue_id: str = Field(min_length=1)
    solution_id: str = Field(min_length=1)
    status: ItemStatus = "pending"

    @property
    def number(self) -> int:
        """The ``n`` of ``S-n``."""
        return int(self.item_id[2:])


class ManagerContext(_Open):
    """The original skill's counters plus the persisted loop limits (they must survive restarts).

    ``rounds`` counts list passes and is bounded by ``max_rounds`` (new issues may keep arriving);
    ``round_limit_reached`` is set when the run ended because that bound forbade another list
    pass (issues added since were not read, and the outcome's reason says so).
    ``consecutive_errors`` counts failed steps in a row; at ``max_errors`` the instance pauses.
    ``success_rate`` is written by the final report. ``retries`` counts ``fsm retry``s.
    """

    total_issues: int = Field(default=0, ge=0)
    completed_count: int = Field(default=0, ge=0)
    failed_count: int = Field(default=0, ge=0)
    blocked_count: int = Field(default=0, ge=0)
    unplanned_count: int = Field(default=0, ge=0)
    retries: int = Field(default=0, ge=0)
    rounds: int = Field(default=0, ge=0)
    max_rounds: int = Field(default=10, ge=1)
    round_limit_reached: bool = False
    consecutive_errors: int = Field(default=0, ge=0)
    max_errors: int = Field(default=3, ge=1)
    success_rate: str | None = None


class ErrorEntry(_Open):
    """One failed step or failed issue: which action, what went wrong, when (and which issue)."""

    action: str = ""
    message: str = ""
    timestamp: str | None = None
    issue_id: str | None = None


class IssueManagerDraft(_Open):
    """The shape of the document; the original skill's initial template parses as it is."""

    status: Status
    phase: Phase
    work_dir: str
    issues: dict[str, IssueState] = Field(default_factory=dict)
    queue: list[QueueItem] = Field(default_factory=list)
    completed_actions: list[str] = Field(default_factory=list)
    context: ManagerContext = Field(default_factory=ManagerContext)
    errors: list[ErrorEntry | str] = Field(default_factory=list)
    created_at: str
    updated_at: str
    completed_at: str | None = None
    failure_reason: str | None = None


class IssueManagerState(IssueManagerDraft):
    """A document fit to be saved: the draft plus the original skill's ``validateState`` rules."""

    @model_validator(mode="after")
    def _validate_state(self) -> Self:
        problems = list(_state_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def issue(self, issue_id: str) -> IssueState:
        """The issue ``issue_id`` (KeyError when unknown)."""
        return self.issues[issue_id]

    def next_item(self) -> QueueItem | None:
        """The first unfinished queue item, FIFO; an ``executing`` one was interrupted."""
        return next((i for i in self.queue if i.status in ("pending", "executing")), None)


def _state_problems(doc: IssueManagerDraft) -> list[str]:
    """Every rule of the original skill's validateState (and its consequences) that ``doc``
    breaks."""
    problems: list[str] = []
    # Literal types already reject unknown status/phase values; empty text is what is left.
    if not doc.work_dir:
        problems.append("Missing: work_dir")
    for name in ("created_at", "updated_at", "completed_at"):
        value = getattr(doc, name)
        if value is not None and not _is_iso(value):
            problems.append(f"{name} is not an ISO-8601 time: {value!r}")
    for key, issue in doc.issues.items():
        if key != issue.id:
            problems.append(f"issues[{key!r}] holds issue {issue.id!r}")
        for name in ("planned_at", "executed_at"):
            value = getattr(issue, name)
            if value is not None and not _is_iso(value):
                problems.append(f"issues[{key!r}].{name} is not an ISO-8601 time: {value!r}")
    seen: set[str] = set()
    for item in doc.queue:
        if item.item_id in seen:
            problems.append(f"queue item {item.item_id} appears twice")
        seen.add(item.item_id)
        if item.issue_id not in doc.issues:
            problems.append(f"queue item {item.item_id} names unknown issue {item.issue_id!r}")
    return problems


def _is_iso(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def initial_template() -> dict[str, object]:
    """The original skill's initial state, exactly as it is written there."""
    return {
        "status": "pending",
        "phase": "init",
        "work_dir": "",
        "issues": {},
        "queue": [],
        "completed_actions": [],
        "context": {"total_issues": 0, "completed_count": 0, "failed_count": 0},
        "errors": [],
        "created_at": "ISO-8601",
        "updated_at": "ISO-8601",
    }
