"""The context handed to guards, actions and hooks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from fsm.clock import Clock
from fsm.executor import Executor

__all__ = ["Context", "OptionsT_co", "TransitionInfo"]

OptionsT_co = TypeVar("OptionsT_co", bound=BaseModel, covariant=True, default=BaseModel)
"""The machine's options model: ``Context[LoopOptions]`` types ``ctx.options`` as LoopOptions."""


@dataclass(frozen=True)
class TransitionInfo:
    """The transition being taken: its event, source and destination states."""

    event: str
    source: str
    dest: str


@dataclass(frozen=True)
class Context(Generic[OptionsT_co]):
    """Everything an action may use besides the document.

    ``workspace`` is the folder the instance works on; ``document_path`` is where its document is
    persisted and ``meta_dir`` where fsm keeps its journal, log and locks. ``options`` is the
    machine's validated options model (an instance of the class the machine registered, so a
    function annotated ``ctx: Context[MyOptions]`` reads ``ctx.options.x`` typed, without a
    cast). ``log`` is a structlog logger bound with machine, instance
    and state. ``transition`` is set while an action or guard runs for a transition.
    ``interactive`` is true when a person drives the run (``fsm run --interactive``).
    ``failed_action`` names the action (or ``guard <name>``, or ``validation``) whose failure an
    ``on_error`` hook is recording.
    """

    machine: str
    instance_id: str
    workspace: Path
    document_path: Path
    meta_dir: Path
    options: OptionsT_co
    clock: Clock
    log: Any
    executor: Executor
    transition: TransitionInfo | None = None
    interactive: bool = False
    failed_action: str | None = None

    def for_transition(self, event: str, source: str, dest: str) -> Context[OptionsT_co]:
        """A copy of this context for one transition."""
        return replace(self, transition=TransitionInfo(event, source, dest))

    @property
    def instance_dir(self) -> Path:
        """The folder holding the instance document."""
        return self.document_path.parent
