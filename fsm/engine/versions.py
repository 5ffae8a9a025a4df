"""Which version of fsm's another writer's document is a copy of, and what it changed.

A writer without a lock (the CCW dashboard) reads the document, changes a field and writes the
whole document back. When fsm wrote newer versions meanwhile, the copy is of an older one: to
keep both fsm's work and the writer's change, fsm must know which version the writer read. It
is the version whose fields only fsm writes (:meth:`~fsm.engine.rules.DocumentRules.core_hash`) are
the copy's; a stop written by the dashboard also moves the state, to one a control command moves to.
Versions alike in fsm's fields differ in other programs' fields (changes fsm merged): the one
closest to the copy is the one read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fsm.base.update import MISSING, apply_update, bytes_hash, get_path
from fsm.model.records import ControlRecord, Record

if TYPE_CHECKING:
    from fsm.engine.rules import DocumentRules, Loaded

__all__ = ["seen_control", "written_over"]


def written_over(
    rules: DocumentRules,
    versions: list[tuple[Loaded, str]],
    loaded: Loaded,
    also: Loaded | None = None,
) -> Loaded | None:
    """The version of ``versions`` (fsm's, newest first, with their core hashes) or ``also``
    that ``loaded`` is a copy of, changed only in other programs' fields, or also moved into a
    state a control command moves to (a dashboard's stop); another move of the state is no
    program's right but fsm's.

    Versions that differ only in other programs' fields (fsm merged their earlier change)
    all fit: the one differing from ``loaded`` in the fewest such fields is the one the
    writer read, the newest among equals.
    """
    control = rules.machine.spec.control
    commanded = control is not None and any(
        command.state == loaded.state for command in control.commands.values()
    )
    core = rules.core_hash(loaded.data)
    candidates = list(versions)
    if also is not None:
        candidates.append((also, rules.core_hash(also.data)))
    best: tuple[int, Loaded] | None = None
    for version, version_core in candidates:
        data = version.data
        if version_core != core:
            if not commanded or version.state == loaded.state:
                continue
            try:
                update = rules.machine.codec.write(version.doc, loaded.state)
                data = rules.entered(apply_update(version.data, update), loaded.state)
            except Exception:  # a codec that cannot write the state: no match
                continue
            if rules.core_hash(data) != core:
                continue
        distance = _distance(rules, data, loaded.data)
        if best is None or distance < best[0]:
            best = (distance, version)
    return None if best is None else best[1]


def _distance(rules: DocumentRules, one: Mapping[str, Any], other: Mapping[str, Any]) -> int:
    """How many fields other programs own differ between two documents."""
    paths = rules.external_paths
    theirs = (one.keys() | other.keys()) - rules.machine.document_keys
    differing = [p for p in paths if get_path(one, p) != get_path(other, p)]
    differing += [key for key in theirs if one.get(key, MISSING) != other.get(key, MISSING)]
    return len(differing)


def seen_control(
    rules: DocumentRules, newest: Loaded, current: Loaded, last: Record | None
) -> ControlRecord | None:
    """The record of the state or status another program set on fsm's latest version (a
    dashboard's stop or pause between two steps), an external ``control`` record; None when it
    changed neither, or ``last``, the journal's last record, is of that version already."""
    if (current.state, current.status) == (newest.state, newest.status):
        return None  # only its own fields: an edit the journal need not know of
    doc_hash = bytes_hash(current.raw)
    if last is not None and last.doc_hash == doc_hash:
        return None  # fsm's control plane, in another process, journaled it
    return ControlRecord(
        time=rules.clock.iso(),
        event="external",
        source=newest.state,
        dest=current.state,
        status_from=newest.status,
        status_to=current.status,
        actor="external",
        reason="changed by another program between steps",
        state=current.state,
        status=current.status,
        doc_hash=doc_hash,
        core_hash=rules.core_hash(current.data),
    )
