"""What a machine can be told: its options and its creation inputs, described for people.

Options (the machine's options model) belong to a workspace: they are set in ``fsm.toml``
(``[machine.<name>]``) or for one command with ``-o KEY=VALUE``. Creation inputs (the machine's
inputs model, when it declares one) belong to one instance: they are given to ``fsm new`` with
``--set KEY=VALUE`` or ``--input FILE.json``. ``fsm options MACHINE`` lists both from the
models' fields (type, default, the first sentence of the field's docstring), and a key given in
the wrong place is answered with where it belongs.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from fsm.base.errors import DocumentInputError
from fsm.model.definition import did_you_mean

if typing.TYPE_CHECKING:
    from fsm.model.machine import Machine

__all__ = [
    "Setting",
    "check_input_keys",
    "input_key_problems",
    "input_settings",
    "misplaced_hint",
    "model_settings",
    "option_settings",
]


@dataclass(frozen=True)
class Setting:
    """One option or creation input."""

    name: str
    type: str
    default: str
    required: bool
    help: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def option_settings(machine: Machine) -> list[Setting]:
    """The machine's options."""
    return _settings(machine.options_model)


def input_settings(machine: Machine) -> list[Setting]:
    """The machine's creation inputs (empty when it declares no inputs model)."""
    return _settings(machine.inputs_model) if machine.inputs_model is not None else []


def model_settings(model: type[BaseModel]) -> list[Setting]:
    """The fields of any inputs model (a machine command's), as :func:`input_settings` gives
    the creation inputs'."""
    return _settings(model)


def _settings(model: type[BaseModel], prefix: str = "") -> list[Setting]:
    """One row per field; the fields of a nested model are rows of their own, as the dotted
    keys ``--set`` takes (``context.max_rounds``)."""
    rows = []
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            rows.extend(_settings(nested, f"{key}."))
            continue
        required = info.is_required()
        default = "" if required else _shown_default(info)
        rows.append(Setting(key, _type_name(info.annotation), default, required, _help(info)))
    return rows


def _shown_default(info: FieldInfo) -> str:
    value = info.get_default(call_default_factory=True)
    if isinstance(value, Enum):
        value = value.value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _help(info: FieldInfo) -> str:
    """The first paragraph of the field's description (its docstring), on one line."""
    paragraph = (info.description or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split()).replace("``", "")


def _type_name(annotation: Any) -> str:
    """A short name for a field's type: ``text``, ``number``, ``auto|interactive``..."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        kinds = [_type_name(a) for a in args if a is not type(None)]
        optional = " or null" if type(None) in args else ""
        return " or ".join(kinds) + optional
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "object"
    simple: dict[Any, str] = {str: "text", int: "integer", float: "number", bool: "true|false"}
    if annotation in simple:
        return simple[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "|".join(str(member.value) for member in annotation)
    return str(getattr(annotation, "__name__", annotation))


def misplaced_hint(machine: Machine, key: str, *, given_as: str) -> str:
    """Where ``key`` belongs when it was given as an option but is an input, or the reverse."""
    if given_as == "option" and key in {s.name for s in input_settings(machine)}:
        return (
            f"'{key}' is a creation input of {machine.name}, not an option: give it to "
            f"'fsm new {machine.name} --set {key}=...'"
        )
    if given_as == "input" and key in {s.name for s in option_settings(machine)}:
        return (
            f"'{key}' is an option of {machine.name}, not a creation input: set it in fsm.toml "
            f"[machine.{machine.name}] or with -o {key}=..."
        )
    return ""


def check_input_keys(machine: Machine, inputs: Mapping[str, Any]) -> None:
    """Refuse top-level input keys the machine's inputs model does not name (with where a key
    belongs, or a did-you-mean, and the list of valid inputs): every such key in one error."""
    problems = input_key_problems(machine, inputs)
    if problems:
        raise DocumentInputError("; ".join(problems))


def input_key_problems(machine: Machine, inputs: Mapping[str, Any]) -> list[str]:
    """One problem per key of ``inputs`` the machine's inputs model does not name (none when it
    declares no inputs model); the list of valid inputs ends the last one."""
    if machine.inputs_model is None:
        return []
    known = [setting.name for setting in input_settings(machine)]
    tops = {name.split(".")[0] for name in known}
    listed = f"the inputs of {machine.name} are: {', '.join(known)} ('fsm options {machine.name}')"
    problems: list[str] = []
    unknown = 0  # problems that the list of the inputs answers
    for key in _dotted_keys(inputs, tops, known):
        if key in known:
            continue
        hint = misplaced_hint(machine, key, given_as="input")
        unknown += not hint
        if hint:
            problems.append(hint)
        elif key in tops:
            fields = ", ".join(name for name in known if name.startswith(f"{key}."))
            problems.append(f"'{key}' takes fields ({fields}), not a value")
        elif key in machine.document_keys:
            problems.append(f"'{key}' cannot be set: the machine sets it")
        else:
            problems.append(
                f"unknown creation input '{key}' of {machine.name}{did_you_mean(key, known)}"
            )
    if unknown:
        problems.append(listed)
    return problems


def _dotted_keys(inputs: Mapping[str, Any], tops: set[str], known: list[str]) -> list[str]:
    """The keys of ``inputs`` as ``fsm options`` names them: nested objects of the inputs that
    are listed field by field are flattened to dotted keys (``context.max_rounds``)."""
    keys: list[str] = []
    for key, value in inputs.items():
        if key in tops and key not in known and isinstance(value, Mapping):
            keys.extend(f"{key}.{sub}" for sub in _dotted_keys(value, set(value), []))
        else:
            keys.append(key)
    return keys
