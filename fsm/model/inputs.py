"""Creation inputs: what ``fsm new`` (``--set``, ``--input``) and ``POST /api/instances/{machine}``
may give a new instance, parsed for the types the machine wants and checked before anything is
written.

* **Which keys.** A machine's inputs model (``inputs:`` in its definition) names its creation
  inputs; every other key is refused, with where it belongs (an option, a field the machine
  sets) or the closest input. A machine that declares no inputs model takes no inputs. Fields
  fsm itself owns are refused even when an inputs model names them: the FSM state field, the
  control status and the fields the control owns (``control.field``, ``control.owned``) and the
  timestamps of ``storage.touch``. An instance created with those set could never be driven.
* **How big.** Inputs larger than a document may be (:data:`fsm.base.jsonio.MAX_BYTES`) are refused
  before the create hook runs (:class:`~fsm.base.errors.InputTooLargeError`, HTTP 413), and so is a
  created document that would be larger: nothing is written.
* **Every problem at once.** Key and size problems are collected, then the create hook is still
  asked about the inputs it may see (it refuses bad values with one message), so one command
  reports all of them, ``; ``-separated.
* **Typed ``--set`` values.** ``--set KEY=VALUE`` gives a text field (``str``, a ``Literal`` of
  strings, a string enum, optional or not) the text as written, so ``--set version=1.0`` is
  ``"1.0"``; any other field gets the value parsed as JSON when it parses (``--set limit=3``,
  ``--set files='["a.py"]'``), else the text.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fsm.base import jsonio
from fsm.base.errors import DocumentInputError, InputTooLargeError
from fsm.model.paths import annotation_at

if TYPE_CHECKING:
    from pydantic import BaseModel

    from fsm.model.definition import MachineSpec
    from fsm.model.machine import Machine

__all__ = ["check_document_size", "engine_owned_fields", "input_problems", "parse_set_values"]


def parse_set_values(
    machine: Machine, items: Iterable[str], model: type[BaseModel] | None = None
) -> dict[str, Any]:
    """``["title=1.0", "limit=3"]`` as the machine's inputs (or as ``model``'s, a machine
    command's): a text field's value is the text as written, any other value JSON when it
    parses, else the text; a malformed item is an error."""
    from fsm.model.config import parse_value, set_dotted

    result: dict[str, Any] = {}
    problems: list[str] = []
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            problems.append(f"invalid value '{item}': expected KEY=VALUE")
            continue
        if _wants_text(annotation_at(model or machine.inputs_model, key)):
            value: Any = text
        else:
            try:
                value = parse_value(text)
            except jsonio.JsonError as exc:
                problems.append(f"invalid value '{key}': {exc}")
                continue
            kind = _structure(annotation_at(machine.inputs_model, key))
            if kind is not None and isinstance(value, str):
                example = '\'{"name": "value"}\'' if kind == "an object" else '\'["a", "b"]\''
                problems.append(
                    f"invalid value '{key}': {kind} is written as JSON (e.g. --set "
                    f"{key}={example}), and {text!r} is not JSON: {_json_problem(text)}"
                )
                continue
        set_dotted(result, key, value)
    if problems:
        raise DocumentInputError("; ".join(problems))
    return result


def _alternatives(annotation: Any) -> list[Any]:
    """The types a field of this type may hold, ``Annotated`` and unions unwrapped and ``None``
    left out (``list[str] | None`` -> ``[list[str]]``)."""
    if annotation is None:
        return []
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _alternatives(args[0])
    if origin in (typing.Union, types.UnionType):
        return [kind for arg in args if arg is not type(None) for kind in _alternatives(arg)]
    return [annotation]


def _structure(annotation: Any) -> str | None:
    """``"an object"`` or ``"a list"`` when a field of this type holds only that (None allowed),
    so that a value that is not JSON cannot be meant as text; else None."""
    kinds = {_structure_of(kind) for kind in _alternatives(annotation)}
    return kinds.pop() if len(kinds) == 1 else None


def _structure_of(annotation: Any) -> str | None:
    origin = typing.get_origin(annotation)
    if origin in (dict, Mapping) or annotation is dict:
        return "an object"
    if origin in (list, tuple, set, frozenset, Sequence) or annotation is list:
        return "a list"
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "an object"
    return None


def _json_problem(text: str) -> str:
    """What the JSON parser says of ``text`` (its first complaint, with the position)."""
    try:
        json.loads(text)
    except ValueError as exc:
        return str(exc)
    return "it parses, but not as fsm reads JSON"


def _wants_text(annotation: Any) -> bool:
    """True when a field of this type holds text only (None allowed): its value is the text."""
    kinds = _alternatives(annotation)
    return bool(kinds) and all(_is_text(kind) for kind in kinds)


def _is_text(annotation: Any) -> bool:
    if annotation is str:
        return True
    if typing.get_origin(annotation) is typing.Literal:
        return all(isinstance(arg, str) for arg in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return all(isinstance(member.value, str) for member in annotation)
    return False


def engine_owned_fields(spec: MachineSpec) -> dict[str, str]:
    """The document fields fsm sets itself, each with what it is (no input may set them)."""
    owned: dict[str, str] = {}
    if spec.state.field is not None:
        owned[spec.state.field] = "the FSM state (a new instance starts in its initial state)"
    if spec.control is not None:
        owned[spec.control.field] = "the control status (set by start, pause, resume, stop)"
        for path in spec.control.owned:
            owned.setdefault(path, "set by the control commands")
    for path in spec.storage.touch:
        owned.setdefault(path, "a timestamp fsm sets at every save")
    return owned


def input_problems(machine: Machine, inputs: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Every problem of ``inputs`` for a new instance of ``machine`` that can be found before its
    create hook runs (keys it does not take, fields fsm owns), and the inputs its hook may still
    be shown (the keys it takes); inputs too large for a document are refused at once."""
    size = _size(inputs)
    if size > jsonio.MAX_BYTES:
        raise InputTooLargeError(
            f"the creation inputs are {_mib(size)}, more than a document may hold "
            f"({_mib(jsonio.MAX_BYTES)}): nothing was created"
        )
    from fsm.model.settings import input_key_problems, input_settings

    problems: list[str] = [
        f"'{path}' holds text that is not Unicode (a lone surrogate such as \\ud800): a "
        "document is UTF-8 and cannot hold it"
        for path in _not_unicode(inputs, "")
    ]
    owned = engine_owned_fields(machine.spec)
    for path, what in owned.items():
        if _has_path(inputs, path.split(".")):
            problems.append(f"'{path}' cannot be given at creation: it is {what}")
    rest = {key: value for key, value in inputs.items() if key not in owned}
    if machine.inputs_model is None:
        if rest:
            problems.append(
                f"{machine.name} takes no creation inputs (its definition names no inputs "
                f"model): '{next(iter(rest))}' cannot be given"
            )
        return problems, {}
    problems += input_key_problems(machine, rest)
    tops = {setting.name.split(".")[0] for setting in input_settings(machine)}
    return problems, {key: value for key, value in rest.items() if key in tops}


