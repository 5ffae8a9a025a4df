"""``fsm recover``: rebuild a corrupt or missing document with the machine's ``recover`` hook.

The corrupt document is never deleted: its store moves it aside (:meth:`fsm.store.protocol.Store.
quarantine`; the file store to ``<document>.corrupt-<time>``) before the rebuilt document is
written, so nothing that was persisted is lost. The hook reports what it could not recover
(fields it would otherwise have to invent); those notes are journaled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.base.errors import CorruptDocumentError, FsmError, InputError, UnknownInstanceError
from fsm.engine.instance import Instance
from fsm.model.definition import describe_validation
from fsm.model.records import RecoverRecord
from fsm.model.registry import Recovery

__all__ = ["RecoveryReport", "recover"]


@dataclass
class RecoveryReport:
    """What ``recover`` did."""

    recovered: bool
    state: str
    moved_aside: str | None = None
    """Where the store keeps the corrupt document (a path for the file store)."""
    notes: list[str] = field(default_factory=list)


def recover(instance: Instance, *, actor: str = "cli") -> RecoveryReport:
    """Rebuild the instance document when it is corrupt or missing.

    Holds the run lease (no run may step meanwhile) and the document lock, re-reads the document
    under them, and validates the rebuilt document before the corrupt one is moved aside, so a
    failing hook leaves everything as it was.
    """
    machine = instance.machine
    hook = machine.hooks.recover
    if hook is None:
        raise InputError(f"machine '{machine.name}' does not support recovery (no 'recover' hook)")
    started = time.monotonic()
    store = instance.store
    run_lock = store.lease(instance.id)
    try:
        with store.lock(instance.id):
            try:
                loaded = instance.load()
            except (CorruptDocumentError, UnknownInstanceError):
                pass
            else:
                return RecoveryReport(
                    False, loaded.state, notes=["the document is valid: nothing to recover"]
                )
            raw = store.read_bytes(instance.id)
            raw_text = None if raw is None else raw.decode("utf-8", errors="replace")
            data, notes = _rebuilt(instance, hook, raw_text)
            moved = store.quarantine(instance.id) if raw is not None else None
            record = RecoverRecord(
                machine=machine.name,
                dest=machine.codec.read(instance.validate(data)),
                actor=actor,
                notes=notes,
                moved_aside=moved,
                duration_ms=round((time.monotonic() - started) * 1000, 3),
            )
            try:
                saved = instance.commit(data, record, base=None, locked=True)
            except BaseException:
                if moved is not None:
                    store.restore(instance.id, moved)  # put the corrupt one back: nothing lost
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
