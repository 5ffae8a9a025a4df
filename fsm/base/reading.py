"""Reading a file fsm did not write, without ever waiting on it and within a size limit.

Every file fsm reads may be something other than a file: a FIFO in place of ``fsm.toml`` or an
issues file would make a plain ``open`` wait for a writer forever, and a link to ``/dev/zero``
would be read until memory runs out. :func:`read_limited` opens without blocking, refuses
anything that is not a regular file (naming what it is), and reads at most one byte more than
the limit, so that a larger file is refused without being read whole.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from fsm.base.errors import FileTooLargeError, NotARegularFileError

__all__ = ["FileTooLargeError", "NotARegularFileError", "kind_of", "read_limited"]


def kind_of(mode: int) -> str:
    """What a file of ``mode`` (from ``os.stat``) is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def read_limited(path: Path | str, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Raises FileNotFoundError and the other OSErrors of opening, :class:`NotARegularFileError`
    (whose message names what the path is instead) and :class:`FileTooLargeError`.
    """
    # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer;
    # on a regular file it changes nothing.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(errno.EINVAL, f"is {kind_of(mode)}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise FileTooLargeError(errno.EFBIG, f"larger than the limit of {limit} bytes")
    return b"".join(chunks)
