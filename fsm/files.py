"""The file operations fsm writes with: confined to a root folder, never through a symbolic link.

A workspace may come from anywhere (a cloned repository can ship a ``.workflow`` folder that is a
link to ``/etc``), so every file fsm creates, writes or locks is checked:

* folders are created one component at a time below the root; a component that is a symbolic
  link is accepted only when it resolves inside the root (a link out is an
  :class:`~fsm.errors.UnsafePathError`), and a folder checked once is remembered until the next
  instance handle is made (:func:`recheck_folders`);
* files are opened with ``O_NOFOLLOW``: a file that is a symbolic link is never read or written
  through, whatever it points to;
* writes are atomic (a temporary file in the same folder, ``fsync``, ``os.replace``, ``fsync`` of
  the folder); a replaced file keeps its permission bits (a document made ``chmod 600`` stays
  private), and new files get ``0o666`` minus the umask, like any program's.

The checks are made when a path is used, so a folder swapped for a link between the check and
the write (a race only someone with write access to the workspace can run) is not covered.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from pathlib import Path

from fsm.errors import UnsafePathError

__all__ = [
    "FileLock",
    "append_bytes",
    "atomic_write_bytes",
    "atomic_write_text",
    "ensure_folder",
    "leftover_temporaries",
    "open_nofollow",
    "read_fd",
    "read_file",
    "recheck_folders",
    "replace",
    "same_file",
    "write_temporary",
    "write_temporary_open",
]

_NEW_FILE_MODE = 0o666
_checked: set[str] = set()
"""Folders known to lie inside their root, checked since the last :func:`recheck_folders`."""


def recheck_folders() -> None:
    """Forget which folders were checked: the next use checks them again. Every new instance
    handle calls it, so a long-lived process notices a folder replaced by a link."""
    _checked.clear()


def ensure_folder(folder: Path, root: Path | None) -> None:
    """Create ``folder`` and its missing parents; refuse links that lead out of ``root``.

    Without a ``root`` the folder is only created (callers that write outside any workspace).
    """
    key = f"{root}\0{folder}"
    if key in _checked:
        return
    if root is None:
        folder.mkdir(parents=True, exist_ok=True)
        _checked.add(key)
        return
    os.makedirs(root, exist_ok=True)  # the workspace itself is the caller's choice
    real_root = os.path.realpath(root)
    try:
        relative = folder.relative_to(root)
    except ValueError:
        raise UnsafePathError(f"{folder} is not inside {root}") from None
    current = Path(root)
    for part in relative.parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(current)
            info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode):
            target = os.path.realpath(current)
            if not _is_inside(target, real_root):
                raise UnsafePathError(
                    f"{current} is a symbolic link to {target}, outside the workspace "
                    f"{root}: fsm does not write through it"
                )
        elif not stat.S_ISDIR(info.st_mode):
            raise UnsafePathError(f"{current} is not a folder")
    _checked.add(key)


def _is_inside(path: str, root: str) -> bool:
    return path == root or path.startswith(os.path.join(root, ""))


def open_nofollow(path: Path, flags: int, *, root: Path | None = None) -> int:
    """``os.open`` that refuses a symbolic link as the file itself, creating the folder (inside
    ``root``) when it is missing and ``flags`` create the file."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    if root is not None:
        ensure_folder(path.parent, root)  # remembered: one set lookup after the first time
    try:
        return os.open(path, flags, _NEW_FILE_MODE)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        # The folder is missing (or was removed since it was checked): create it, checked anew.
        _checked.discard(f"{root}\0{path.parent}")
        ensure_folder(path.parent, root)
    except OSError as exc:
        raise _link_error(path, exc) from exc
    try:
        return os.open(path, flags, _NEW_FILE_MODE)
    except OSError as exc:
        raise _link_error(path, exc) from exc


def _link_error(path: Path, exc: OSError) -> Exception:
    """ELOOP from ``O_NOFOLLOW`` means the file is a link: say so, as an UnsafePathError."""
    if exc.errno == errno.ELOOP:
        return UnsafePathError(f"{path} is a symbolic link: fsm does not read or write through it")
    return exc


def atomic_write_text(
    path: Path, text: str, *, mode: int | None = None, root: Path | None = None
) -> None:
    """Replace ``path`` with ``text`` atomically and durably (line endings kept as given).

    Missing parent folders are created (inside ``root`` when given); ``mode`` sets the new
    file's permissions, else an existing file's are kept. Machines use it for their side files.
    """
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode, root=root)


