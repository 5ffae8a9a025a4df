"""``fsm recover``: rebuild a corrupt or missing document with the machine's ``recover`` hook.

The corrupt file is never deleted: it is moved aside to ``<document>.corrupt-<time>`` before the
rebuilt document is written, so nothing that was persisted is lost. The hook reports what it
could not recover (fields it would otherwise have to invent); those notes are journaled.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.definition import describe_validation
from fsm.errors import CorruptDocumentError, FsmError, InputError, UnknownInstanceError
from fsm.instance import Instance
from fsm.records import RecoverRecord
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
    """Rebuild the instance document when it is corrupt or missing.

    Holds the run lock (no run may step meanwhile) and the document lock, re-reads the document
    under them, and validates the rebuilt document before the corrupt file is moved aside, so a
    failing hook leaves everything as it was.
    """
    machine = instance.machine
    hook = machine.hooks.recover
    if hook is None:
        raise InputError(f"machine '{machine.name}' does not support recovery (no 'recover' hook)")
    started = time.monotonic()
    path = instance.paths.document
    run_lock = instance.store.run_lock(instance.id)
    try:
        with instance.store.document_lock(instance.id):
            try:
                loaded = instance.load()
            except (CorruptDocumentError, UnknownInstanceError):
                pass
            else:
                return RecoveryReport(
                    False, loaded.state, notes=["the document is valid: nothing to recover"]
                )
            try:
                raw_text: str | None = path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                raw_text = None
            data, notes = _rebuilt(instance, hook, raw_text)
            moved = _move_aside(instance, path) if raw_text is not None else None
            record = RecoverRecord(
                machine=machine.name,
                dest=machine.codec.read(instance.validate(data)),
                actor=actor,
                notes=notes,
                moved_aside=str(moved) if moved else None,
                duration_ms=round((time.monotonic() - started) * 1000, 3),
            )
            try:
                saved = instance.commit(data, record, base=None, locked=True)
            except BaseException:
                if moved is not None:
                    os.replace(moved, path)  # put the corrupt file back: nothing is lost
                raise
    finally:
        run_lock.release()
    instance.log.info("document_recovered", state=saved.state, notes=notes)
    return RecoveryReport(True, saved.state, moved, notes)


def _rebuilt(
    instance: Instance, hook: Callable[..., Any], raw_text: str | None
) -> tuple[dict[str, Any], list[str]]:
    """Run the hook and validate its document; any failure is one clear FsmError."""
    name = instance.machine.name
    try:
        result = hook(instance.context(), raw_text)
    except FsmError:
        raise
    except Exception as exc:
        raise FsmError(f"recover hook of '{name}' failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, Recovery):
        raise FsmError(f"recover hook of '{name}' returned {type(result).__name__}")
    document = result.document
    data = (
        document.model_dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(document, BaseModel)
        else dict(document)
    )
    try:
        doc = instance.validate(data)
    except ValidationError as exc:
        raise FsmError(
            f"recover hook of '{name}' rebuilt an invalid document: {describe_validation(exc)}; "
            "nothing was changed"
        ) from exc
    if instance.machine.codec.read(doc) not in instance.machine.states:
        raise FsmError(f"recover hook of '{name}' rebuilt a document in an unknown state")
    return data, list(result.notes)


def _move_aside(instance: Instance, path: Path) -> Path:
    """Move the corrupt document to a name no earlier copy has (never overwriting one)."""
    stamp = instance.clock.now().strftime("%Y%m%dT%H%M%S")
    for number in range(1000):
        suffix = f"-{number}" if number else ""
        target = path.with_name(f"{path.name}.corrupt-{stamp}{suffix}")
        try:
            os.link(path, target)  # fails if the name is taken
        except FileExistsError:
            continue
        os.unlink(path)
        return target
    raise FsmError(f"cannot find a free name beside {path} to keep the corrupt document")
