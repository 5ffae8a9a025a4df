"""The file operations fsm writes with: confined to a root folder, never through a symbolic link.

A workspace may come from anywhere (a cloned repository can ship a ``.workflow`` folder that is a
link to ``/etc``), so every file fsm creates, writes or locks is checked:

* folders are created one component at a time below the root; a component that is a symbolic
  link is accepted only when it resolves inside the root (a link out is an
  :class:`~fsm.base.errors.UnsafePathError`), and a folder checked once is remembered until the next
  instance handle is made (:func:`recheck_folders`);
* files are opened with ``O_NOFOLLOW``: a file that is a symbolic link is never read or written
  through, whatever it points to;
* writes are atomic (a temporary file in the same folder, ``fsync``, ``os.replace``, ``fsync`` of
  the folder); a replaced file keeps its permission bits (a document made ``chmod 600`` stays
  private), and new files get ``0o666`` minus the umask, like any program's.

While the engine runs an instance's code (:func:`confined_to`), a write given no ``root`` is
confined to the workspace when it lies inside it: a machine's side files get the same checks
without naming the workspace.

The checks are made when a path is used, so a folder swapped for a link between the check and
the write (a race only someone with write access to the workspace can run) is not covered.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

from fsm.base.errors import NotARegularFileError, UnsafePathError

__all__ = [
    "FileLock",
    "append_bytes",
    "append_text",
    "atomic_write_bytes",
    "atomic_write_text",
    "confined_to",
    "dead_temporaries",
    "ensure_folder",
    "exchange",
    "finish_append",
    "holds",
    "is_file",
    "leftover_temporaries",
    "open_nofollow",
    "read_fd",
    "read_file",
    "recheck_folders",
    "remove_dead_temporaries",
    "replace",
    "same_file",
    "sync_folder",
    "write_all",
    "write_temporary",
    "write_temporary_open",
]

_NEW_FILE_MODE = 0o666
_checked: set[str] = set()
"""Folders known to lie inside their root, checked since the last :func:`recheck_folders`."""


_confinement: ContextVar[tuple[Path, str] | None] = ContextVar("fsm_confinement", default=None)


@contextlib.contextmanager
def confined_to(root: Path) -> Iterator[None]:
    """Within this block, writes of this module given no ``root`` whose path lies inside
    ``root`` are confined to it (the engine wraps the code of machines in it)."""
    token = _confinement.set((root, os.path.join(os.path.abspath(root), "")))
    try:
        yield
    finally:
        _confinement.reset(token)


def _root_for(path: Path, root: Path | None) -> Path | None:
    """``root``, else the confinement of :func:`confined_to` when ``path`` lies inside it."""
    if root is not None:
        return root
    confined = _confinement.get()
    if confined is None:
        return None
    text = os.fspath(path)
    if not text.startswith(os.sep):
        text = os.path.abspath(text)
    return confined[0] if text.startswith(confined[1]) else None


def recheck_folders() -> None:
    """Forget which folders were checked: the next use checks them again. Every new instance
    handle calls it, so a long-lived process notices a folder replaced by a link."""
    _checked.clear()


def current_umask() -> int:
    """The process's umask, read without changing it (``/proc``: setting it to read it back
    would leave another thread's new file briefly open to everyone), else by setting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def ensure_folder(folder: Path, root: Path | None) -> None:
    """Create ``folder`` and its missing parents; refuse links that lead out of ``root``.

    Without a ``root`` (and outside :func:`confined_to`) the folder is only created (callers
    that write outside any workspace).
    """
    root = _root_for(folder, root)
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


def _known_folder(path: Path, root: Path) -> bool:
    """True when the folder of ``path`` was checked already (:func:`ensure_folder`'s key, made
    from the path's text: building ``path.parent`` costs more than the lookup, on every write
    of a persisted step)."""
    text = os.fspath(path)
    cut = text.rfind(os.sep)
    return cut > 0 and f"{root}\0{text[:cut]}" in _checked


def _is_inside(path: str, root: str) -> bool:
    return path == root or path.startswith(os.path.join(root, ""))


def open_nofollow(
    path: Path, flags: int, *, root: Path | None = None, mode: int = _NEW_FILE_MODE
) -> int:
    """``os.open`` that refuses a symbolic link as the file itself, creating the folder (inside
    ``root``) when it is missing and ``flags`` create the file (with ``mode``, less the
    umask), and that refuses anything but a regular file without waiting on it
    (:class:`~fsm.errors.NotARegularFileError`: a FIFO in place of a journal would otherwise
    block the open until someone writes to it)."""
    return _regular(_open_nofollow(path, flags, root, mode), path)