def atomic_write_bytes(
    path: Path, data: bytes, *, mode: int | None = None, root: Path | None = None
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see :func:`atomic_write_text`)."""
    tmp = write_temporary(path, data, mode=mode, root=root)
    replace(tmp, path)


def write_temporary(
    path: Path, data: bytes, *, mode: int | None = None, root: Path | None = None
) -> Path:
    """Write ``data`` durably to a new temporary file beside ``path`` and return its name.

    The temporary file gets ``mode``, else the permission bits of the file it will replace. Its
    name, ``.<name>.<pid>.<ns>.tmp``, lets :func:`leftover_temporaries` find it after a crash.
    """
    tmp, fd = write_temporary_open(path, data, mode=mode, root=root)
    os.close(fd)
    return tmp


def write_temporary_open(
    path: Path, data: bytes, *, mode: int | None = None, root: Path | None = None
) -> tuple[Path, int]:
    """:func:`write_temporary`, returning the file still open (for reading and writing): once
    it replaces ``path`` the caller can look at the document without opening it again."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = open_nofollow(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, root=root)
    try:
        if mode is None:
            mode = _mode_of(path)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mode is not None:
            os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp, fd


def _mode_of(path: Path) -> int | None:
    """The permission bits of the file at ``path`` (None when there is none); a link there is
    refused, since replacing it would silently turn it into a file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"{path} is a symbolic link: fsm does not write through it")
    return stat.S_IMODE(info.st_mode)


def replace(tmp: Path, path: Path, *, folder_fd: int | None = None) -> None:
    """Move the temporary file ``tmp`` over ``path`` and make the rename durable
    (``folder_fd``: the folder, already open, to ``fsync``)."""
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if folder_fd is not None:
        os.fsync(folder_fd)
        return
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def leftover_temporaries(path: Path) -> list[Path]:
    """Temporary files of :func:`write_temporary` for ``path`` still lying beside it."""
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return sorted(
        path.parent / name for name in names if name.startswith(prefix) and name.endswith(".tmp")
    )


def append_bytes(path: Path, data: bytes, *, root: Path | None = None) -> int:
    """Append ``data`` to ``path`` in one ``O_APPEND`` write; return the file's size before it
    (so that a caller can take the append back with ``os.truncate``)."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, root=root)
    try:
        before = os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, data)
    finally:
        os.close(fd)
    return before


def read_file(path: str | Path) -> tuple[bytes, os.stat_result]:
    """The bytes of ``path`` and its status, from one open (raises OSError; a symbolic link
    raises UnsafePathError).

    Cheaper than ``Path.read_bytes`` plus ``Path.stat``: four system calls instead of ten.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _link_error(Path(path), exc) from exc
    try:
        stat = os.fstat(fd)
        return _read_sized(fd, stat.st_size), stat
    finally:
        os.close(fd)


def read_fd(fd: int) -> bytes:
    """Everything in the open file ``fd``, read from its start (the offset is not moved)."""
    return _read_sized(fd, os.fstat(fd).st_size)


def _read_sized(fd: int, size: int) -> bytes:
    # One byte more than the size: a short read is the end of the file, in one call.
    data = os.pread(fd, size + 1, 0)
    if len(data) > size:  # the file grew meanwhile: read the rest
        chunks = [data]
        offset = len(data)
        while chunk := os.pread(fd, 1 << 16, offset):
            chunks.append(chunk)
            offset += len(chunk)
        data = b"".join(chunks)
    return data


class FileLock:
    """An advisory ``flock`` on a file; a second holder in any process is refused or waits.

    With ``keep_open`` the lock file stays open between uses (a run takes the document lock
    once per step: opening the file every time would cost more than the lock itself);
    :meth:`close` closes it.
    """

    def __init__(self, path: Path, root: Path | None = None, *, keep_open: bool = False) -> None:
        self.path = path
        self.root = root
        self.keep_open = keep_open
        self._fd: int | None = None
        self._locked = False

    def acquire(self, *, blocking: bool, timeout: float = 10.0) -> bool:
        """Take the lock; return False when not ``blocking`` and another holder has it."""
        if self._fd is None:
            self._fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, root=self.root)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not blocking or time.monotonic() >= deadline:
                    if not self.keep_open:
                        self.close()
                    return False
                time.sleep(0.002)
                continue
            self._locked = True
            return True

    def release(self) -> None:
        """Give the lock back (the file stays open with ``keep_open``)."""
        if self._fd is not None and self._locked:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._locked = False
        if not self.keep_open:
            self.close()

    def close(self) -> None:
        """Close the lock file (which also gives the lock back)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._locked = False

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._locked


def same_file(fd: int, path: Path) -> bool:
    """True when ``path`` (not followed if a link) is the file open as ``fd``."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (found.st_ino, found.st_dev) == (held.st_ino, held.st_dev)
