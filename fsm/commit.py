"""Committing a new version of an instance document without losing anyone's change.

Other programs write the document too, some without any lock (the CCW dashboard rewrites a loop's
file in place when a person presses pause). A commit, under the instance's document lock:

1. reads the file as it is now (keeping the file open) and, when another writer changed it since
   the step read it, merges their change into the step's result (:mod:`fsm.merge`);
2. validates and renders the result and writes it to a temporary file (``fsync``);
3. appends the journal record first (write-ahead: a record never goes missing after a crash);
4. looks at the file once more; if another writer changed it in the meantime, the journal record
   and the temporary file are taken back and the commit starts over from 1;
5. replaces the file, then reads the file it replaced through the descriptor kept open: a writer
   that opened it before the replace and wrote into it afterwards would otherwise be lost, so its
   change is merged into a new version at once (a ``merge`` record). The replaced file stays open
   until the next commit or the end of the operation, which looks at it again, so a write that
   lands even later is caught too;
6. remembers the last versions it wrote: a writer that read an older version and wrote it back
   over a newer one (undoing fsm's work while making its own change) is detected at the next
   load and both changes are kept (:meth:`Committer.reconcile`).

After a crash (SIGKILL) the next command that opens the instance (:meth:`Committer.repair`)
removes a torn last journal line and leftover temporary files, and settles a journal record
whose document never became visible: the write is completed when the temporary file holding it
survived and nothing changed since, else the instance stays where it was; either way a
``repair`` record says what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fsm import jsonio
from fsm.definition import describe_validation
from fsm.errors import CorruptDocumentError, FsmError, StoreError, UnwritableDocumentError
from fsm.files import (
    atomic_write_text,
    dead_temporaries,
    exchange,
    leftover_temporaries,
    open_nofollow,
    read_fd,
    read_file,
    replace,
    sync_folder,
    write_temporary,
)
from fsm.merge import merge_concurrent
from fsm.update import MISSING, apply_update, bytes_hash, get_path

if TYPE_CHECKING:
    from fsm.instance import Instance, Loaded

__all__ = ["Committer"]

MAX_ROUNDS = 20
"""Merges a commit may redo while other writers keep changing the file."""
RECENT_VERSIONS = 8
"""Versions remembered to recognise a writer that wrote an older one back."""


@dataclass
class _Replaced:
    """The file a commit replaced, kept open, and the bytes it held just after the replace."""

    fd: int
    raw: bytes
    before: bytes
    """What that file held when the commit read it (what a late writer had read)."""


@dataclass(frozen=True)
class _Lost:
    """A change another writer made to the version ``before`` that never reached the document
    (``raw``: the bytes it wrote)."""

    before: Loaded
    raw: bytes


class Committer:
    """Writes the versions of one instance's document (see the module docstring)."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.recent: deque[tuple[Loaded, str]] = deque(maxlen=RECENT_VERSIONS)
        self._replaced: _Replaced | None = None

    # --- committing ------------------------------------------------------------------------

    def commit(
        self,
        data: Mapping[str, Any],
        record: Mapping[str, Any],
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Write ``data`` (the step's result from ``base``) and journal ``record``.

        ``locked``: the caller holds the document lock already. Without a ``base`` (creation,
        recovery) the document is written as it is, nothing merged.
        """
        if locked:
            return self._commit(data, record, base)
        with self.instance.store.document_lock(self.instance.id):
            return self._commit(data, record, base)

    def _commit(
        self, data: Mapping[str, Any], record: Mapping[str, Any], base: Loaded | None
    ) -> Loaded:
        settled = self._settle_replaced()
        if settled is not None and base is not None:
            # A change re-applied just now is newer than the step's base: build on it.
            data = merge_concurrent(self.instance, data, base, dict(settled.data), settled.raw)
            base, record = settled, {**record, "merged": True}
        return self._until_settled(*self._write_round(data, record, base))

    def _until_settled(self, saved: Loaded, lost: _Lost | None) -> Loaded:
        """Re-apply changes that went into replaced files until none is left."""
        for _ in range(MAX_ROUNDS):
            if lost is None:
                break
            saved, lost = self._reapply(saved, lost.before, lost.raw, on_disk=saved)
        return saved

    def _write_round(
        self, data: Mapping[str, Any], record: Mapping[str, Any], base: Loaded | None
    ) -> tuple[Loaded, _Lost | None]:
        instance = self.instance
        path = instance.paths.document
        journal = instance.journal
        for _ in range(MAX_ROUNDS):
            mark = journal.size()
            fd, current = self._open_current(path)
            tmp: Path | None = None
            appended = False
            try:
                if base is None and current is not None:
                    raise StoreError(
                        f"the document of '{instance.id}' appeared while fsm was creating it; "
                        "it was left as it is"
                    )
                merged, entry_record = dict(data), record
                if base is not None and current is not None and current != base.raw:
                    theirs = self._their_data(current, data)
                    their_base = self._read_by(current, base)
                    merged = merge_concurrent(instance, data, their_base, theirs, current)
                    entry_record = {**record, "merged": True}
                final = instance.touched(merged)
                doc = self._validated(final)
                raw = self._render(final)
                tmp = write_temporary(path, raw, root=instance.workspace.path)
                state = instance.machine.codec.read(doc)
                status = instance.status_of(final)
                core = instance.core_hash(final)
                journal.append(
                    {
                        "time": instance.clock.iso(),
                        **entry_record,
                        "state": state,
                        "status": status,
                        "doc_hash": bytes_hash(raw),
                        "core_hash": core,
                    }
                )
                appended = True
                if not self._unchanged(fd, path, current):
                    journal.truncate(mark)  # another writer was quicker: merge again
                    appended = False
                    tmp.unlink()
                    tmp = None
                    if fd is not None:
                        os.close(fd)
                    continue
                foreign = self._install(tmp, path, fd)
                tmp = None
            except BaseException:
                if appended:
                    journal.truncate(mark)
                if tmp is not None:
                    with contextlib.suppress(OSError):
                        tmp.unlink()
                if fd is not None:
                    os.close(fd)
                raise
            from fsm.instance import Loaded

            loaded = Loaded(final, raw, doc, state, status)
            self.recent.append((loaded, core))
            lost = self._keep_replaced(fd, current, foreign)
            instance.after_save(loaded)
            return loaded, lost
        raise StoreError(
            f"the document of '{instance.id}' kept changing while fsm tried to write it "
            f"({MAX_ROUNDS} attempts); nothing was written"
        )

    @staticmethod
    def _open_current(path: Path) -> tuple[int | None, bytes | None]:
        """The document's file, opened, and its bytes (None, None when there is none yet)."""
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return fd, read_fd(fd)

    @staticmethod
    def _unchanged(fd: int | None, path: Path, current: bytes | None) -> bool:
        """True when ``path`` is still the file read as ``current``, with the same bytes."""
        if fd is None:
            return not path.exists()
        try:
            same_file = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False
        return same_file and read_fd(fd) == current

    def _their_data(self, raw: bytes, ours: Mapping[str, Any]) -> dict[str, Any]:
        """The document another writer left, re-read while it does not parse (a writer midway);
        when it stays corrupt the step's result is parked, never lost."""
        store = self.instance.store
        try:
            return store.read(self.instance.id).data
        except CorruptDocumentError as exc:
            parked = self.park(ours)
            raise CorruptDocumentError(
                f"{exc}; another program broke it during the step, whose result was kept in "
                f"{parked} (repair the document or run 'fsm recover')"
            ) from exc

    def _validated(self, data: Mapping[str, Any]) -> Any:
        try:
            return self.instance.validate(data)
        except ValidationError as exc:
            raise StoreError(
                f"refusing to write an invalid document for '{self.instance.id}': "
                f"{describe_validation(exc)}"
            ) from exc

    def _render(self, data: Mapping[str, Any]) -> bytes:
        try:
            return self.instance.store.render(data).encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise UnwritableDocumentError(
                f"the document of '{self.instance.id}' cannot be written as JSON: {exc}"
            ) from exc

    # --- writers that lost the race --------------------------------------------------------

    @staticmethod
    def _install(tmp: Path, path: Path, fd: int | None) -> bytes | None:
        """Put the temporary file ``tmp`` in place of the document (read through ``fd``).

        The two are swapped (:func:`fsm.files.exchange`), so the file replaced stays reachable:
        when it is not the one fsm read, another program renamed its version over the document
        after the last check, and its bytes are returned (else None) to be merged, not lost.
        """
        if fd is None or not exchange(tmp, path):
            replace(tmp, path)
            return None
        # The new version is visible now: nothing below may fail the commit.
        foreign: bytes | None = None
        with contextlib.suppress(OSError, FsmError):
            info, mine = os.lstat(tmp), os.fstat(fd)
            if (info.st_ino, info.st_dev) != (mine.st_ino, mine.st_dev) and stat.S_ISREG(
                info.st_mode
            ):
                foreign = read_file(tmp)[0]
        with contextlib.suppress(OSError):
            tmp.unlink()
        with contextlib.suppress(OSError):
            sync_folder(path.parent)
        return foreign

    def _keep_replaced(
        self, fd: int | None, before: bytes | None, foreign: bytes | None
    ) -> _Lost | None:
        """Keep the replaced file open (see :meth:`settle`); when another writer already wrote
        into it, or renamed its own version over it (``foreign``), return that lost change."""
        if self._replaced is not None:  # the file of a change being re-applied right now
            os.close(self._replaced.fd)
            self._replaced = None
        if fd is None or before is None:
            return None
        after = read_fd(fd)
        self._replaced = _Replaced(fd, after, before)
        if foreign is not None:
            return self._lost(before, foreign)
        if after == before:
            return None
        return self._lost(before, self._settled_bytes(fd, after))

    def _lost(self, before: bytes, raw: bytes) -> _Lost | None:
        """The change another writer made in ``raw``, which it wrote where ``before`` was
        (None when ``before`` is no valid version). Its base is the version of fsm's it is a
        copy of when one fits (a writer that read an older version), else ``before``."""
        try:
            base = self.instance.loaded_from(before)
        except StoreError:
            return None
        try:
            theirs = self.instance.loaded_from(raw)
        except StoreError:
            return _Lost(base, raw)  # unreadable: logged when re-applied
        return _Lost(self._written_over(theirs, also=base) or base, raw)

    def _settled_bytes(self, fd: int, raw: bytes) -> bytes:
        """The bytes of a file another writer is rewriting in place, once they parse."""
        store = self.instance.store
        for _ in range(store.read_retries + 1):
            try:
                jsonio.loads(raw)
                return raw
            except jsonio.JsonError:
                time.sleep(store.retry_interval)
                raw = read_fd(fd)
        return raw

    def _settle_replaced(self) -> Loaded | None:
        """Look at the file the last commit replaced: a change written into it since is
        re-applied to the current document (the version written is returned). Close it either
        way."""
        replaced, self._replaced = self._replaced, None
        if replaced is None:
            return None
        try:
            now = read_fd(replaced.fd)
            if now == replaced.raw:
                return None
            now = self._settled_bytes(replaced.fd, now)
        finally:
            os.close(replaced.fd)
        lost = self._lost(replaced.before, now)
        if lost is None:
            return None
        current = self.instance.load_unchecked()
        return self._until_settled(*self._reapply(current, lost.before, lost.raw, on_disk=current))

    def _read_by(self, raw: bytes, base: Loaded) -> Loaded:
        """The version another writer read before it wrote ``raw``: the step's ``base``, unless
        it wrote back a copy of another version of fsm's (see :meth:`_written_over`)."""
        try:
            theirs = self.instance.loaded_from(raw)
        except StoreError:
            return base
        return self._written_over(theirs, also=base) or base

    def settle(self) -> None:
        """End of an operation: re-apply a change written into the replaced file, close it."""
        if self._replaced is None:
            return
        with self.instance.store.document_lock(self.instance.id):
            self._settle_replaced()

    def _reapply(
        self, ours: Loaded, their_base: Loaded, their_raw: bytes, *, on_disk: Loaded
    ) -> tuple[Loaded, _Lost | None]:
        """Write ``ours`` merged with the change another writer made to ``their_base`` (their
        bytes ``their_raw`` never reached the document, or were written over fsm's newer work);
        ``on_disk`` is the version the file holds now."""
        try:
            theirs = jsonio.loads(their_raw)
        except jsonio.JsonError:
            self.instance.log.warning("lost_write_unreadable", size=len(their_raw))
            return on_disk, None
        if not isinstance(theirs, dict):
            return on_disk, None
        merged = merge_concurrent(self.instance, ours.data, their_base, theirs, their_raw)
        record = {
            "kind": "merge",
            "event": None,
            "source": ours.state,
            "dest": ours.state,
            "actor": "external",
            "reason": "re-applied a change another program wrote while fsm replaced the document",
            "merged": True,
        }
        self.instance.log.info("lost_write_reapplied", state=ours.state)
        return self._write_round(merged, record, on_disk)

    def reconcile(self, loaded: Loaded) -> Loaded:
        """``loaded``, or, when another writer wrote back an older version of fsm's work along
        with its own change, a new version keeping both (journaled as a ``merge``).

        Another program's change on top of fsm's latest version that moved the state or the
        status (a dashboard's stop or pause between two steps) is journaled as an external
        ``control`` record, so that the journal still ends where the document is.
        """
        if not self.recent or loaded.raw == self.recent[-1][0].raw:
            return loaded
        with self.instance.store.document_lock(self.instance.id):
            self._settle_replaced()
            current = self.instance.load_unchecked()
            newest = self.recent[-1][0]
            if current.raw == newest.raw:
                return current
            base = self._written_over(current)
            if base is None:
                return current  # not a version fsm wrote: somebody else's edit, left to replay
            if base is not newest:
                return self._until_settled(
                    *self._reapply(newest, base, current.raw, on_disk=current)
                )
            self._journal_seen(newest, current)
            self.recent.append((current, self.instance.core_hash(current.data)))
            return current

    def _written_over(self, loaded: Loaded, also: Loaded | None = None) -> Loaded | None:
        """The version fsm wrote (or ``also``) that ``loaded`` is a copy of, changed only in
        other programs' fields, or also moved into a state a control command moves to (a
        dashboard's stop); another move of the state is no program's right but fsm's.

        Versions that differ only in other programs' fields (fsm merged their earlier change)
        all fit: the one differing from ``loaded`` in the fewest such fields is the one the
        writer read, the newest among equals.
        """
        instance = self.instance
        control = instance.machine.spec.control
        commanded = control is not None and any(
            command.state == loaded.state for command in control.commands.values()
        )
        core = instance.core_hash(loaded.data)
        candidates = [*reversed(self.recent)]
        if also is not None:
            candidates.append((also, instance.core_hash(also.data)))
        best: tuple[int, Loaded] | None = None
        for version, version_core in candidates:
            data = version.data
            if version_core != core:
                if not commanded or version.state == loaded.state:
                    continue
                try:
                    update = instance.machine.codec.write(version.doc, loaded.state)
                    data = instance.entered(apply_update(version.data, update), loaded.state)
                except Exception:  # a codec that cannot write the state: no match
                    continue
                if instance.core_hash(data) != core:
                    continue
            distance = self._distance(data, loaded.data)
            if best is None or distance < best[0]:
                best = (distance, version)
        return None if best is None else best[1]

    def _distance(self, one: Mapping[str, Any], other: Mapping[str, Any]) -> int:
        """How many fields other programs own differ between two documents."""
        paths = self.instance.external_paths
        theirs = (one.keys() | other.keys()) - self.instance.machine.document_keys
        differing = [p for p in paths if get_path(one, p) != get_path(other, p)]
        differing += [key for key in theirs if one.get(key, MISSING) != other.get(key, MISSING)]
        return len(differing)

    def _journal_seen(self, newest: Loaded, current: Loaded) -> None:
        """Journal the state or status another program set on fsm's latest version."""
        if (current.state, current.status) == (newest.state, newest.status):
            return  # only its own fields: an edit the journal need not know of
        instance = self.instance
        doc_hash = bytes_hash(current.raw)
        last = instance.journal.last()
        if last is not None and last.get("doc_hash") == doc_hash:
            return  # fsm's control plane, in another process, journaled it
        instance.journal.append(
            {
                "time": instance.clock.iso(),
                "kind": "control",
                "event": "external",
                "source": newest.state,
                "dest": current.state,
                "status_from": newest.status,
                "status_to": current.status,
                "actor": "external",
                "reason": "changed by another program between steps",
                "state": current.state,
                "status": current.status,
                "doc_hash": doc_hash,
                "core_hash": instance.core_hash(current.data),
            }
        )
        instance.log.info(
            "external_control_seen", status_from=newest.status, status_to=current.status
        )

    # --- failures and parking --------------------------------------------------------------

    def journal_failure(self, record: Mapping[str, Any], *, base: Loaded) -> Loaded:
        """Journal a failed step that changes no document, under the document lock.

        The record states where the instance is now: another writer may have moved it (a stop)
        while the step ran, in which case the record is marked ``merged``.
        """
        instance = self.instance
        with instance.store.document_lock(instance.id):
            try:
                current = instance.load_unchecked()
            except StoreError:
                current = base
            entry = {"time": instance.clock.iso(), **record}
            if current.raw != base.raw:
                entry["merged"] = True
            entry.update(
                state=current.state,
                status=current.status,
                doc_hash=bytes_hash(current.raw),
                core_hash=instance.core_hash(current.data),
            )
            instance.journal.append(entry)
        return current

    def park(self, data: Mapping[str, Any]) -> Path:
        """Keep a step's result that cannot be committed in the meta folder; return its path."""
        instance = self.instance
        stamp = instance.clock.now().strftime("%Y%m%dT%H%M%S%f")
        parked = instance.paths.meta / f"unsaved-step-{stamp}.json"
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
        atomic_write_text(
            parked,
            text.encode("utf-8", "backslashreplace").decode("utf-8"),
            root=instance.workspace.path,
        )
        return parked

    # --- after a crash ---------------------------------------------------------------------

    def repair(self) -> list[str]:
        """Make journal and document agree after a crash; return what was repaired (each
        repair is also journaled). Takes the document lock."""
        instance = self.instance
        with instance.store.document_lock(instance.id):
            notes: list[str] = []
            if instance.journal.drop_torn_tail():
                notes.append("removed a torn last journal line (a crash while appending)")
            temporaries = leftover_temporaries(instance.paths.document)
            notes.extend(self._settle_unwritten(temporaries))
            for tmp in temporaries:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            if temporaries:
                notes.append(f"removed {len(temporaries)} leftover temporary file(s)")
            notes.extend(self._remove_dead_side_temporaries())
            if notes:
                self._journal_repair(notes)
        for note in notes:
            instance.log.warning("instance_repaired", note=note)
        return notes

    def _remove_dead_side_temporaries(self) -> list[str]:
        """Remove what killed writes of side files left in the instance's own folders: its meta
        folder, and its document's folder when that one holds this instance alone."""
        paths = self.instance.paths
        folders = [paths.meta]
        if self.instance.id in paths.document.parent.parts:
            folders.append(paths.document.parent)
        dead = [tmp for folder in folders for tmp in dead_temporaries(folder)]
        for tmp in dead:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return [f"removed {len(dead)} temporary file(s) of killed side-file writes"] if dead else []

    def _settle_unwritten(self, temporaries: list[Path]) -> list[str]:
        """Settle a last journal record whose document is not the one on disk."""
        instance = self.instance
        records = instance.journal.backwards()
        last = next(records, None)
        if last is None or "doc_hash" not in last:
            return []
        try:
            raw = instance.store.read_raw_bytes(instance.id)
        except OSError:
            return []
        if raw is None or bytes_hash(raw) == last["doc_hash"]:
            return []
        previous = next((r for r in records if "doc_hash" in r), None)
        if previous is None or previous["doc_hash"] != bytes_hash(raw):
            return []  # changed by another program since: merged by the next commit
        for tmp in temporaries:
            try:
                content = tmp.read_bytes()
            except OSError:
                continue
            if bytes_hash(content) == last["doc_hash"]:
                replace(tmp, instance.paths.document)
                temporaries.remove(tmp)
                with contextlib.suppress(StoreError):  # its after_save never ran
                    instance.after_save(instance.loaded_from(content))
                return [
                    f"completed the write of the last journal record ({last.get('kind')} "
                    f"{last.get('event')}): the process was killed before the document was "
                    "replaced"
                ]
        return [
            f"the document of the last journal record ({last.get('kind')} {last.get('event')}) "
            "was never written (the process was killed): the instance stays in "
            f"'{previous.get('state')}'"
        ]

    def _journal_repair(self, notes: list[str]) -> None:
        instance = self.instance
        try:
            current = instance.load_unchecked()
        except StoreError:
            return
        instance.journal.append(
            {
                "time": instance.clock.iso(),
                "kind": "repair",
                "event": None,
                "source": current.state,
                "dest": current.state,
                "actor": "fsm",
                "reason": "; ".join(notes),
                "state": current.state,
                "status": current.status,
                "doc_hash": bytes_hash(current.raw),
                "core_hash": instance.core_hash(current.data),
            }
        )
