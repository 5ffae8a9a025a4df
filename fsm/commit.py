"""Committing a new version of an instance document without losing anyone's change.

Other programs write the document too, some without any lock (the CCW dashboard rewrites a loop's
file in place when a person presses pause), some by renaming their own copy over it. A commit,
under the instance's document lock:

1. re-applies what another writer wrote into the file the previous commit replaced (step 5),
   and builds the step's result on that version;
2. reads the file as it is now (keeping the file open) and, when another writer changed it since
   the step read it, merges their change into the step's result (:mod:`fsm.merge`), taking as
   their base the version of fsm's they had read (:mod:`fsm.versions`);
3. validates and renders the result and writes it to a temporary file (``fsync``), then appends
   the journal record (write-ahead: a document is never visible without its record);
4. looks at the file once more; if another writer changed it in the meantime, the journal record
   and the temporary file are taken back and the commit starts over from 2;
5. swaps the temporary file and the document (``renameat2`` exchange, a plain rename where the
   system has none), so the file replaced is still at hand: a version another program renamed
   over the document after step 4 is merged at once instead of being destroyed, and the
   replaced file, read through the descriptor kept open, shows a write of a program that had
   opened it before; such a change is merged into a new version (a ``merge`` record). The
   replaced file stays open until the next commit or the end of the operation;
6. remembers the last versions it wrote: a writer that read an older version and wrote it back
   over a newer one (undoing fsm's work while making its own change) is detected at the next
   load and both changes are kept (:meth:`Committer.reconcile`), and a stop or pause another
   program wrote between two steps is journaled.

After a crash (SIGKILL) the next command that opens the instance repairs it (:mod:`fsm.repair`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fsm import jsonio
from fsm.definition import describe_validation
from fsm.errors import CorruptDocumentError, FsmError, StoreError, UnwritableDocumentError
from fsm.files import (
    atomic_write_text,
    exchange,
    holds,
    is_file,
    open_nofollow,
    read_fd,
    read_file,
    replace,
    same_file,
    sync_folder,
    write_temporary_open,
)
from fsm.merge import merge_concurrent
from fsm.records import MergeRecord, Record
from fsm.repair import repair as repair_instance
from fsm.update import bytes_hash
from fsm.versions import journal_seen, written_over

if TYPE_CHECKING:
    from fsm.instance import Instance, Loaded

__all__ = ["Committer"]

MAX_ROUNDS = 20
"""Merges a commit may redo while other writers keep changing the file."""
SETTLE_LOOKS = 10
"""Looks (each waiting as long as a read of a half-written document does) at the file replaced
last, at the end of an operation, while a writer is midway in it."""
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
        self._seen: deque[tuple[Loaded, str]] = deque(maxlen=RECENT_VERSIONS)
        """Versions other writers put in place that fsm read and merged (newest last): a copy
        written back later may be of one of them rather than of a version of fsm's."""
        self._replaced: list[_Replaced] = []
        """Files commits replaced, kept open until a look finds nothing more written into
        them (more than one while another writer is midway in one)."""
        self._folder_fd: int | None = None
        self._written: tuple[int, tuple[int, int]] | None = None
        """The file this committer wrote last and its identity, kept open during a session (it
        is the document until someone replaces it): loads and the next commit read it without
        an open."""
        self._keeping = False

    @contextlib.contextmanager
    def files_kept_open(self) -> Iterator[None]:
        """Keep the document's folder (to ``fsync`` it after each replace) and the document
        written last open meanwhile."""
        folder = self.instance.paths.document.parent
        try:
            self._folder_fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._folder_fd = None  # nothing written yet: each replace opens it itself
        self._keeping = True
        try:
            yield
        finally:
            self._keeping = False
            if self._folder_fd is not None:
                os.close(self._folder_fd)
            if self._written is not None:
                os.close(self._written[0])
            self._folder_fd = self._written = None

    def still(self, raw: bytes) -> bool:
        """True when the document holds exactly ``raw`` now, read through the file kept open
        when it still is the document."""
        written = self._written
        if written is not None and is_file(self.instance.paths.document, written[1]):
            return holds(written[0], raw)
        return self.instance.store.read_raw_bytes(self.instance.id) == raw

    # --- committing ------------------------------------------------------------------------

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
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

    def _commit(self, data: Mapping[str, Any], record: Record, base: Loaded | None) -> Loaded:
        settled = self._settle_replaced()
        if settled is not None and base is not None:
            # A change re-applied just now is newer than the step's base: build on it.
            data = merge_concurrent(self.instance, data, base, dict(settled.data), settled.raw)
            base, record = settled, record.as_merged()
        return self._until_settled(*self._write_round(data, record, base))

    def _until_settled(self, saved: Loaded, lost: _Lost | None) -> Loaded:
        """Re-apply changes that went into replaced files until none is left."""
        for _ in range(MAX_ROUNDS):
            if lost is None:
                break
            saved, lost = self._reapply(saved, lost.before, lost.raw, on_disk=saved)
        return saved

    def _write_round(
        self, data: Mapping[str, Any], record: Record, base: Loaded | None
    ) -> tuple[Loaded, _Lost | None]:
        instance = self.instance
        path = instance.paths.document
        journal = instance.journal
        for _ in range(MAX_ROUNDS):
            fd, current, ident, mode = self._open_current(path)
            tmp: Path | None = None
            tmp_fd: int | None = None
            mark = 0
            appended = False
            try:
                if base is None and current is not None:
                    raise StoreError(
                        f"the document of '{instance.id}' appeared while fsm was creating it; "
                        "it was left as it is"
                    )
                merged, entry_record = dict(data), record
                if base is not None and current is not None and current != base.raw:
                    # A writer midway (truncated, not yet written) must not be taken for the
                    # file's content: the check before the replace and the look at the
                    # replaced file compare against what it holds once it parses.
                    current = self._settled_bytes(fd, current) if fd is not None else current
                    theirs = self._their_data(current, data)
                    their_base = self._read_by(current, base)
                    merged = merge_concurrent(instance, data, their_base, theirs, current)
                    entry_record = record.as_merged()
                final = instance.touched(merged)
                doc = self._validated(final)
                raw = self._render(final)
                tmp, tmp_fd, written_info = write_temporary_open(
                    path, raw, mode=mode, root=instance.workspace.path
                )
                state = instance.machine.codec.read(doc)
                status = instance.status_of(final)
                core = instance.core_hash(final)
                # Where the record starts: the commit takes it back from there if it must.
                mark = journal.write(
                    entry_record.stamped(
                        time=instance.clock.iso(),
                        state=state,
                        status=status,
                        doc_hash=bytes_hash(raw),
                        core_hash=core,
                    )
                )
                appended = True
                if not self._unchanged(fd, ident, path, current):
                    journal.truncate(mark)  # another writer was quicker: merge again
                    appended = False
                    self._discard(tmp, tmp_fd, fd)
                    continue
                foreign = self._install(tmp, path, ident)
                tmp = None
            except BaseException:
                # Interrupted once the file was replaced (SIGTERM while the folder is synced):
                # the document is written, so its journal record stays.
                written = tmp_fd is not None and same_file(tmp_fd, path)
                if appended and not written:
                    journal.truncate(mark)
                self._discard(None if written else tmp, tmp_fd, fd)
                raise
            assert tmp_fd is not None  # the file just written
            if self._keeping:
                self._written = tmp_fd, (written_info.st_ino, written_info.st_dev)
            else:
                os.close(tmp_fd)
            from fsm.instance import Loaded

            loaded = Loaded(final, raw, doc, state, status)
            if entry_record is not record and current is not None:
                self._saw(current)  # merged into what was just written: a version to know
            self.recent.append((loaded, core))
            lost = self._keep_replaced(fd, current, foreign)
            instance.after_save(loaded)
            return loaded, lost
        raise StoreError(
            f"the document of '{instance.id}' kept changing while fsm tried to write it "
            f"({MAX_ROUNDS} attempts); nothing was written"
        )

    @staticmethod
    def _discard(tmp: Path | None, tmp_fd: int | None, fd: int | None) -> None:
        """Remove a temporary file that will not be used, and close what a round opened."""
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
        for opened in (tmp_fd, fd):
            if opened is not None:
                os.close(opened)

    def _open_current(
        self, path: Path
    ) -> tuple[int | None, bytes | None, tuple[int, int] | None, int | None]:
        """The document's file, opened, its bytes, its identity (inode, device) and permission
        bits (all None when there is none yet): the file kept open from the last commit when it
        still is the document (one status call of the path tells both)."""
        written, self._written = self._written, None
        if written is not None:
            fd, known = written
            try:
                info = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and (info.st_ino, info.st_dev) == known:
                return fd, read_fd(fd, info.st_size), known, stat.S_IMODE(info.st_mode)
            os.close(fd)
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except FileNotFoundError:
            return None, None, None, None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
        info = os.fstat(fd)
        ident = (info.st_ino, info.st_dev)
        return fd, read_fd(fd, info.st_size), ident, stat.S_IMODE(info.st_mode)

    @staticmethod
    def _unchanged(
        fd: int | None, ident: tuple[int, int] | None, path: Path, current: bytes | None
    ) -> bool:
        """True when ``path`` is still the file read as ``current`` (open as ``fd``, of
        identity ``ident``), with the same bytes."""
        if fd is None or ident is None or current is None:
            return not path.exists()
        return is_file(path, ident) and holds(fd, current)

    def _their_data(self, raw: bytes, ours: Mapping[str, Any]) -> dict[str, Any]:
        """The document another writer left (``raw``, settled); when it is corrupt the step's
        result is parked, never lost."""
        path = self.instance.paths.document
        try:
            data = jsonio.loads(raw)
        except jsonio.JsonError as exc:
            problem = f"not valid JSON ({exc}); the file was left untouched"
        else:
            if isinstance(data, dict):
                return data
            problem = f"expected a JSON object, found {type(data).__name__}"
        parked = self.park(ours)
        raise CorruptDocumentError(
            f"corrupt document {path}: {problem}; another program broke it during the step, "
            f"whose result was kept in {parked} (repair the document or run 'fsm recover')"
        )

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

    def _install(self, tmp: Path, path: Path, ident: tuple[int, int] | None) -> bytes | None:
        """Put the temporary file ``tmp`` in place of the document (the file of identity
        ``ident`` that was read).

        The two are swapped (:func:`fsm.files.exchange`), so the file replaced stays reachable:
        when it is not the one fsm read, another program renamed its version over the document
        after the last check, and its bytes are returned (else None) to be merged, not lost.
        """
        if ident is None or not exchange(tmp, path):
            replace(tmp, path, folder_fd=self._folder_fd)
            return None
        # The new version is visible now: nothing below may fail the commit.
        foreign: bytes | None = None
        with contextlib.suppress(OSError, FsmError):
            info = os.lstat(tmp)
            if (info.st_ino, info.st_dev) != ident and stat.S_ISREG(info.st_mode):
                foreign = read_file(tmp)[0]
        with contextlib.suppress(OSError):
            tmp.unlink()
        with contextlib.suppress(OSError):
            sync_folder(path.parent, self._folder_fd)
        return foreign

    def _keep_replaced(
        self, fd: int | None, before: bytes | None, foreign: bytes | None
    ) -> _Lost | None:
        """Keep the replaced file open (see :meth:`settle`); when another writer already wrote
        into it, or renamed its own version over it (``foreign``), return that lost change."""
        if fd is None or before is None:
            return None
        if foreign is None and holds(fd, before):  # usual: nobody wrote into it
            self._replaced.append(_Replaced(fd, before, before))
            return None
        after = read_fd(fd)
        if foreign is not None:
            self._replaced.append(_Replaced(fd, after, before))
            return self._lost(before, foreign)
        if after == before:
            self._replaced.append(_Replaced(fd, after, before))
            return None
        after = self._settled_bytes(fd, after)
        if not _parses(after):  # a writer still midway: the next look compares with before
            self._replaced.append(_Replaced(fd, before, before))
            return None
        self._replaced.append(_Replaced(fd, after, before))
        return self._lost(before, after)

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
        return _Lost(written_over(self.instance, self._versions(), theirs, also=base) or base, raw)

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

    def _settle_replaced(self, *, last: bool = False) -> Loaded | None:
        """Look at the file the last commit replaced: a change written into it since is
        re-applied to the current document (the version written is returned). Close it, unless
        a writer is still midway in it (kept for the next look; ``last``: give up)."""
        pending, self._replaced = self._replaced, []
        written: Loaded | None = None
        for replaced in pending:
            if holds(replaced.fd, replaced.raw):
                os.close(replaced.fd)
                continue
            now = read_fd(replaced.fd)
            now = self._settled_bytes(replaced.fd, now)
            if not _parses(now) and not last:
                self._replaced.append(replaced)
                continue
            os.close(replaced.fd)
            lost = self._lost(replaced.before, now)
            if lost is not None:
                current = self.instance.load_unchecked()
                self._saw(current.raw)
                written = self._until_settled(
                    *self._reapply(current, lost.before, lost.raw, on_disk=current)
                )
        return written

    def _read_by(self, raw: bytes, base: Loaded) -> Loaded:
        """The version another writer read before it wrote ``raw``: the step's ``base``, unless
        it wrote back a copy of another version of fsm's (see :meth:`_written_over`)."""
        try:
            theirs = self.instance.loaded_from(raw)
        except StoreError:
            return base
        return written_over(self.instance, self._versions(), theirs, also=base) or base

    def settle(self) -> None:
        """End of an operation: re-apply a change written into the replaced file, close it."""
        if not self._replaced:
            return
        if all(holds(r.fd, r.raw) for r in self._replaced):  # usual: no lock needed
            for replaced in self._replaced:
                os.close(replaced.fd)
            self._replaced = []
            return
        with self.instance.store.document_lock(self.instance.id):
            # A writer midway in one gets a few more looks before fsm lets the file go.
            for attempt in range(SETTLE_LOOKS):
                self._settle_replaced(last=attempt == SETTLE_LOOKS - 1)
                if not self._replaced:
                    return

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
        record = MergeRecord(
            source=ours.state,
            dest=ours.state,
            actor="external",
            reason="re-applied a change another program wrote while fsm replaced the document",
            merged=True,
        )
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
            base = written_over(self.instance, self._versions(), current)
            if base is None:
                return current  # not a version fsm wrote: somebody else's edit, left to replay
            if base is not newest:
                self._saw(current.raw)
                return self._until_settled(
                    *self._reapply(newest, base, current.raw, on_disk=current)
                )
            journal_seen(self.instance, newest, current)
            self.recent.append((current, self.instance.core_hash(current.data)))
            return current

    def _versions(self) -> list[tuple[Loaded, str]]:
        """The versions another writer may have read before writing a copy back, with their
        core hashes: this process's latest, newest first (they win a tie), then the versions
        other writers put in place that it merged. Without the latter, a copy of another
        writer's version (a dashboard's rename, then its stop written over fsm's merge of it)
        is taken for a copy of fsm's merge, and what the merge added reads as deleted."""
        return [*reversed(self.recent), *reversed(self._seen)]

    def _saw(self, raw: bytes) -> None:
        """Remember ``raw``, a version another writer put in place, once (if it is valid)."""
        if any(loaded.raw == raw for loaded, _ in self._seen):
            return
        try:
            loaded = self.instance.loaded_from(raw)
        except StoreError:
            return
        self._seen.append((loaded, self.instance.core_hash(loaded.data)))

    # --- failures and parking --------------------------------------------------------------

    def journal_failure(self, record: Record, *, base: Loaded) -> Loaded:
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
            entry = record.as_merged() if current.raw != base.raw else record
            instance.journal.write(
                entry.stamped(
                    time=instance.clock.iso(),
                    state=current.state,
                    status=current.status,
                    doc_hash=bytes_hash(current.raw),
                    core_hash=instance.core_hash(current.data),
                )
            )
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
        """Make journal and document agree after a crash (see :func:`fsm.repair.repair`)."""
        return repair_instance(self.instance)


def _parses(raw: bytes) -> bool:
    """True when ``raw`` is JSON (a writer is not midway in it)."""
    try:
        jsonio.loads(raw)
    except jsonio.JsonError:
        return False
    return True
