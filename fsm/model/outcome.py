"""What steps and runs report: their outcomes, exit codes and the choices offered to a person."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "RUN_ENDED_EVENTS",
    "Choice",
    "Chooser",
    "RunOutcome",
    "RunResult",
    "StepOutcome",
    "StepResult",
    "Verdict",
]

StepOutcome = Literal["applied", "failed", "blocked", "final", "waiting"]
RunOutcome = Literal["completed", "failed", "paused", "stopped", "waiting", "limit", "error"]

EXIT_CODES: dict[RunOutcome, int] = {
    "completed": 0,
    "failed": 4,
    "stopped": 5,
    "paused": 5,
    "waiting": 5,
    "limit": 5,
    "error": 1,
}

RUN_ENDED_EVENTS: dict[RunOutcome, str] = {
    "completed": "run_completed",
    "failed": "run_failed",
    "stopped": "run_stopped",
    "paused": "run_paused",
    "waiting": "run_waited_for_input",
    "limit": "run_reached_step_limit",
    "error": "run_gave_up",
}
"""The log event (a fact, past tense) that ends a run with each outcome."""


@dataclass(frozen=True)
class Verdict:
    """Whether an instance that ended reached its machine's goal, and why, in one line.

    A machine's ``outcome`` hook returns one for an instance in a final state; without the hook
    the state's tags decide. Only a verdict that says ``success`` makes a run ``completed``
    (exit 0): a final state tagged ``success`` whose document shows that the goal was not
    reached is reported as a failure.
    """

    success: bool
    reason: str


@dataclass(frozen=True)
class StepResult:
    """What one step did."""

    outcome: StepOutcome
    state: str
    status: str | None
    event: str | None = None
    source: str | None = None
    dest: str | None = None
    error: str | None = None
    uncounted: bool = False
    """A failed step whose error bookkeeping (the ``on_error`` hook) failed too: the machine's
    error limits could not count it, so a run does not go on."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended, with the steps it took."""

    outcome: RunOutcome
    state: str
    status: str | None
    steps: list[StepResult] = field(default_factory=list)
    message: str = ""

    @property
    def exit_code(self) -> int:
        """The command-line exit code of this outcome."""
        return EXIT_CODES[self.outcome]


@dataclass(frozen=True)
class Choice:
    """An event a person may choose in interactive mode."""

    event: str
    description: str


Chooser = Callable[[str, Sequence[Choice]], "str | None"]
