"""Ids read from input files, checked before they become part of a path.

Issue ids come from the issues file, solution and task ids from solution files and planning
agents: all of them are text someone else wrote. An issue id names files
(``solutions/{id}.jsonl``, ``{id}-plan.json``, ``{id}-execution.json``), so ``../../../../tmp/x``
would write outside the workspace. Every such id must pass the rule of instance ids
(:func:`fsm.helpers.validate_id`: letters, digits, ``.``, ``_`` and ``-``, starting with a letter
or digit, no ``..``). An id that does not is an error for its issue, never a path.
"""

from __future__ import annotations

from fsm.errors import InvalidIdError
from fsm.helpers import validate_id

__all__ = ["UnsafeIdError", "checked_id", "shown", "unsafe_id_problem"]

_ID_RULE = "use letters, digits, '.', '_' and '-', starting with a letter or digit, without '..'"


class UnsafeIdError(ValueError):
    """An id from an input file that must not become part of a path."""


def shown(text: str) -> str:
    """``text`` with control characters (and other non-printables) escaped, for one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def unsafe_id_problem(value: str, what: str = "issue id") -> str | None:
    """Why ``value`` cannot name a file (one line), or None when it is safe."""
    try:
        validate_id(value)
    except InvalidIdError:
        return f"unsafe {what} '{shown(value)}': {_ID_RULE}"
    return None


def checked_id(value: str, what: str = "issue id") -> str:
    """``value`` when it is safe as a file name; UnsafeIdError otherwise."""
    problem = unsafe_id_problem(value, what)
    if problem is not None:
        raise UnsafeIdError(problem)
    return value
