"""How the FSM state is stored in a ``TuningState`` document.

The original skill's ``status`` (pending|running|completed|failed, plus ``paused`` and
``user_exit``) is the lifecycle layer the control plane owns; it cannot also say where in the tuning
loop an instance is. So the codec reads two fields:

* a final status (``completed``, ``failed``, ``user_exit``) *is* the FSM state;
* otherwise ``phase`` is the FSM state (``running``, ``context_diagnosed``, ... ``verified``,
  ``fix_applied``), and a document without one (the original skill's template) is in ``pending``.

Writing a state sets ``phase``, and for a final state ``status`` too, so the two never disagree.
A paused instance keeps its ``phase``: resuming continues where it stopped. ``current_action``
is not used for this: in CCW it names the action running *during* a step, and a step here is one
transaction, so it is always null in a saved document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fsm.registry import Update

__all__ = ["FINAL_STATUSES", "TuningCodec"]

FINAL_STATUSES = frozenset({"completed", "failed", "user_exit"})


def _get(doc: Any, key: str) -> Any:
    return doc.get(key) if isinstance(doc, Mapping) else getattr(doc, key, None)


class TuningCodec:
    """Reads the FSM state from ``status``/``phase`` and writes it back to both."""

    def read(self, doc: Any) -> str:
        """The FSM state of ``doc`` (a model or its JSON)."""
        status = _get(doc, "status")
        if status in FINAL_STATUSES:
            return str(status)
        phase = _get(doc, "phase")
        return str(phase) if phase else "pending"

    def write(self, doc: Any, state: str) -> Update:
        """The update that puts ``doc`` in ``state``."""
        if state in FINAL_STATUSES:
            return {"phase": state, "status": state}
        return {"phase": state}
