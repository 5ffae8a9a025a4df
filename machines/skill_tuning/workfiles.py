"""Side files in the work dir (diagnoses, proposals, reports) and the machine's options."""

from __future__ import annotations

import json
from typing import Any

from fsm.helpers import atomic_write_bytes

from .backup import ensure_inside
from .model import TuningState
from .options import TuningContext
from .paths import shown, work_root

__all__ = ["to_json", "write_side_file"]


def write_side_file(doc: TuningState, ctx: TuningContext, name: str, text: str) -> str:
    """Write ``name`` under the work dir; return its path as the document shows it.

    Text quoted from a skill file that is not valid UTF-8 carries the undecodable bytes as lone
    surrogates (see :mod:`.skill`); they are written as ``\\udcXX`` escapes, which keeps a JSON
    side file valid and a report readable instead of failing the step. The file's mode is what
    the umask gives and no more than the instance document's (``ctx.side_file_mode()``)."""
    target = ensure_inside(work_root(doc, ctx) / name, work_root(doc, ctx))
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", errors="backslashreplace")
    atomic_write_bytes(target, data, mode=ctx.side_file_mode())
    return shown(target, ctx)


def to_json(value: Any) -> str:
    """``value`` as indented JSON text with a final newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