def check_document_size(machine: Machine, data: Mapping[str, Any]) -> None:
    """Refuse a created document larger than a document may be, as it would be written (with
    the machine's indent), so that it can always be read back (nothing is written)."""
    from fsm.base.jsonrender import render_document

    try:
        size = len(render_document(data, machine.spec.storage.indent).encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError):
        size = _size(data)  # not JSON at all: validation says so in its own words
    if size > jsonio.MAX_BYTES:
        raise InputTooLargeError(
            f"cannot create {machine.name} instance: its document would be {_mib(size)}, more "
            f"than a document may hold ({_mib(jsonio.MAX_BYTES)}): nothing was created"
        )


def _has_path(data: Mapping[str, Any], path: list[str]) -> bool:
    current: Any = data
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            return False
        current = current[part]
    return True


def _not_unicode(data: Any, where: str) -> list[str]:
    """The dotted paths of ``data`` whose key or text holds a lone surrogate (JSON's
    ``"\\ud800"`` parses to one; no UTF-8 file can hold it)."""
    if isinstance(data, str):
        return [] if data.isascii() or not _has_surrogate(data) else [where or "the inputs"]
    found: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            path = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and _has_surrogate(key):
                found.append(path)
            else:
                found += _not_unicode(value, path)
    elif isinstance(data, list | tuple):
        for index, item in enumerate(data):
            found += _not_unicode(item, f"{where}[{index}]")
    return found


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _size(data: Mapping[str, Any]) -> int:
    """The bytes of ``data`` as compact JSON (a lower bound of the file it makes)."""
    try:
        return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    except (TypeError, ValueError, UnicodeEncodeError):
        return 0  # not JSON at all: validation says so in its own words


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"
