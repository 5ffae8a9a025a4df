"""Merging a step's result with what another program wrote while the step ran.

The CCW dashboard rewrites a loop's document in place, without a lock, when a person presses
pause or stop or edits the title. A step that ran meanwhile must not overwrite that, and the
other writer must not undo the step's work. At commit time the transaction
(:mod:`fsm.engine.transaction`) compares the stored version with the one the step started from
(``base``) and merges:

* paths other programs own (``external_fields``, the control field and ``control.owned``) keep
  the other writer's value when it changed it, and so do top-level keys the document model does
  not define (another program's fields: added, changed or removed by it);
* if the other writer moved the FSM state (a stop into a failure state), that state wins; if it
  only changed the status (a pause) but the step ended the instance, the ending wins;
* a status changed that way is journaled as its own ``control`` record with actor ``external``,
  in the same write as the step's record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fsm.base.update import apply_update, bytes_hash, get_path, keep_external
from fsm.engine.versions import external_control, is_journaled
from fsm.model.records import Record

if TYPE_CHECKING:
    from fsm.engine.rules import DocumentRules, Loaded

__all__ = ["merge_concurrent"]


def merge_concurrent(
    rules: DocumentRules,
    ours: Mapping[str, Any],
    base: Loaded,
    theirs: dict[str, Any],
    their_raw: bytes,
    last: Callable[[], Record | None],
) -> tuple[dict[str, Any], list[Record]]:
    """The step's result ``ours`` merged with ``theirs`` (read as ``their_raw``), found in the
    store instead of ``base``, and the records to journal before the step's (a status another
    program changed: ``last`` reads the journal's last record, to tell fsm's own changes)."""
    records = _external_control(rules, base, theirs, bytes_hash(their_raw), last)
    merged = keep_external(
        ours, base.data, theirs, rules.external_paths, rules.machine.document_keys
    )
    return _settle_state(rules, merged, base, theirs, ours), records


def _external_control(
    rules: DocumentRules,
    base: Loaded,
    theirs: dict[str, Any],
    their_hash: str,
    last: Callable[[], Record | None],
) -> list[Record]:
    """The record of a status change another program made during a step (a dashboard's
    pause), journaled with the step."""
    their_status = rules.status_of(theirs)
    if their_status == base.status or is_journaled(their_hash, last()):
        return []
    try:
        their_state = rules.machine.codec.read(rules.validate(theirs))
    except ValidationError:
        their_state = base.state
    before, after = (base.state, base.status), (their_state, their_status)
    return [
        external_control(
            rules, before, after, their_hash, during_step=True, core_hash=rules.core_hash(theirs)
        )
    ]


def _settle_state(
    rules: DocumentRules,
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
        their_state = rules.machine.codec.read(rules.validate(theirs))
    except ValidationError:
        return merged
    if their_state == base.state or their_state not in rules.machine.states:
        return _keep_our_ending(rules, merged, ours)
    try:
        update = rules.entering(rules.validate(merged), their_state)
    except ValidationError:
        return merged
    return apply_update(merged, update)


def _keep_our_ending(
    rules: DocumentRules, merged: dict[str, Any], ours: Mapping[str, Any]
) -> dict[str, Any]:
    control = rules.machine.spec.control
    if control is None:
        return merged
    try:
        our_state = rules.machine.codec.read(rules.validate(ours))
    except ValidationError:
        return merged
    if not rules.machine.is_final(our_state):
        return merged
    keep = {path: get_path(ours, path) for path in [control.field, *control.owned]}
    return rules.entered(apply_update(merged, keep), our_state)
