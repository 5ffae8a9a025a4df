"""A per-user cache of what fsm derives from files that seldom change, so that a command does
not derive it again: checked machine definitions (:mod:`fsm.model.definition`) and the rows of
``fsm ls`` (:mod:`fsm.view.listing`).

The folder is ``$FSM_CACHE_DIR`` when set (set it empty to turn the cache off), else
``$XDG_CACHE_HOME/fsm``, else ``~/.cache/fsm``. Every entry is named by a hash of everything it
was derived from, so a changed input simply misses; entries are written atomically and never
trusted beyond that: an unreadable or foreign entry is a miss, a folder that cannot be written
leaves fsm as fast as it was without a cache. Definitions are kept as pickles, which can name
code to run when loaded: the folder is created private (``0o700``) and an entry another user
owns is never loaded, the trust Python gives its own ``__pycache__``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["digest", "folder", "read", "stamp", "write"]


def folder() -> Path | None:
    """The cache folder, or None when the cache is turned off."""
    configured = os.environ.get("FSM_CACHE_DIR")
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fsm"


def read(kind: str, name: str) -> bytes | None:
    """The entry ``name`` of ``kind``, or None when there is none (or it cannot be trusted)."""
    root = folder()
    if root is None:
        return None
    path = root / kind / name
    try:
        # O_NONBLOCK: an entry that is a FIFO opens at once (and is refused) instead of
        # waiting for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if status.st_uid != os.getuid() or not stat.S_ISREG(status.st_mode):
            return None  # written by someone else, or not a file: not ours to load
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def write(kind: str, name: str, data: bytes) -> None:
    """Store ``data`` as the entry ``name`` of ``kind`` (silently nothing when that fails)."""
    root = folder()
    if root is None:
        return
    target = root / kind
    temporary = target / f".{name}.{os.getpid()}.tmp"
    try:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:  # every byte, or the entry is not kept
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, target / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def digest(*parts: bytes | str) -> str:
    """A hex SHA-256 of ``parts``, each length-prefixed (so no two lists of parts collide)."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.hexdigest()


def stamp(paths: Iterable[str]) -> list[list[int | str]]:
    """The path, size and modification time of each file (``-1`` when it is missing): a file
    changed in place or replaced changes its stamp."""
    stamped: list[list[int | str]] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            stamped.append([path, -1, -1])
        else:
            stamped.append([path, info.st_size, info.st_mtime_ns])
    return stamped
