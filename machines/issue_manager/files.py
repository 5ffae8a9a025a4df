"""Atomic writes of the side files the machine keeps beside its document.

Every file is written to a temporary file in the same folder, flushed to disk and moved over the
target with ``os.replace``, so a reader (or a crash) sees the old content or the new one, never
half of each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fsm.helpers import atomic_write_text

__all__ = ["read_json", "write_json_atomic", "write_text_atomic"]


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` atomically (the engine's atomic write)."""
    atomic_write_text(path, text, mode=mode)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as 2-space JSON (as the original skill's ``JSON.stringify(state, null,
    2)``)."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    """The JSON value in ``path``, or None when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return json.loads(text)
