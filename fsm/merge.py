"""Merging a step's result with what another program wrote while the step ran.

The CCW dashboard rewrites a loop's document in place, without a lock, when a person presses
pause or stop or edits the title. A step that ran meanwhile must not overwrite that, and the
other writer must not undo the step's work. At commit time, under the document lock, the engine
compares the file with the version the step started from (``base``) and merges:

* paths other programs own (``external_fields``, the control field and ``control.owned``) keep
  the other writer's value when it changed it, and so do top-level keys the document model does
  not define (another program's fields: added, changed or removed by it);
* if the other writer moved the FSM state (a stop into a failure state), that state wins; if it
  only changed the status (a pause) but the step ended the instance, the ending wins;
* a status changed that way is journaled as its own ``control`` record with actor ``external``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fsm.records import ControlRecord
from fsm.update import apply_update, bytes_hash, get_path, keep_external

if TYPE_CHECKING:
    from fsm.instance import Instance, Loaded

__all__ = ["merge_concurrent"]


def merge_concurrent(
    instance: Instance,
    ours: Mapping[str, Any],
    base: Loaded,
    theirs: dict[str, Any],
    their_raw: bytes,
) -> dict[str, Any]:
    """The step's result ``ours`` merged with ``theirs`` (read as ``their_raw``), found on disk
    instead of ``base``."""
    _journal_external_control(instance, base, theirs, bytes_hash(their_raw))
    merged = keep_external(
        ours, base.data, theirs, instance.external_paths, instance.machine.document_keys
    )
    return _settle_state(instance, merged, base, theirs, ours)


def _journal_external_control(
    instance: Instance, base: Loaded, theirs: dict[str, Any], their_hash: str
) -> None:
    """Journal a status change another program made during a step (a dashboard's pause)."""
    their_status = instance.status_of(theirs)
    if their_status == base.status:
        return
    last = instance.journal.last()
    if last is not None and last.doc_hash == their_hash:
        return  # fsm's own control plane made (and journaled) the change
    try:
        their_state = instance.machine.codec.read(instance.validate(theirs))
    except ValidationError:
        their_state = base.state
    instance.journal.write(
        ControlRecord(
            time=instance.clock.iso(),
            event="external",
            source=base.state,
            dest=their_state,
            status_from=base.status,
            status_to=their_status,
            actor="external",
            reason="status changed by another program while a step ran",
            merged=True,
            state=their_state,
            status=their_status,
            doc_hash=their_hash,
        )
    )
    instance.log.info("external_control_seen", status_from=base.status, status_to=their_status)


def _settle_state(
    instance: Instance,
    merged: dict[str, Any],
    base: Loaded,
    theirs: dict[str, Any],
    ours: Mapping[str, Any],
) -> dict[str, Any]:
    """Settle the FSM state after a merge.

    When another writer moved the FSM state during the step (a stop into a failure state),
    their state wins over the step's destination. When they only changed the status (a
    pause) but the step ended the instance, the ending wins: a finished instance keeps the
    status its final state set, since no command could ever change it again.
    """
    try:
        their_state = instance.machine.codec.read(instance.validate(theirs))
    except ValidationError:
        return merged
    if their_state == base.state or their_state not in instance.machine.states:
        return _keep_our_ending(instance, merged, ours)
    try:
        update = instance.machine.codec.write(instance.validate(merged), their_state)
    except ValidationError:
        return merged
    return instance.entered(apply_update(merged, update), their_state)


def _keep_our_ending(
    instance: Instance, merged: dict[str, Any], ours: Mapping[str, Any]
) -> dict[str, Any]:
    control = instance.machine.spec.control
    if control is None:
        return merged
    try:
        our_state = instance.machine.codec.read(instance.validate(ours))
    except ValidationError:
        return merged
    if not instance.machine.is_final(our_state):
        return merged
    keep = {path: get_path(ours, path) for path in [control.field, *control.owned]}
    return instance.entered(apply_update(merged, keep), our_state)