def _regular(fd: int, path: Path | str) -> int:
    """``fd`` when it is a regular file; else it is closed and NotARegularFileError raised."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    from fsm.base.reading import kind_of

    raise NotARegularFileError(errno.EINVAL, f"is {kind_of(mode)}, not a regular file", str(path))


def _open_nofollow(path: Path, flags: int, root: Path | None, mode: int) -> int:
    # O_NONBLOCK: opening a FIFO returns at once instead of waiting for the other end; it
    # changes nothing for a regular file's reads and writes.
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    if root is None and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        root = _root_for(path, None)
    if root is not None and not _known_folder(path, root):
        ensure_folder(path.parent, root)
    try:
        return os.open(path, flags, mode)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        # The folder is missing (or was removed since it was checked): create it, checked anew.
        _checked.discard(f"{root}\0{path.parent}")
        ensure_folder(path.parent, root)
    except OSError as exc:
        raise _link_error(path, exc) from exc
    try:
        return os.open(path, flags, mode)
    except OSError as exc:
        raise _link_error(path, exc) from exc


def _link_error(path: Path, exc: OSError) -> Exception:
    """ELOOP from ``O_NOFOLLOW`` means the file is a link: say so, as an UnsafePathError;
    ENXIO from ``O_NONBLOCK`` a FIFO opened for writing with no reader: say what it is."""
    if exc.errno == errno.ENXIO:
        with contextlib.suppress(OSError):
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                from fsm.base.reading import kind_of

                return NotARegularFileError(
                    errno.EINVAL, f"is {kind_of(mode)}, not a regular file", str(path)
                )
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
    remove_dead_temporaries(path)


def write_temporary(
    path: Path, data: bytes, *, mode: int | None = None, root: Path | None = None
) -> Path:
    """Write ``data`` durably to a new temporary file beside ``path`` and return its name.

    The temporary file gets ``mode``, else the permission bits of the file it will replace. Its
    name, ``.<name>.<pid>.<ns>.tmp``, lets :func:`leftover_temporaries` find it after a crash.
    """
    tmp, fd, _ = write_temporary_open(path, data, mode=mode, root=root)
    os.close(fd)
    return tmp


def write_temporary_open(
    path: Path, data: bytes, *, mode: int | None = None, root: Path | None = None
) -> tuple[Path, int, os.stat_result]:
    """:func:`write_temporary`, returning the file still open (for reading and writing), and
    its status once written: once it replaces ``path`` the caller can look at the document
    without opening it again, and knows its identity.

    The file is created with its permission bits already (a private document's next version is
    never readable by others, not even while it is written), and changed only when the umask
    took some away (one status call where a change of mode would be written to the disk's
    journal at every step).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    if mode is None:
        mode = _mode_of(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL
    fd = open_nofollow(tmp, flags, root=root, mode=_NEW_FILE_MODE if mode is None else mode)
    try:
        view = memoryview(data)
        while view:  # every byte (a full disk or a size limit raises OSError)
            count = os.write(fd, view)
            if count <= 0:  # never seen: the system raises ENOSPC or EFBIG instead
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))
            view = view[count:]
        info = os.fstat(fd)
        if mode is not None and stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(fd, mode)
            info = os.fstat(fd)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp, fd, info


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
    sync_folder(path.parent, folder_fd)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_CANNOT_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.ENOENT, errno.EOPNOTSUPP, errno.EXDEV}


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """The C library's ``renameat2`` (Linux, glibc 2.28 or later), or None."""
    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    return function


def exchange(tmp: Path, path: Path) -> bool:
    """Swap the files named ``tmp`` and ``path`` in one atomic step (``renameat2`` with
    ``RENAME_EXCHANGE``): ``path`` then names the new file and ``tmp`` the one it replaced, which
    the caller can still look at. False, with nothing done, where the system cannot (not Linux,
    a file system without it) or ``path`` does not exist; the caller then uses :func:`replace`.

    Unlike a rename, nothing is destroyed unseen: a file another program renamed over ``path``
    just before is found under ``tmp`` instead of vanishing.
    """
    function = _renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _CANNOT_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(path))


