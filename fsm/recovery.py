"""``fsm recover``: rebuild a corrupt or missing document with the machine's ``recover`` hook.

The corrupt file is never deleted: it is moved aside to ``<document>.corrupt-<time>`` before the
rebuilt document is written, so nothing that was persisted is lost. The hook reports what it
could not recover (fields it would otherwise have to invent); those notes are journaled.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from fsm.errors import CorruptDocumentError, InputError, UnknownInstanceError
from fsm.instance import Instance
from fsm.registry import Recovery

__all__ = ["RecoveryReport", "recover"]


@dataclass
class RecoveryReport:
    """What ``recover`` did."""

    recovered: bool
    state: str
    moved_aside: Path | None = None
    notes: list[str] = field(default_factory=list)


def recover(instance: Instance, *, actor: str = "cli") -> RecoveryReport:
    """Rebuild the instance document when it is corrupt or missing."""
    machine = instance.machine
    hook = machine.hooks.get("recover")
    if hook is None:
        raise InputError(f"machine '{machine.name}' does not support recovery (no 'recover' hook)")
    try:
        loaded = instance.load()
    except (CorruptDocumentError, UnknownInstanceError):
        pass
    else:
        return RecoveryReport(
            False, loaded.state, notes=["the document is valid: nothing to recover"]
        )
    started = time.monotonic()
    path = instance.paths.document
    with instance.store.document_lock(instance.id):
        try:
            raw_text: str | None = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raw_text = None
        result = hook(instance.context(), raw_text)
        if not isinstance(result, Recovery):
            raise InputError(f"recover hook of '{machine.name}' returned {type(result).__name__}")
        document = result.document
        data = (
            document.model_dump(mode="json", by_alias=True, exclude_unset=True)
            if isinstance(document, BaseModel)
            else dict(document)
        )
        moved = None
        if raw_text is not None:
            stamp = instance.clock.now().strftime("%Y%m%dT%H%M%S")
            moved = path.with_name(f"{path.name}.corrupt-{stamp}")
            os.replace(path, moved)
        record = {
            "kind": "recover",
            "machine": machine.name,
            "event": None,
            "source": None,
            "dest": machine.codec.read(instance.validate(data)),
            "actor": actor,
            "notes": result.notes,
            "moved_aside": str(moved) if moved else None,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
        }
        saved = instance.commit(data, record, base=None, locked=True)
    instance.log.info("document_recovered", state=saved.state, notes=result.notes)
    return RecoveryReport(True, saved.state, moved, list(result.notes))
