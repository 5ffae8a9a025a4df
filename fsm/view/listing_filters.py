"""The value of ``fsm ls --status S``, checked when it matched nothing.

A status no machine declares and no instance has is a typo (``--status faild``), not a question
with an empty answer: it is refused (exit 2) with the closest status and the list of them. The
statuses of the listed machines are those their definitions name (the control block's ``active``
status, the statuses its commands leave and set, the ``status`` of states), those their document
models allow for the control field (a ``Literal`` or an enum), and those instances in the
workspace have. The check runs only when the filter matched nothing, so a listing that shows
rows costs nothing more.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base.errors import InputError
from fsm.model.definition import did_you_mean

if TYPE_CHECKING:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import Machine

__all__ = ["check_status_filter", "declared_statuses"]


def check_status_filter(
    status: str,
    targets: list[str],
    workspace_path: Path,
    option_items: list[str],
    open_workspace: Callable[[], Workspace],
) -> None:
    """Refuse ``status`` when no listed machine has it and no listed instance is in it."""
    from fsm.model.discovery import open_machine
    from fsm.view.listing_index import list_indexed

    known: dict[str, None] = {}
    for target in targets:
        known.update(dict.fromkeys(declared_statuses(open_machine(target))))
    if status in known:
        return
    rows = list_indexed(workspace_path, targets, None, option_items, open_workspace)
    known.update(dict.fromkeys(row.status for row in rows if row.status))
    if status in known:
        return
    if not known:
        raise InputError(
            f"--status '{status}': no listed machine has a control status to filter by"
        )
    raise InputError(
        f"unknown status '{status}' for --status{did_you_mean(status, known)}; the statuses are: "
        f"{', '.join(known)}"
    )


def declared_statuses(machine: Machine) -> list[str]:
    """The control statuses ``machine`` names, in the order its definition and model give."""
    control = machine.spec.control
    if control is None:
        return []
    found: dict[str, None] = {control.active: None}
    for command in control.commands.values():
        found.update(dict.fromkeys([*command.sources, command.dest]))
    found.update(dict.fromkeys(s.status for s in machine.spec.states.values() if s.status))
    found.update(dict.fromkeys(_allowed_values(machine.document_model, control.field)))
    return list(found)


def _allowed_values(model: Any, path: str) -> Iterable[str]:
    """The text values the field at dotted ``path`` of ``model`` allows, when it says."""
    from fsm.model.paths import annotation_at  # pydantic: imported once a machine is loaded

    annotation = annotation_at(model, path)
    return [] if annotation is None else _texts(annotation)


def _texts(annotation: Any) -> list[str]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return [arg for arg in args if isinstance(arg, str)]
    if origin is typing.Annotated:
        return _texts(args[0])
    if args and origin is not None and origin not in (list, dict, tuple, set):
        return [text for arg in args for text in _texts(arg)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(member.value) for member in annotation]
    return []
