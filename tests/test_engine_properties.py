"""Random legal and illegal events against an engine over a real temporary store."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fsm.base.clock import SimulatedClock
from fsm.base.errors import RefusedError
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import load_machine
from fsm.view.inspect import replay
from tests.conftest import COUNTER

MACHINE = load_machine(COUNTER)
EVENTS = ["count", "finish", "abort", "spoil", "launch"]
COMMANDS = ["start", "pause", "resume", "stop"]


class EngineStateMachine(RuleBasedStateMachine):
    """Drives one counter instance with random events, steps, control commands and edits."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="fsm-prop-"))
        self.workspace = Workspace(self.folder, clock=SimulatedClock(tick=0.001))
        self.instance: Instance = self.workspace.instance(MACHINE, "prop")
        self.final_state: str | None = None

    @initialize(
        limit=st.integers(min_value=0, max_value=4),
        fail_at=st.none() | st.integers(min_value=0, max_value=3),
    )
    def create(self, limit: int, fail_at: int | None) -> None:
        """Create the instance with a random limit and failure point."""
        self.instance.create({"limit": limit, "fail_at": fail_at, "max_errors": 2})

    def _attempt(self, action: object) -> None:
        before = self.instance.store.paths(self.instance.id).document.read_bytes()
        records = len(self.instance.journal.read().records)
        try:
            action()  # type: ignore[operator]
        except RefusedError:
            assert self.instance.store.paths(self.instance.id).document.read_bytes() == before
            assert len(self.instance.journal.read().records) == records

    @rule(event=st.sampled_from(EVENTS))
    def fire(self, event: str) -> None:
        """Fire a random event; a refused one changes nothing."""
        self._attempt(lambda: Engine(self.instance).fire(event))

    @rule()
    def step(self) -> None:
        """Take an automatic step."""
        Engine(self.instance).step()

    @rule(command=st.sampled_from(COMMANDS))
    def control(self, command: str) -> None:
        """Apply a random control command; an illegal one changes nothing."""
        self._attempt(lambda: ControlPlane(self.instance).apply(command))

    @rule(title=st.text(max_size=20))
    def edit_title(self, title: str) -> None:
        """Another program edits the title in place, as the dashboard does."""
        document = json.loads(self.instance.store.paths(self.instance.id).document.read_text())
        document["title"] = title
        self.instance.store.paths(self.instance.id).document.write_text(
            json.dumps(document, indent=2)
        )

    @invariant()
    def document_validates(self) -> None:
        """The persisted document always validates and is in a known state."""
        if self.instance.exists():
            self.instance.load()

    @invariant()
    def final_states_absorb(self) -> None:
        """Once final, the state never changes."""
        if not self.instance.exists():
            return
        state = self.instance.load().state
        if self.final_state is not None:
            assert state == self.final_state
        elif MACHINE.is_final(state):
            self.final_state = state

    @invariant()
    def journal_replays(self) -> None:
        """The journal reproduces the persisted state."""
        if self.instance.exists():
            assert replay(self.instance).problems == []

    def teardown(self) -> None:
        """Remove the temporary workspace."""
        shutil.rmtree(self.folder, ignore_errors=True)


EngineStateMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=15, deadline=None
)
TestEngineProperties = EngineStateMachine.TestCase
