"""The driver: one instance, the real engine on it, and assertions on what its journal shows."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal

from pydantic import BaseModel
from typing_extensions import TypeVar

from fsm.base.update import apply_update
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Loaded, Workspace
from fsm.engine.retry import RetryReport, retry
from fsm.model.context import Context
from fsm.model.machine import Machine
from fsm.model.outcome import Chooser, RunResult, StepResult, Verdict
from fsm.model.records import (
    ControlRecord,
    CreateRecord,
    ErrorRecord,
    Record,
    RecoverRecord,
    RetryRecord,
    TransitionRecord,
)
from fsm.view.inspect import replay

__all__ = ["Driver", "RecordingInstance", "applied"]

DocT = TypeVar("DocT", bound=BaseModel, default=BaseModel)
OptionsT = TypeVar("OptionsT", bound=BaseModel)
ModelT = TypeVar("ModelT", bound=BaseModel)


class RecordingInstance(Instance):
    """An instance that keeps each document version it commits (:attr:`Driver.written`)."""

    def __init__(self, workspace: Workspace, machine: Machine, instance_id: str) -> None:
        super().__init__(workspace, machine, instance_id)
        self.written: list[dict[str, Any]] = []

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Commit as an instance does, and keep the JSON that was written."""
        saved = super().commit(data, record, base=base, locked=locked)
        self.written.append(json.loads(saved.raw))
        return saved


