"""Dotted paths (``control.status``, ``target_skill.path``) walked once for each kind of thing
they point into.

A machine names a document's fields by dotted path: its state field, its control field, the
keys of ``--set``. Three kinds of thing are walked along such a path, each by one function:

* plain JSON data (a document as read, an update): :func:`fsm.base.update.get_path`;
* a validated document (a pydantic model, possibly holding dicts): :func:`value_at`;
* a document model's class, for the type a field declares: :func:`annotation_at`.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel

__all__ = ["annotation_at", "model_in", "value_at"]


def value_at(doc: Any, path: str) -> Any:
    """The value at dotted ``path`` of the validated ``doc`` (attributes of models, keys of
    dicts), an enum member as its value; None when absent."""
    current: Any = doc
    for part in path.split("."):
        if isinstance(current, BaseModel):
            current = getattr(current, part, None)
        elif isinstance(current, Mapping):
            current = current.get(part)
        else:
            return None
    return current.value if isinstance(current, Enum) else current


def annotation_at(model: type[BaseModel] | None, path: str) -> Any:
    """The annotation of the field at dotted ``path`` of ``model``, through optional and
    annotated models and by field name or alias (None when unknown)."""
    annotation: Any = model
    for part in path.split("."):
        model_class = model_in(annotation)
        if model_class is None:
            return None
        found = None
        for name, info in model_class.model_fields.items():
            if part in (name, info.alias):
                found = info.annotation
                break
        if found is None:
            return None
        annotation = found
    return annotation


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or wraps in Optional / Annotated), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return model_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        models = [model_in(a) for a in typing.get_args(annotation) if a is not type(None)]
        return models[0] if len(models) == 1 else None
    return None
