"""The control plane: start, pause, resume and stop, from any process.

A machine declares its commands in ``control.commands``: the statuses each may be given in, the
status it sets, optionally the FSM state it moves the instance to, and actions producing extra
updates (a ``failure_reason``, a ``completed_at``). A command is applied under the document lock
to the document as it is on disk, journaled with actor and reason, and seen by a running
``fsm run`` before its next step. A command given in any other status is refused and changes
nothing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pydantic import ValidationError

from fsm.base.errors import ControlRefusedError, FsmError
from fsm.base.update import apply_update
from fsm.model.definition import describe_validation
from fsm.model.records import ControlRecord

if TYPE_CHECKING:
    from fsm.engine.instance import Instance, Loaded
    from fsm.model.definition import ControlCommandSpec

__all__ = ["ControlPlane"]


class ControlPlane:
    """Control commands of one instance."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.spec = instance.machine.spec.control

    def is_active(self, loaded: Loaded) -> bool:
        """True when steps may run (always, for machines without a control block)."""
        return self.spec is None or loaded.status == self.spec.active

    def is_paused(self, loaded: Loaded) -> bool:
        """True when the status is the one ``pause`` sets."""
        pause = self.spec.commands.get("pause") if self.spec is not None else None
        return pause is not None and loaded.status == pause.dest

    def can_resume(self, loaded: Loaded) -> bool:
        """True when ``resume`` or ``start`` could make the instance active again."""
        if self.spec is None:
            return False
        return any(
            name in self.spec.commands and loaded.status in self.spec.commands[name].sources
            for name in ("resume", "start")
        )

    def allowed(self, loaded: Loaded) -> list[str]:
        """Control commands legal in the instance's current status."""
        if self.spec is None or self.instance.machine.is_final(loaded.state):
            return []
        return [
            name for name, command in self.spec.commands.items() if loaded.status in command.sources
        ]

    def needs_start(self, loaded: Loaded) -> bool:
        """True when the instance has not been started yet (its status allows ``start`` but
        not ``resume``): a run starts it."""
        if self.spec is None or self.is_active(loaded):
            return False
        start = self.spec.commands.get("start")
        resume = self.spec.commands.get("resume")
        if start is None or loaded.status not in start.sources:
            return False
        return resume is None or loaded.status not in resume.sources

    def start_if_needed(self, loaded: Loaded, *, actor: str) -> Loaded:
        """Apply ``start`` when :meth:`needs_start` says so.

        Another process may change the instance between the run's read and its start (``fsm
        start`` racing ``fsm run``, a stop or pause pressed on a dashboard): when the start is
        refused because the instance no longer needs one, the run goes on with the instance as
        it is now. Active, it drives it rather than leave it running with nothing to drive it;
        stopped, paused or ended, the run reports that (a stop into a failure state exits 4 with
        the stop's reason), never a refused start.
        """
        if not self.needs_start(loaded):
            return loaded
        try:
            return self.apply(
                "start", actor=actor, reason="run started a new instance", expected=loaded.status
            )
        except ControlRefusedError:
            current = self.instance.load()
            if self.is_active(current) or not self.needs_start(current):
                return current
            raise

    def apply(
        self,
        command: str,
        *,
        actor: str = "cli",
        reason: str | None = None,
        expected: str | None = None,
    ) -> Loaded:
        """Apply ``command``; raise ControlRefusedError when it is illegal now, or when
        ``expected`` is given and the status is no longer that (another process changed it
        since the caller read it)."""
        instance = self.instance
        machine = instance.machine
        if self.spec is None:
            raise ControlRefusedError(f"machine '{machine.name}' has no control commands")
        spec = self.spec.commands.get(command)  # type: ignore[call-overload]
        if spec is None:
            raise ControlRefusedError(
                f"machine '{machine.name}' has no '{command}' command "
                f"(it has: {', '.join(self.spec.commands)})"
            )
        started = time.monotonic()
        instance.repair()
        with instance.confined(), instance.store.lock(instance.id):
            current = instance.load_unchecked()
            self._check(command, spec, current)
            if expected is not None and current.status != expected:
                raise ControlRefusedError(
                    f"cannot {command} instance '{instance.id}': it is {current.status} now, "
                    f"no longer {expected}"
                )
            saved = instance.commit(
                self._updated(command, spec, current, self.spec.field),
                ControlRecord(
                    event=command,
                    source=current.state,
                    dest=spec.state or current.state,
                    status_from=current.status,
                    status_to=spec.dest,
                    actor=actor,
                    reason=reason,
                    duration_ms=round((time.monotonic() - started) * 1000, 3),
                ),
                base=current,
                locked=True,
            )
        instance.settle()
        instance.log.info(
            f"control_{command}_applied",
            actor=actor,
            reason=reason,
            status=saved.status,
            state=saved.state,
        )
        return saved

    def _check(self, command: str, spec: ControlCommandSpec, current: Loaded) -> None:
        machine = self.instance.machine
        if machine.is_final(current.state):
            from fsm.engine.retry import retry_advice

            raise ControlRefusedError(
                f"cannot {command} instance '{self.instance.id}': it has ended in "
                f"final state '{current.state}'{retry_advice(self.instance, current)}"
            )
        if current.status not in spec.sources:
            raise ControlRefusedError(
                f"cannot {command} instance '{self.instance.id}': it is {current.status} "
                f"({command} is allowed only when {' or '.join(spec.sources)})"
            )

    def _updated(
        self, command: str, spec: ControlCommandSpec, current: Loaded, field: str
    ) -> dict[str, object]:
        instance = self.instance
        ctx = instance.context().for_transition(command, current.state, spec.state or current.state)
        try:
            data = apply_update(current.data, {field: spec.dest})
            doc = instance.validate(data)
            for _, action in instance.machine.control_actions.get(command, ()):
                update = action(doc, ctx)
                if update:
                    data = apply_update(data, update)
                    doc = instance.validate(data)
            if spec.state is not None:
                data = apply_update(data, instance.rules.entering(doc, spec.state))
        except ValidationError as exc:
            raise FsmError(
                f"{command} of '{instance.id}' would write an invalid document: "
                f"{describe_validation(exc)}; nothing was changed"
            ) from exc
        except Exception as exc:
            raise FsmError(
                f"{command} of '{instance.id}' failed: {type(exc).__name__}: {exc}; "
                "nothing was changed"
            ) from exc
        return data
