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

__all__ = ["external_control", "is_journaled", "seen_control", "written_over"]


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
                data = apply_update(version.data, rules.entering(version.doc, loaded.state))
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
    dashboard's stop or pause between two steps); None when it changed neither, or ``last``,
    the journal's last record, is of that version already."""
    if (current.state, current.status) == (newest.state, newest.status):
        return None  # only its own fields: an edit the journal need not know of
    doc_hash = bytes_hash(current.raw)
    if is_journaled(doc_hash, last):
        return None
    return external_control(
        rules,
        (newest.state, newest.status),
        (current.state, current.status),
        doc_hash,
        during_step=False,
        core_hash=rules.core_hash(current.data),
    )


def is_journaled(doc_hash: str, last: Record | None) -> bool:
    """Whether the version hashed ``doc_hash`` is the journal's ``last`` record's: fsm's
    control plane, in another process, made the change and journaled it."""
    return last is not None and last.doc_hash == doc_hash


def external_control(
    rules: DocumentRules,
    before: tuple[str, str | None],
    after: tuple[str, str | None],
    doc_hash: str,
    *,
    during_step: bool,
    core_hash: str | None = None,
) -> ControlRecord:
    """The ``control`` record, event and actor ``external``, of a state or status another
    program changed from ``before`` to ``after`` (state, status) in the version hashed
    ``doc_hash``: ``during_step`` while a step ran (journaled with the step, ``merged``), else
    between two steps. ``core_hash`` is the version's, when the caller knows it."""
    (source, status_from), (dest, status_to) = before, after
    return ControlRecord(
        time=rules.clock.iso(),
        event="external",
        source=source,
        dest=dest,
        status_from=status_from,
        status_to=status_to,
        actor="external",
        reason=(
            "status changed by another program while a step ran"
            if during_step
            else "changed by another program between steps"
        ),
        merged=during_step,
        state=dest,
        status=status_to,
        doc_hash=doc_hash,
        core_hash=core_hash,
    )
