"""``fsm command``: a machine's own commands, such as adding a task to a loop.

Some requests of a person are neither an event of the machine (they move no state) nor a control
command (they set no status): ccw-loop's dashboard adds a task to a running loop. A machine
declares them under ``commands:`` in its machine.yaml, each with a registered ``handler`` hook and,
when it takes any, an ``inputs`` model::

    commands:
      add_task:
        description: Add a task at the end of the loop's task list
        inputs: NewTask
        handler: add_task

The handler gets the document, the instance's context and the validated inputs, and returns the
document's update (or None); it may write the instance's side files (confined to the workspace,
as actions are). The command runs under the document lock on the document as it is on disk, and
is journaled as one ``command`` record with its inputs, actor and reason, whether or not the
document changed. It is refused (exit 3) once the instance has ended; inputs that do not validate
are bad input (exit 2), and nothing is changed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from fsm.base.errors import FsmError, InputError, RefusedError
from fsm.base.update import apply_update
from fsm.engine.instance import Instance, Loaded
from fsm.model.definition import describe_validation
from fsm.model.machine import MachineCommand
from fsm.model.records import CommandRecord

__all__ = ["machine_command", "run_command"]


def machine_command(instance: Instance, name: str) -> MachineCommand:
    """The machine's command ``name``; InputError naming the ones it has."""
    machine = instance.machine
    found = machine.commands.get(name)
    if found is None:
        have = ", ".join(machine.commands) or "none"
        raise InputError(f"machine '{machine.name}' has no command '{name}' (its commands: {have})")
    return found


def run_command(
    instance: Instance,
    name: str,
    inputs: Mapping[str, Any] | None = None,
    *,
    actor: str = "cli",
    reason: str | None = None,
) -> Loaded:
    """Run the machine's command ``name`` with ``inputs`` on ``instance``; the saved version."""
    command = machine_command(instance, name)
    given = _validated(instance, command, dict(inputs or {}))
    started = time.monotonic()
    instance.repair()
    with instance.confined(), instance.store.lock(instance.id):
        current = instance.load_unchecked()
        if instance.machine.is_final(current.state):
            raise RefusedError(
                f"cannot {name} instance '{instance.id}': it has ended in final state "
                f"'{current.state}'"
            )
        data = _updated(instance, command, current, given)
        saved = instance.commit(
            data,
            CommandRecord(
                event=name,
                source=current.state,
                dest=current.state,
                actor=actor,
                reason=reason,
                duration_ms=round((time.monotonic() - started) * 1000, 3),
                extra={"inputs": given} if given else {},
            ),
            base=current,
            locked=True,
        )
    instance.settle()
    instance.log.info("machine_command_applied", command=name, actor=actor, reason=reason)
    return saved


def _validated(
    instance: Instance, command: MachineCommand, inputs: dict[str, Any]
) -> dict[str, Any]:
    """The inputs as the command's model reads them (JSON values); InputError when they do not
    validate, or when a command without inputs is given some."""
    model = command.inputs_model
    if model is None:
        if inputs:
            raise InputError(
                f"command '{command.name}' takes no inputs (given: {', '.join(inputs)})"
            )
        return {}
    try:
        return model.model_validate(inputs).model_dump(mode="json", exclude_none=True)
    except ValidationError as exc:
        raise InputError(
            f"invalid inputs for {command.name} of '{instance.id}': {describe_validation(exc)}"
        ) from None


def _updated(
    instance: Instance, command: MachineCommand, current: Loaded, inputs: dict[str, Any]
) -> dict[str, Any]:
    """The document after the handler's update, validated."""
    ctx = instance.context().for_transition(command.name, current.state, current.state)
    model = command.inputs_model
    given = model.model_validate(inputs) if model is not None else None
    try:
        update = command.handler(current.doc, ctx, given)
        data = apply_update(current.data, update) if update else dict(current.data)
        instance.validate(data)
    except FsmError:
        raise
    except ValidationError as exc:
        raise FsmError(
            f"{command.name} of '{instance.id}' would write an invalid document: "
            f"{describe_validation(exc)}; nothing was changed"
        ) from exc
    except Exception as exc:
        raise FsmError(
            f"{command.name} of '{instance.id}' failed: {type(exc).__name__}: {exc}; "
            "nothing was changed"
        ) from exc
    return data
