"""What a step and a run return, and a machine's verdict.

Public: the names are defined in :mod:`fsm.model.outcome`.
"""

from fsm.model.outcome import (
    RUN_ENDED_EVENTS,
    Choice,
    Chooser,
    RunOutcome,
    RunResult,
    StepOutcome,
    StepResult,
    Verdict,
)

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
