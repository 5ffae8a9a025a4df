"""The inputs of ``fsm new ccw-loop``, checked as the dashboard's create and update API checks them.

``--set`` values are parsed as JSON when they parse, so ``--set title=2024`` arrives as a number
and ``--set title=true`` as a boolean: such scalars are taken as the text that was typed. An
object or a list is never a title. ``max_iterations`` must be a finite number of at least 1
(``1e400`` parses as infinity, which JSON cannot hold and the dashboard could not read back), and
the dashboard's optional ``tags`` (strings), ``priority`` (low, medium, high) and ``notes`` (text)
keep their types, so the file stays one the dashboard accepts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.errors import DocumentInputError

__all__ = ["INPUTS", "LoopInputs", "checked_inputs"]

_PRIORITIES = ("low", "medium", "high")


class LoopInputs(BaseModel):
    """What ``fsm new ccw-loop`` takes, as the dashboard's create form (``fsm options ccw-loop``
    lists them; the engine refuses any other key before :func:`checked_inputs` runs)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    title: str = ""
    """What the loop is for, e.g. "Fix the parser" (default: the start of the description)."""
    description: str = ""
    """The work in a few sentences; a loop without a task list develops it as its one task."""
    max_iterations: int = 10
    """Develop, debug and validate actions the loop may take before it ends failed."""
    tags: list[str] = Field(default_factory=list)
    """Labels the dashboard shows, e.g. ["parser", "bug"]."""
    priority: Literal["low", "medium", "high"] | None = None
    """The dashboard's priority."""
    notes: str = ""
    """Free text the dashboard keeps with the loop."""


INPUTS = frozenset(LoopInputs.model_fields)


def checked_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The loop's API fields from ``inputs``: trimmed title and description, max_iterations
    (default 10) and the optional fields given; raise :class:`DocumentInputError` naming every
    bad input at once."""
    problems: list[str] = []

    def checked(check: Callable[[], Any]) -> Any:
        try:
            return check()
        except DocumentInputError as exc:
            problems.append(str(exc))
            return None

    title = checked(lambda: _text(inputs, "title")) or ""
    description = checked(lambda: _text(inputs, "description")) or ""
    if not title and not description and not problems:
        problems.append("a loop needs a title (--set title=...) or a description")
    fields: dict[str, Any] = {
        "title": title or description[:100],
        "description": description,
        "max_iterations": checked(lambda: _limit(inputs.get("max_iterations", 10))),
    }
    if "tags" in inputs:
        fields["tags"] = checked(lambda: _tags(inputs["tags"]))
    if "priority" in inputs:
        fields["priority"] = checked(lambda: _priority(inputs["priority"]))
    if "notes" in inputs:
        fields["notes"] = checked(lambda: _text(inputs, "notes"))
    if problems:
        raise DocumentInputError("; ".join(problems))
    return fields


def _tags(tags: Any) -> list[str]:
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise DocumentInputError(f'tags must be a list of strings (["a","b"]), got {tags!r}')
    return tags


def _priority(priority: Any) -> str:
    if priority not in _PRIORITIES:
        raise DocumentInputError(
            f"priority must be one of {', '.join(_PRIORITIES)}, got {priority!r}"
        )
    return str(priority)


def _text(inputs: Mapping[str, Any], key: str) -> str:
    """``inputs[key]`` as trimmed text ('' when absent or null); numbers and booleans become the
    JSON text they were parsed from."""
    value = inputs.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise DocumentInputError(f"{key} must be text, got {type(value).__name__} {value!r}")


def _limit(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DocumentInputError(f"max_iterations must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise DocumentInputError(f"max_iterations must be a finite number, got {value}")
    if value < 1:
        raise DocumentInputError(f"max_iterations must be at least 1, got {value}")
    return value
