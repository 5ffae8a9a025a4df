"""Where the FSM state of a loop lives in its document: ``status`` plus ``skill_state``.

The dashboard owns ``status``; the loop's phase is ``skill_state.current_action``. The FSM state
is read from both:

==========================================  ==============
document                                    FSM state
==========================================  ==============
status completed / failed / user_exit       that final state
no skill_state, or init has not run yet     ``created``
skill_state.mode interactive                ``menu``
current_action init/develop/debug/validate  that phase
current_action null (Claude orchestrator)   the phase of ``last_action``
==========================================  ==============

``paused`` and ``running`` are not FSM states: they are the control layer, which the engine
checks before every step (CCW's skills' ``checkControlSignals``).
"""

from __future__ import annotations

from typing import Any

from fsm.registry import Update

from .model import LoopState
from .rules import is_initialized, phase_of_action

__all__ = ["FINAL_STATES", "PHASE_STATES", "LoopCodec"]

FINAL_STATES = ("completed", "failed", "user_exit")
PHASE_STATES = ("init", "develop", "debug", "validate")


class LoopCodec:
    """Reads and writes the FSM state of a ``LoopState``."""

    def read(self, doc: Any) -> str:
        """The FSM state ``doc`` is in."""
        loop = doc if isinstance(doc, LoopState) else LoopState.model_validate(doc)
        if loop.status in FINAL_STATES:
            return str(loop.status)
        state = loop.skill_state
        if state is None or not is_initialized(state):
            return "created"
        if state.mode == "interactive":
            return "menu"
        phase = state.current_action or phase_of_action(state.last_action) or "init"
        # "complete" while the status is not final: the dashboard changed the status back;
        # the phase rules decide again from the recorded results.
        return "validate" if phase == "complete" else phase

    def write(self, doc: Any, state: str) -> Update:
        """The update that puts ``doc`` into ``state``."""
        if state in PHASE_STATES:
            return {"skill_state.current_action": state}
        if state == "completed":
            return {"status": "completed", "skill_state.current_action": "complete"}
        if state in ("failed", "user_exit"):
            return {"status": state}
        if state in ("created", "menu"):
            return {}  # created has no skill_state yet; in the menu the last action's phase stays
        raise ValueError(f"ccw-loop has no state {state!r}")