def sync_folder(folder: Path, folder_fd: int | None = None) -> None:
    """``fsync`` a folder (``folder_fd``: already open), making the renames and removals in it
    durable."""
    if folder_fd is not None:
        os.fsync(folder_fd)
        return
    dir_fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
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


_TEMPORARY = re.compile(r"\A\..+\.(\d+)\.\d+\.tmp\Z", re.S)


def dead_temporaries(folder: Path, prefix: str = ".") -> list[Path]:
    """The temporary files of :func:`write_temporary` in ``folder`` (those of one file: its
    ``prefix``) whose writing process has died: left by a crash, never to be renamed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    dead = []
    for name in names:
        match = _TEMPORARY.match(name) if name.startswith(prefix) else None
        if match and int(match.group(1)) != os.getpid() and not process_alive(int(match.group(1))):
            dead.append(folder / name)
    return sorted(dead)


def remove_dead_temporaries(path: Path) -> None:
    """Remove the temporary files of ``path`` left by writers killed before renaming them: each
    successful write of a file cleans up after the writes of it that crashed."""
    for tmp in dead_temporaries(path.parent, f".{path.name}."):
        with contextlib.suppress(OSError):
            tmp.unlink()


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def append_bytes(path: Path, data: bytes, *, root: Path | None = None) -> int:
    """Append ``data`` to ``path`` in one ``O_APPEND`` write; return the file's size before it
    (so that a caller can take the append back with ``os.truncate``). All of it is written or
    none (see :func:`finish_append`)."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, root=root)
    try:
        before = os.lseek(fd, 0, os.SEEK_END)
        written = os.write(fd, data)
        if written != len(data):
            finish_append(fd, data, written, before)
    finally:
        os.close(fd)
    return before


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many writes that takes (OSError when the
    system refuses the rest: a full disk, a file-size limit)."""
    view = memoryview(data)
    while view:
        count = os.write(fd, view)
        if count <= 0:  # never seen: the system raises ENOSPC or EFBIG instead
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[count:]


def finish_append(fd: int, data: bytes, written: int, before: int) -> None:
    """Write the rest of ``data`` after a short ``O_APPEND`` write of ``written`` bytes to
    ``fd`` (whose size was ``before``). When the rest cannot be written (a full disk, a
    file-size limit: the OSError it ends with is raised), what was written is taken back, so
    that no torn line is left for the next append to be glued onto."""
    try:
        write_all(fd, memoryview(data)[written:].tobytes())
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, before)
        raise


def append_text(path: Path, text: str, *, root: Path | None = None) -> None:
    """Append ``text`` to ``path`` in one write, creating it (and its folders, inside ``root``)
    when missing; never through a symbolic link. Machines use it for their logs."""
    append_bytes(path, text.encode("utf-8"), root=root)


def read_file(path: str | Path) -> tuple[bytes, os.stat_result]:
    """The bytes of ``path`` and its status, from one open (raises OSError; a symbolic link
    raises UnsafePathError).

    Cheaper than ``Path.read_bytes`` plus ``Path.stat``: four system calls instead of ten.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise _link_error(Path(path), exc) from exc
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            from fsm.base.reading import kind_of

            raise NotARegularFileError(
                errno.EINVAL, f"is {kind_of(status.st_mode)}, not a regular file", str(path)
            )
        return _read_sized(fd, status.st_size), status
    finally:
        os.close(fd)


def read_fd(fd: int, size: int | None = None) -> bytes:
    """Everything in the open file ``fd``, read from its start (the offset is not moved);
    ``size``: its size as a status call just made tells it (a file growing meanwhile is still
    read whole)."""
    return _read_sized(fd, os.fstat(fd).st_size if size is None else size)


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


def holds(fd: int, raw: bytes) -> bool:
    """True when the open file ``fd`` holds exactly ``raw``: one read of one byte more, where
    :func:`read_fd` asks the file's size first."""
    return os.pread(fd, len(raw) + 1, 0) == raw


def is_file(path: Path, known: tuple[int, int]) -> bool:
    """True when ``path`` (not followed if a link) is the file of identity ``known``."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (found.st_ino, found.st_dev) == known


def same_file(fd: int, path: Path) -> bool:
    """True when ``path`` (not followed if a link) is the file open as ``fd``."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (found.st_ino, found.st_dev) == (held.st_ino, held.st_dev)
