"""What machines use besides their :class:`~fsm.model.context.Context`: writing their side files in
the workspace, and checking ids.

Whatever store keeps the instance documents, a machine's side files (progress files, reports,
plans, backups) live in the workspace, in ``ctx.instance_dir`` or wherever the machine's work
is. These functions write them safely:

* :func:`atomic_write_text` / :func:`atomic_write_bytes`: replace a file atomically and durably
  (a reader sees the old content or the new, never half), keeping its permission bits;
* :func:`append_text`: append one line (or several) in one write, all of it or none;
* :func:`ensure_folder`: create a folder and its parents;
* :func:`read_file`: a file's bytes and status, never through a symbolic link.

None of them writes through a symbolic link, and while the engine runs a machine's guards,
actions and hooks (:func:`confined_to`), a write given no ``root`` that lies inside the workspace
is confined to it: a folder that is a link leading out of the workspace is refused with
:class:`~fsm.base.errors.UnsafePathError`. :func:`validate_id` checks an id (an instance's, or one a
machine makes a file name of: a task id, an issue id) before it becomes part of a path.
"""

from __future__ import annotations

from fsm.base.errors import InvalidIdError, UnsafePathError
from fsm.base.files import (
    append_text,
    atomic_write_bytes,
    atomic_write_text,
    confined_to,
    current_umask,
    ensure_folder,
    read_file,
)
from fsm.base.ids import is_valid_id, validate_id

__all__ = [
    "InvalidIdError",
    "UnsafePathError",
    "append_text",
    "atomic_write_bytes",
    "atomic_write_text",
    "confined_to",
    "current_umask",
    "ensure_folder",
    "is_valid_id",
    "read_file",
    "validate_id",
]
