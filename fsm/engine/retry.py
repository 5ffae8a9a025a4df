"""``fsm retry``: reopen an instance that ended without reaching its goal, with the machine's
``retry`` hook.

A final state absorbs: no event leaves it, and the control commands refuse an instance that has
ended. Retrying is therefore not a transition of the machine but a command of its own, offered
only by machines that say how to do it: their ``retry`` hook gets the document and the items a
person named (issues, tasks; empty for every failed one) and returns a
:class:`~fsm.model.registry.Reopening`, the non-final state to go back to and the fields to reset.

It is refused (:class:`~fsm.base.errors.RefusedError`, exit 3), with nothing changed, for a machine
without the hook, an instance that has not ended, and one that ended reaching its goal. Otherwise
the reopened document is validated, written with the control status set to the active one (so
``fsm run`` drives it on), and journaled as one ``retry`` record naming what was reopened. The
retry does not run anything itself: like ``fsm start``, it leaves the work to ``fsm run`` (or
``fsm run --all``), which checks the preflight first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fsm.base.errors import FsmError, RefusedError
from fsm.base.update import apply_update
from fsm.engine.instance import Instance, Loaded
from fsm.model.definition import describe_validation
from fsm.model.records import RetryRecord
from fsm.model.registry import Reopening

__all__ = ["RetryReport", "retry", "retry_advice"]


@dataclass(frozen=True)
class RetryReport:
    """What a retry did: the state and status the instance was reopened in, and the items."""

    source: str
    state: str
    status: str | None
    items: list[str]


def retry(
    instance: Instance,
    items: Sequence[str] = (),
    *,
    actor: str = "cli",
    reason: str | None = None,
) -> RetryReport:
    """Reopen ``instance`` (ended without reaching its goal) for the ``items`` named, or for all
    its failed ones; RefusedError when the machine or the instance does not allow it.

    Holds the run lock (no run may be driving the instance) and the document lock, and works on
    the document as it is on disk.
    """
    machine = instance.machine
    hook = machine.hooks.retry
    if hook is None:
        raise RefusedError(
            f"machine '{machine.name}' cannot retry an instance (it has no 'retry' hook): "
            "create a new instance instead"
        )
    started = time.monotonic()
    run_lock = instance.store.lease(instance.id)
    try:
        instance.repair()
        with instance.confined(), instance.store.lock(instance.id):
            current = instance.load_unchecked()
            _check_failed(instance, current)
            reopening = _reopening(instance, hook, current, list(items))
            data = _reopened(instance, current, reopening)
            saved = instance.commit(
                data,
                RetryRecord(
                    source=current.state,
                    dest=reopening.state,
                    status_from=current.status,
                    status_to=instance.status_of(data),
                    items=list(reopening.items),
                    actor=actor,
                    reason=reason,
                    duration_ms=round((time.monotonic() - started) * 1000, 3),
                ),
                base=current,
                locked=True,
            )
        instance.settle()
    finally:
        run_lock.release()
    instance.log.info(
        "instance_retried",
        actor=actor,
        reason=reason,
        items=list(reopening.items),
        source=current.state,
        state=saved.state,
        status=saved.status,
    )
    return RetryReport(current.state, saved.state, saved.status, list(reopening.items))


def retry_advice(instance: Instance, current: Loaded) -> str:
    """``"; 'fsm retry MACHINE ID' reopens it"`` for an instance that ended failed and whose
    machine can retry, else ``""``: the end of a refusal that would otherwise leave a person
    without a way on."""
    machine = instance.machine
    if machine.hooks.retry is None:
        return ""
    verdict = machine.verdict(current.state, current.doc)
    if verdict is None or verdict.success:
        return ""
    return f"; 'fsm retry {machine.name} {instance.id}' reopens it"


def _check_failed(instance: Instance, current: Loaded) -> None:
    """Refuse unless the instance ended without reaching its goal."""
    verdict = instance.machine.verdict(current.state, current.doc)
    if verdict is None:
        status = f", status {current.status}" if current.status is not None else ""
        raise RefusedError(
            f"cannot retry instance '{instance.id}': it has not ended (state '{current.state}'"
            f"{status}); retry is for an instance that ended failed ('fsm run' continues this one)"
        )
    if verdict.success:
        raise RefusedError(
            f"cannot retry instance '{instance.id}': it ended in '{current.state}' reaching its "
            f"goal ({verdict.reason}): nothing failed"
        )


def _reopening(instance: Instance, hook: Any, current: Loaded, items: list[str]) -> Reopening:
    """Ask the hook how to reopen; a hook that fails or answers nonsense is one clear error."""
    name = instance.machine.name
    try:
        reopening = hook(current.doc, instance.context(), items)
    except FsmError:
        raise
    except Exception as exc:
        raise FsmError(f"retry hook of '{name}' failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(reopening, Reopening):
        raise FsmError(f"retry hook of '{name}' returned {type(reopening).__name__}, not Reopening")
    if reopening.state not in instance.machine.states or instance.machine.is_final(reopening.state):
        raise FsmError(
            f"retry hook of '{name}' reopens in '{reopening.state}', which is not a non-final "
            "state of the machine"
        )
    return reopening


def _reopened(instance: Instance, current: Loaded, reopening: Reopening) -> dict[str, Any]:
    """The document with the hook's update, the reopened state and the active status."""
    machine = instance.machine
    try:
        data = apply_update(current.data, reopening.update)
        doc = instance.validate(data)
        data = apply_update(data, machine.codec.write(doc, reopening.state))
        control = machine.spec.control
        if control is not None:
            data = apply_update(data, {control.field: control.active})
        doc = instance.validate(data)
    except ValidationError as exc:
        raise FsmError(
            f"retry of '{instance.id}' would write an invalid document: "
            f"{describe_validation(exc)}; nothing was changed"
        ) from exc
    if machine.codec.read(doc) != reopening.state:
        raise FsmError(
            f"retry of '{instance.id}' would not leave the instance in '{reopening.state}'; "
            "nothing was changed"
        )
    return data
