"""What the faster step path must keep: one validation of a step's result still names who broke
the document, and the context built once per engine is the one guards and actions see."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm.base.clock import SimulatedClock
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import load_machine
from fsm.model.records import ErrorRecord

MACHINE = """\
name: strict
version: 1
description: A document whose status the model restricts.
module: functions.py
document: Doc
state: {field: phase}
initial: a
storage: {document: "docs/{id}.json"}
control:
  field: status
  commands:
    start: {source: created, dest: running, description: Start.}
states:
  a: {description: First.}
  b: {description: Second.}
  bad: {description: A state the model refuses for a counted document., final: true}
  ok: {description: Done., final: true, tags: [success], status: done}
transitions:
  - {event: go, source: a, dest: b, actions: [first, second], description: Two actions.}
  - {event: spoil, source: a, dest: b, actions: [negative], auto: false, description: Break it.}
  - {event: wreck, source: a, dest: bad, actions: [first], auto: false, description: Bad state.}
  - {event: finish, source: b, dest: ok, actions: [record], description: Record the context.}
"""

FUNCTIONS = """\
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from fsm.model.registry import Registry

registry = Registry()
SEEN = []


@registry.document
class Doc(BaseModel):
    status: Literal["created", "running", "done"] = "created"
    phase: str = "a"
    count: int = Field(0, ge=0)
    seen: list[str] = []

    @model_validator(mode="after")
    def bad_only_uncounted(self):
        if self.phase == "bad" and self.count > 0:
            raise ValueError("phase 'bad' holds no count")
        return self


@registry.action
def first(doc, ctx):
    return {"count": doc.count + 1}


@registry.action
def second(doc, ctx):
    # Reads what the first action wrote: the document between actions is validated.
    return {"count": doc.count * 10}


@registry.action
def negative(doc, ctx):
    return {"count": -1}


@registry.action
def record(doc, ctx):
    SEEN.append(ctx)
    t = ctx.transition
    return {"seen": [*doc.seen, f"{t.event}:{t.source}->{t.dest}"]}
"""


def _instance(tmp_path: Path) -> Instance:
    folder = tmp_path / "machine"
    folder.mkdir()
    (folder / "machine.yaml").write_text(MACHINE)
    (folder / "functions.py").write_text(FUNCTIONS)
    workspace = Workspace(tmp_path / "ws", clock=SimulatedClock(tick=0.001))
    instance = workspace.instance(load_machine(folder / "machine.yaml"), "d1")
    instance.create({})  # the model's default status is written
    ControlPlane(instance).apply("start")
    return instance


def _last(instance: Instance) -> ErrorRecord:
    record = instance.journal.last()
    assert isinstance(record, ErrorRecord)
    return record


def test_each_action_reads_the_document_the_previous_one_wrote(tmp_path: Path) -> None:
    """Of two actions, the second sees the first's update: (0 + 1) * 10."""
    instance = _instance(tmp_path)
    assert Engine(instance).step().outcome == "applied"
    assert instance.load().data["count"] == 10


def test_an_invalid_update_of_the_last_action_is_that_actions_failure(tmp_path: Path) -> None:
    """The journal names the action whose update broke the document, not 'validation'."""
    instance = _instance(tmp_path)
    result = Engine(instance).fire("spoil")
    assert result.outcome == "failed"
    assert (result.error or "").startswith("negative failed: the step's result does not validate")
    assert _last(instance).action == "negative"
    assert "count" not in instance.load().data  # unchanged


def test_a_state_the_model_refuses_is_a_validation_failure(tmp_path: Path) -> None:
    """Actions that are fine, then a destination that breaks the document: 'validation' failed."""
    instance = _instance(tmp_path)
    result = Engine(instance).fire("wreck")
    assert result.outcome == "failed"
    assert (result.error or "").startswith("validation failed: the step's result does not validate")
    assert "phase 'bad' holds no count" in (result.error or "")
    assert _last(instance).action == "validation"
    assert instance.load().state == "a"


def test_actions_get_the_context_of_their_own_transition(tmp_path: Path) -> None:
    """A context built once per engine still tells each action which transition it runs in."""
    instance = _instance(tmp_path)
    result = Engine(instance).run()
    assert (result.outcome, result.state) == ("completed", "ok")
    assert instance.load().data["seen"] == ["finish:b->ok"]
    assert instance.load().data["status"] == "done"


def test_the_system_clock_text_is_iso_utc_of_each_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real clock's cached text of the second agrees with :func:`iso_utc` (milliseconds cut,
    not rounded) at every moment, including when the second, the day and the year turn."""
    import time
    from datetime import UTC, datetime, timedelta

    from fsm.base.clock import SystemClock, iso_utc

    clock = SystemClock()
    moments = [
        1_798_761_599_999_999_999,  # the last nanosecond of 2026
        1_798_761_600_000_000_000,  # the first of 2027
        1_798_761_600_000_999_999,
        1_798_761_600_001_000_000,
        1_798_761_600_999_500_000,
        1_798_761_601_000_000_001,
        1_798_761_599_500_000_000,  # back in time (the clock was set back): a new second again
    ]
    for moment in moments:
        monkeypatch.setattr(time, "time_ns", lambda moment=moment: moment)
        expected = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=moment // 1000)
        assert clock.iso() == iso_utc(expected), moment