class Driver(Generic[DocT]):
    """One instance driven by the real engine (:class:`fsm.engine.engine.Engine`), as ``fsm run``,
    ``fsm step``, ``fsm fire`` and the control commands drive it, with what a test reads.

    ``doc`` is the document validated with the harness's document model; :meth:`path`,
    :meth:`events` and :meth:`journal` read the journal; the ``assert_*`` methods fail with
    the path taken, so that a failing scenario says where it went instead.
    """

    def __init__(
        self,
        instance: Instance,
        document: type[DocT],
        *,
        interactive: bool = False,
        reconfigure: bool = False,
    ) -> None:
        self.instance = instance
        self.document = document
        self.engine = Engine(instance, interactive=interactive, reconfigure=reconfigure)

    @property
    def id(self) -> str:
        """The instance id."""
        return self.instance.id

    @property
    def data(self) -> dict[str, Any]:
        """The document's JSON as its store holds it (on disk, for the file store)."""
        return self.instance.store.read(self.instance.id).data

    @property
    def doc(self) -> DocT:
        """The document as the harness's model reads it."""
        return self.document.model_validate(self.data)

    @property
    def state(self) -> str:
        """The FSM state the engine reads from the document."""
        return self.instance.peek().state

    @property
    def status(self) -> str | None:
        """The control status (None for machines without a control block)."""
        return self.instance.peek().status

    @property
    def written(self) -> list[dict[str, Any]]:
        """Every version of the document fsm wrote through this driver, oldest first."""
        return self.instance.written if isinstance(self.instance, RecordingInstance) else []

    def step(self, *, actor: str = "test") -> StepResult:
        """One automatic step (``fsm step``: it does not start a created instance)."""
        return self.engine.step(actor=actor)

    def fire(self, event: str, *, actor: str = "test") -> StepResult:
        """Take ``event`` (``fsm fire``): a person's choice, or a manual transition."""
        return self.engine.fire(event, actor=actor)

    def run(self, max_steps: int | None = 100, *, chooser: Chooser | None = None) -> RunResult:
        """Run as ``fsm run`` does: check the preflight, start, and step until the instance
        ends, pauses, waits for input or takes ``max_steps`` steps."""
        return self.engine.run(max_steps=max_steps, chooser=chooser, actor="test")

    def run_until(self, state: str, *, max_steps: int = 100) -> RunResult:
        """Run until a step enters ``state`` (at least one step is taken); fail when the run
        ends, pauses or waits elsewhere, or ``max_steps`` pass first."""
        steps: list[StepResult] = []
        while len(steps) < max_steps:
            result = self.engine.run(max_steps=1, actor="test")
            steps += result.steps
            if result.steps and result.state == state:
                return RunResult(result.outcome, result.state, result.status, steps, result.message)
            if result.outcome != "limit" or not result.steps:
                raise AssertionError(
                    f"the run ended {result.outcome} in state '{result.state}' before entering "
                    f"'{state}' ({result.message}); path: {self.path()}"
                )
        raise AssertionError(f"'{state}' not entered in {max_steps} steps; path: {self.path()}")

    def control(self, command: str, *, reason: str | None = None, actor: str = "test") -> None:
        """Apply a control command (``start``, ``pause``, ``resume``, ``stop``)."""
        ControlPlane(self.instance).apply(command, actor=actor, reason=reason)

    def retry(self, *items: str, reason: str | None = None, actor: str = "test") -> RetryReport:
        """Reopen the instance that ended failed (``fsm retry``), for ``items`` or all."""
        return retry(self.instance, items, actor=actor, reason=reason)

    def context(self, options: type[OptionsT]) -> Context[OptionsT]:
        """The context guards, actions and hooks of this instance get, its options read as
        ``options`` (the machine's options model, imported by the test)."""
        ctx = self.instance.context(
            interactive=self.engine.interactive, reconfigure=self.engine.reconfigure
        )
        return _with_options(ctx, options)

    def verdict(self) -> Verdict | None:
        """The machine's verdict on the document (None while the instance is not final)."""
        loaded = self.instance.peek()
        return self.instance.machine.verdict(loaded.state, loaded.doc)

    def journal(self) -> list[dict[str, Any]]:
        """The journal's records as its lines hold them (JSON objects), oldest first."""
        return list(self.instance.journal.read().records)

    def records(self) -> list[Record]:
        """The journal's typed records (:mod:`fsm.model.records`), oldest first."""
        return self.instance.journal.records()

    def events(self) -> list[str]:
        """The event of every step taken, in order; a step whose action failed shows as
        ``event!`` (it changed no state)."""
        return [
            f"{r.event}!" if isinstance(r, ErrorRecord) else r.event
            for r in self.records()
            if isinstance(r, (TransitionRecord, ErrorRecord))
        ]

    def path(self) -> list[str]:
        """The states the instance was in, in order: where it was created, then the state each
        step (and each control command or retry that moved it) led to."""
        states: list[str] = []
        for record in self.records():
            if isinstance(record, (CreateRecord, RecoverRecord)):
                states.append(record.dest)
            elif isinstance(record, (TransitionRecord, ControlRecord, RetryRecord)):
                if isinstance(record, ControlRecord) and record.dest == record.source:
                    continue
                if not states:
                    states.append(record.source)  # created by another program, no create record
                states.append(record.dest)
        return states

    def assert_path(self, expected: Sequence[str]) -> None:
        """Fail unless :meth:`path` is ``expected``."""
        actual = self.path()
        assert actual == list(expected), f"path {actual}, expected {list(expected)}"

    def assert_events(self, expected: Sequence[str]) -> None:
        """Fail unless :meth:`events` is ``expected``."""
        actual = self.events()
        assert actual == list(expected), f"events {actual}, expected {list(expected)}"

    def assert_outcome(
        self,
        outcome: Literal["completed", "failed"],
        reason: str | re.Pattern[str] | None = None,
    ) -> None:
        """Fail unless the instance is in a final state whose verdict is ``outcome`` (a success
        is ``completed``), with exactly this ``reason`` (or one the pattern matches)."""
        verdict = self.verdict()
        assert verdict is not None, f"not in a final state: '{self.state}'; path {self.path()}"
        actual = "completed" if verdict.success else "failed"
        assert actual == outcome, f"{actual} ({verdict.reason}), expected {outcome}"
        if isinstance(reason, re.Pattern):
            assert reason.search(verdict.reason), f"reason {verdict.reason!r} !~ {reason.pattern}"
        elif reason is not None:
            assert verdict.reason == reason, f"reason {verdict.reason!r}, expected {reason!r}"

    def assert_consistent(self) -> None:
        """Fail unless every version written validates with the document model and the journal
        replays to the document on disk (``fsm replay``)."""
        assert self.written, "nothing was written"
        for version in self.written:
            self.document.model_validate(version)
        report = replay(self.instance)
        assert report.problems == [], report.problems


def applied(doc: ModelT, update: Mapping[str, Any] | None) -> ModelT:
    """``doc`` with an action's ``update`` applied and validated as the engine does it (for
    unit tests of single actions)."""
    data = doc.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return type(doc).model_validate(apply_update(data, dict(update or {})))


def _with_options(ctx: Context, options: type[OptionsT]) -> Context[OptionsT]:
    # A test imports the machine's modules itself; a machine loaded from a file has its own
    # copy of them, so its options may be an equal model of another class of the same name.
    given = ctx.options
    typed = given if isinstance(given, options) else options.model_validate(given.model_dump())
    return Context(
        machine=ctx.machine,
        instance_id=ctx.instance_id,
        workspace=ctx.workspace,
        instance_dir=ctx.instance_dir,
        meta_dir=ctx.meta_dir,
        options=typed,
        clock=ctx.clock,
        log=ctx.log,
        executor=ctx.executor,
        transition=ctx.transition,
        interactive=ctx.interactive,
        reconfigure=ctx.reconfigure,
        failed_action=ctx.failed_action,
        read_stored=ctx.read_stored,
        read_permissions=ctx.read_permissions,
    )
