"""Instance ids: which names are safe wherever an instance is kept (a file name, a row, a
folder a machine writes its side files in).

Ids are letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit, at most 128
characters, without ``..``: ``../../etc/passwd`` never becomes a path, and an id never reads as
an option to another program.
"""

from __future__ import annotations

import re

from fsm.base.errors import InvalidIdError

__all__ = ["ID_PATTERN", "is_valid_id", "validate_id"]

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""The regular expression of an id (without its ``..`` exclusion)."""
_ID = re.compile(f"^{ID_PATTERN}$")


def validate_id(instance_id: str) -> str:
    """Return ``instance_id`` if it is safe as a file name; raise InvalidIdError otherwise."""
    if not instance_id:
        raise InvalidIdError("invalid instance id: it is empty")
    if instance_id.startswith("-"):
        # Handed to other tools (git, grep, a dashboard's scripts) it would read as an option.
        raise InvalidIdError(
            f"invalid instance id '{_shown(instance_id)}': it starts with '-' (it would read as "
            "an option); start it with a letter or digit"
        )
    if not _ID.fullmatch(instance_id) or ".." in instance_id:
        shown = _shown(instance_id)
        raise InvalidIdError(
            f"invalid instance id '{shown}': use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, without '..'"
        )
    return instance_id


def _shown(instance_id: str) -> str:
    """The id with control and non-ASCII characters escaped, at most 80 of them."""
    shown = instance_id[:80].encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(instance_id) > 80 else "")


def is_valid_id(candidate: str) -> bool:
    """True when ``candidate`` passes :func:`validate_id` (no error made)."""
    return bool(_ID.fullmatch(candidate)) and ".." not in candidate
