"""The file store's compare-and-swap of one instance's document
(:meth:`fsm.store.file_store.FileStore.swap`).

Other programs write the document too, some without any lock (the CCW dashboard rewrites a
loop's file in place when a person presses pause), some by renaming their own copy over it. A
swap, under the instance's document lock (the caller's):

1. opens the file as it is now (keeping it open) and hands its bytes to the transaction's
   ``build``, which merges another writer's change and returns the bytes and records to write;
2. writes the bytes to a temporary file (``fsync``), then appends the journal records
   (write-ahead: a document is never visible without its record);
3. looks at the file once more; if another writer changed it in the meantime, the journal
   records and the temporary file are taken back and ``build`` is asked again;
4. swaps the temporary file and the document (``renameat2`` exchange, a plain rename where the
   system has none), so the file replaced is still at hand: a version another program renamed
   over the document after step 3 is returned as a late write at once instead of being
   destroyed, and the replaced file, read through the descriptor kept open, shows a write of a
   program that had opened it before (a late write too, found now or at a later look:
   :meth:`FileSwap.late_writes`). The replaced file stays open until the next look or the end
   of the operation.

The file written last is kept open during a run's session: the next swap and the check that the
document is still the version committed last (:meth:`FileSwap.is_current`) read it without an
open. Every write checks that all its bytes reached the file: a short write (a full disk, a
file-size limit) takes the step back and is an error.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fsm.base import jsonio
from fsm.base.errors import FsmError, StoreError
from fsm.base.files import (
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
from fsm.store.journal import Journal
from fsm.store.protocol import Build, LateWrite, Snapshot, Swapped

__all__ = ["FileSwap"]

MAX_ROUNDS = 20
"""Rounds a swap may redo while other writers keep changing the file."""
SETTLE_LOOKS = 10
"""Looks (each waiting as long as a read of a half-written document does) at the file replaced
last, at the end of an operation, while a writer is midway in it."""


@dataclass
class _Replaced:
    """The file a swap replaced, kept open, and the bytes it held just after the replace."""

    fd: int
    raw: bytes
    before: bytes
    """What that file held when the swap read it (what a late writer had read)."""


class FileSwap:
    """The swaps of one instance's document file (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        journal: Journal,
        workspace: Path,
        *,
        read_retries: int,
        retry_interval: float,
    ) -> None:
        self.path = path
        self.journal = journal
        self.workspace = workspace
        self.read_retries = read_retries
        self.retry_interval = retry_interval
        self._replaced: list[_Replaced] = []
        """Files swaps replaced, kept open until a look finds nothing more written into
        them (more than one while another writer is midway in one)."""
        self._folder_fd: int | None = None
        self._written: tuple[int, tuple[int, int]] | None = None
        """The file this swap wrote last and its identity, kept open during a session (it is
        the document until someone replaces it): the next swap reads it without an open."""
        self._keeping = False
        self.mode_when_new: int | None = None
        """The permission bits of the next document when none exists (a recovered document
        takes those of the corrupt one it replaces: a private document stays private)."""

    @contextlib.contextmanager
    def files_kept_open(self) -> Iterator[None]:
        """Keep the document's folder (to ``fsync`` it after each replace) and the document
        written last open meanwhile."""
        try:
            self._folder_fd = os.open(self.path.parent, os.O_RDONLY | os.O_CLOEXEC)
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

    def is_current(self, raw: bytes) -> bool:
        """True when the document holds exactly ``raw`` now, read through the file kept open
        when it still is the document."""
        written = self._written
        if written is not None and is_file(self.path, written[1]):
            return holds(written[0], raw)
        try:
            return read_file(self.path)[0] == raw
        except FileNotFoundError:
            return False

    # --- swapping --------------------------------------------------------------------------

    def swap(self, build: Build, *, expected: bytes | None) -> Swapped:
        """Write what ``build`` makes of the current version if it is still the document (see
        the module docstring)."""
        path = self.path
        journal = self.journal
        for _ in range(MAX_ROUNDS):
            fd, current, ident, mode = self._open_current(path)
            tmp: Path | None = None
            tmp_fd: int | None = None
            mark = 0
            appended = False
            try:
                if fd is not None and current is not None and expected not in (None, current):
                    # A writer midway (truncated, not yet written) must not be taken for the
                    # file's content: the check before the replace and the look at the
                    # replaced file compare against what it holds once it parses.
                    current = self._settled_bytes(fd, current)
                replaced = None if current is None else Snapshot(None, current, ident)
                proposal = build(replaced)
                tmp, tmp_fd, written_info = write_temporary_open(
                    path,
                    proposal.raw,
                    mode=self.mode_when_new if mode is None else mode,
                    root=self.workspace,
                )
                # Where the records start: the swap takes them back from there if it must.
                mark = journal.write_all(proposal.records)
                appended = True
                if not self._unchanged(fd, ident, path, current):
                    journal.truncate(mark)  # another writer was quicker: build again
                    appended = False
                    self._discard(tmp, tmp_fd, fd)
                    continue
                foreign = self._install(tmp, path, ident)
                tmp = None
            except BaseException:
                # Interrupted once the file was replaced (SIGTERM while the folder is synced):
                # the document is written, so its journal records stay.
                written = tmp_fd is not None and same_file(tmp_fd, path)
                if appended and not written:
                    journal.truncate(mark)
                self._discard(None if written else tmp, tmp_fd, fd)
                raise
            assert tmp_fd is not None  # the file just written
            self.mode_when_new = None
            if self._keeping:
                self._written = tmp_fd, (written_info.st_ino, written_info.st_dev)
            else:
                os.close(tmp_fd)
            late = self._keep_replaced(fd, current, foreign)
            return Swapped(proposal, replaced, late)
        raise StoreError(
            f"{path} kept changing while fsm tried to write it ({MAX_ROUNDS} attempts); "
            "nothing was written"
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
        bits (all None when there is none yet): the file kept open from the last swap when it
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

    def _install(self, tmp: Path, path: Path, ident: tuple[int, int] | None) -> bytes | None:
        """Put the temporary file ``tmp`` in place of the document (the file of identity
        ``ident`` that was read).

        The two are swapped (:func:`fsm.base.files.exchange`), so the file replaced stays reachable:
        when it is not the one fsm read, another program renamed its version over the document
        after the last check, and its bytes are returned (else None) to be merged, not lost.
        """
        if ident is None or not exchange(tmp, path):
            replace(tmp, path, folder_fd=self._folder_fd)
            return None
        # The new version is visible now: nothing below may fail the swap.
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

    # --- late writes -----------------------------------------------------------------------

    def _keep_replaced(
        self, fd: int | None, before: bytes | None, foreign: bytes | None
    ) -> LateWrite | None:
        """Keep the replaced file open (see :meth:`late_writes`); when another writer already
        wrote into it, or renamed its own version over it (``foreign``), return that change."""
        if fd is None or before is None:
            return None
        if foreign is None and holds(fd, before):  # usual: nobody wrote into it
            self._replaced.append(_Replaced(fd, before, before))
            return None
        after = read_fd(fd)
        if foreign is not None:
            self._replaced.append(_Replaced(fd, after, before))
            return LateWrite(before, foreign)
        if after == before:
            self._replaced.append(_Replaced(fd, after, before))
            return None
        after = self._settled_bytes(fd, after)
        if not _parses(after):  # a writer still midway: the next look compares with before
            self._replaced.append(_Replaced(fd, before, before))
            return None
        self._replaced.append(_Replaced(fd, after, before))
        return LateWrite(before, after)

    def _settled_bytes(self, fd: int, raw: bytes) -> bytes:
        """The bytes of a file another writer is rewriting in place, once they parse."""
        for _ in range(self.read_retries + 1):
            try:
                jsonio.loads(raw)
                return raw
            except jsonio.JsonError:
                time.sleep(self.retry_interval)
                raw = read_fd(fd)
        return raw

    def settle_replaced(self, *, last: bool = False) -> list[LateWrite]:
        """Look at the files the last swaps replaced: a change written into one since is
        returned. Close each, unless a writer is still midway in it (kept for the next look;
        ``last``: give up)."""
        pending, self._replaced = self._replaced, []
        found: list[LateWrite] = []
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
            found.append(LateWrite(replaced.before, now))
        return found

    def late_writes(self, *, last: bool) -> list[LateWrite]:
        """The changes written into replaced files since the last look (see
        :meth:`fsm.store.protocol.Store.late_writes`). At the end of an operation (``last``) a
        writer midway in one gets a few more looks before fsm lets the files go."""
        if not last:
            return self.settle_replaced()
        if not self._replaced:
            return []
        if all(holds(r.fd, r.raw) for r in self._replaced):  # usual: nothing was written
            for replaced in self._replaced:
                os.close(replaced.fd)
            self._replaced = []
            return []
        found: list[LateWrite] = []
        for attempt in range(SETTLE_LOOKS):
            found += self.settle_replaced(last=attempt == SETTLE_LOOKS - 1)
            if not self._replaced:
                break
        return found


def _parses(raw: bytes) -> bool:
    """True when ``raw`` is JSON (a writer is not midway in it)."""
    try:
        jsonio.loads(raw)
    except jsonio.JsonError:
        return False
    return True
