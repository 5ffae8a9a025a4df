"""Crash repair: what the next command that opens an instance does after a process was killed.

Under the document lock it removes a torn last journal line (a crash while appending), settles a
last journal record whose document never became visible (the write is completed from its
temporary file when that survived and nothing changed since, its ``after_save`` hook run; else
the instance stays where it was), removes the document's leftover temporary files and those of
killed side-file writes in the instance's own folders, and journals what it did in a ``repair``
record.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from fsm.errors import StoreError
from fsm.files import dead_temporaries, leftover_temporaries, replace
from fsm.records import RepairRecord
from fsm.update import bytes_hash

if TYPE_CHECKING:
    from fsm.instance import Instance

__all__ = ["repair"]


def repair(instance: Instance) -> list[str]:
    """Make journal and document agree after a crash; return what was repaired (each
    repair is also journaled). Takes the document lock when something looks amiss."""
    if not _may_need_repair(instance):
        return []
    with instance.store.document_lock(instance.id):
        notes: list[str] = []
        if instance.journal.drop_torn_tail():
            notes.append("removed a torn last journal line (a crash while appending)")
        temporaries = leftover_temporaries(instance.paths.document)
        notes.extend(_settle_unwritten(instance, temporaries))
        for tmp in temporaries:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if temporaries:
            notes.append(f"removed {len(temporaries)} leftover temporary file(s)")
        notes.extend(_remove(_dead_side_temporaries(instance)))
        if notes:
            _journal_repair(instance, notes)
    for note in notes:
        instance.log.warning("instance_repaired", note=note)
    return notes


def _may_need_repair(instance: Instance) -> bool:
    """A look without the lock: a torn journal tail, a temporary file, or a last record whose
    document is not on disk. False means nothing to repair (the common case); True is checked
    again under the lock (a commit of another process may be midway)."""
    if instance.journal.has_torn_tail() or leftover_temporaries(instance.paths.document):
        return True
    if _dead_side_temporaries(instance):
        return True
    last = instance.journal.last()
    if last is None or last.doc_hash is None:
        return False
    try:
        raw = instance.store.read_raw_bytes(instance.id)
    except OSError:
        return False
    return raw is not None and bytes_hash(raw) != last.doc_hash


def _dead_side_temporaries(instance: Instance) -> list[Path]:
    """What killed writes of side files left in the instance's own folders: its meta folder,
    and its document's folder when that one holds this instance alone."""
    paths = instance.paths
    folders = [paths.meta]
    if instance.id in paths.document.parent.parts:
        folders.append(paths.document.parent)
    return [tmp for folder in folders for tmp in dead_temporaries(folder)]


def _remove(dead: list[Path]) -> list[str]:
    for tmp in dead:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return [f"removed {len(dead)} temporary file(s) of killed side-file writes"] if dead else []


def _settle_unwritten(instance: Instance, temporaries: list[Path]) -> list[str]:
    """Settle a last journal record whose document is not the one on disk."""
    records = instance.journal.records_backwards()
    last = next(records, None)
    if last is None or last.doc_hash is None:
        return []
    try:
        raw = instance.store.read_raw_bytes(instance.id)
    except OSError:
        return []
    if raw is None or bytes_hash(raw) == last.doc_hash:
        return []
    previous = next((r for r in records if r.doc_hash is not None), None)
    if previous is None or previous.doc_hash != bytes_hash(raw):
        return []  # changed by another program since: merged by the next commit
    for tmp in temporaries:
        try:
            content = tmp.read_bytes()
        except OSError:
            continue
        if bytes_hash(content) == last.doc_hash:
            replace(tmp, instance.paths.document)
            temporaries.remove(tmp)
            with contextlib.suppress(StoreError):  # its after_save never ran
                instance.after_save(instance.loaded_from(content))
            return [
                f"completed the write of the last journal record ({last.kind} "
                f"{last.event}): the process was killed before the document was "
                "replaced"
            ]
    return [
        f"the document of the last journal record ({last.kind} {last.event}) "
        "was never written (the process was killed): the instance stays in "
        f"'{previous.state}'"
    ]


def _journal_repair(instance: Instance, notes: list[str]) -> None:
    try:
        current = instance.load_unchecked()
    except StoreError:
        return
    instance.journal.write(
        RepairRecord(
            time=instance.clock.iso(),
            source=current.state,
            dest=current.state,
            actor="fsm",
            reason="; ".join(notes),
            state=current.state,
            status=current.status,
            doc_hash=bytes_hash(current.raw),
            core_hash=instance.core_hash(current.data),
        )
    )
