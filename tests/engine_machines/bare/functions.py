"""A machine without control block or error hook, with a manual approval state."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fsm.model.context import Context
from fsm.model.registry import Registry, Update

registry = Registry()


@registry.document
class Ticket(BaseModel):
    """The ticket document."""

    model_config = ConfigDict(extra="forbid")

    state: str = "open"
    work: int = 0
    explode: bool = False


@registry.inputs
class TicketInputs(BaseModel):
    """What ``fsm new bare`` takes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    explode: bool = False
    """Make the work raise (to test a failing action)."""


@registry.action
def do_work(doc: Ticket, ctx: Context) -> Update:
    """Do some work, or raise when told to."""
    if doc.explode:
        raise ValueError("the work exploded")
    return {"work": doc.work + 1}
