"""The file store's crash repair: what the next command that opens an instance does after a
process was killed midway through a swap (:meth:`fsm.store.file_store.FileStore.repair`).

Under the document lock (the caller's) it removes a torn last journal line (a crash while
appending), settles a last journal record whose document never became visible (the write is
completed from its temporary file when that survived and nothing changed since; else the
instance stays where it was), removes the document's leftover temporary files and those of
killed side-file writes in the instance's own folders. The transaction journals what it did in
a ``repair`` record and runs the ``after_save`` hook of a write it completed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from fsm.base.files import dead_temporaries, leftover_temporaries, read_file, replace
from fsm.base.update import bytes_hash
from fsm.store.journal import Journal
from fsm.store.protocol import Repaired

__all__ = ["needs_repair", "repair"]


def needs_repair(document: Path, journal: Journal, folders: list[Path]) -> bool:
    """A look without the lock: a torn journal tail, a temporary file, or a last record whose
    document is not on disk. False means nothing to repair (the common case); True is checked
    again under the lock (a swap of another process may be midway)."""
    if journal.has_torn_tail() or leftover_temporaries(document):
        return True
    if _dead_side_temporaries(folders):
        return True
    last = journal.last()
    if last is None or last.doc_hash is None:
        return False
    raw = _raw(document)
    return raw is not None and bytes_hash(raw) != last.doc_hash


def repair(document: Path, journal: Journal, folders: list[Path]) -> Repaired:
    """Make journal and document agree after a crash (the caller holds the document lock);
    ``folders``: the instance's own folders, where killed side-file writes are cleaned up."""
    notes: list[str] = []
    if journal.drop_torn_tail():
        notes.append("removed a torn last journal line (a crash while appending)")
    temporaries = leftover_temporaries(document)
    completed, settled = _settle_unwritten(document, journal, temporaries)
    notes.extend(settled)
    for tmp in temporaries:
        with contextlib.suppress(OSError):
            tmp.unlink()
    if temporaries:
        notes.append(f"removed {len(temporaries)} leftover temporary file(s)")
    dead = _dead_side_temporaries(folders)
    for tmp in dead:
        with contextlib.suppress(OSError):
            tmp.unlink()
    if dead:
        notes.append(f"removed {len(dead)} temporary file(s) of killed side-file writes")
    return Repaired(notes, completed)


def _raw(document: Path) -> bytes | None:
    try:
        return read_file(document)[0]
    except OSError:
        return None


def _dead_side_temporaries(folders: list[Path]) -> list[Path]:
    """What killed writes of side files left in the instance's own folders."""
    return [tmp for folder in folders for tmp in dead_temporaries(folder)]


def _settle_unwritten(
    document: Path, journal: Journal, temporaries: list[Path]
) -> tuple[bytes | None, list[str]]:
    """Settle a last journal record whose document is not the one on disk; return the bytes
    of a write completed, and what was done."""
    records = journal.records_backwards()
    last = next(records, None)
    if last is None or last.doc_hash is None:
        return None, []
    raw = _raw(document)
    if raw is None or bytes_hash(raw) == last.doc_hash:
        return None, []
    previous = next((r for r in records if r.doc_hash is not None), None)
    if previous is None or previous.doc_hash != bytes_hash(raw):
        return None, []  # changed by another program since: merged by the next commit
    for tmp in temporaries:
        try:
            content = tmp.read_bytes()
        except OSError:
            continue
        if bytes_hash(content) == last.doc_hash:
            replace(tmp, document)
            temporaries.remove(tmp)
            return content, [
                f"completed the write of the last journal record ({last.kind} "
                f"{last.event}): the process was killed before the document was "
                "replaced"
            ]
    return None, [
        f"the document of the last journal record ({last.kind} {last.event}) "
        "was never written (the process was killed): the instance stays in "
        f"'{previous.state}'"
    ]
