"""Reading JSON that comes from outside fsm, with limits.

Documents, ``--input`` files, ``--set`` values, journal lines and orphan records may have been
written by anyone. ``json.loads`` alone turns some of them into crashes rather than errors: a
text nested 100,000 levels deep raises RecursionError, an integer of 5,000 digits ValueError
(Python's limit of 4,300 digits), and ``NaN`` is accepted although JSON has no such number (fsm
would then fail to write the document back). :func:`loads` reads strict JSON within:

* :data:`MAX_BYTES` of text (16 MiB; a document is usually a few kilobytes),
* :data:`MAX_DEPTH` levels of nested arrays and objects (100; documents use about 5),
* integers of at most Python's digit limit (``sys.get_int_max_str_digits()``, 4,300 by default),

and raises :class:`JsonError` (a ValueError) with a one-line reason otherwise. Callers turn it
into their own error: a corrupt document (exit 6), bad input (exit 2), an unreadable journal line.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MAX_BYTES", "MAX_DEPTH", "JsonError", "load_file", "loads", "loads_quick"]

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 100

# The depth check (see _depth_exceeds) first keeps what can matter: brackets, quotes, backslashes
# and the letters an escape may start with; then, once escapes are gone, only brackets (as "(" and
# ")") and quotes.
_NOT_STRUCTURE_OR_ESCAPE = bytes(b for b in range(256) if b not in b'[]{}"\\/bfnrtu')
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_BRACKETS = bytes.maketrans(b"[]{}", b"()()")
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')


class JsonError(ValueError):
    """Text that is not JSON fsm accepts; the message is the one-line reason.

    ``malformed`` is True when the text is not JSON at all (a syntax error, NaN, not UTF-8), and
    False when it is JSON beyond a limit: ``--set title=[draft`` keeps its text, a value nested
    too deep is an error.
    """

    def __init__(self, reason: str, *, malformed: bool) -> None:
        super().__init__(reason)
        self.malformed = malformed


def loads(data: bytes | str, *, max_bytes: int | None = None, max_depth: int | None = None) -> Any:
    """Parse strict JSON within the limits (by default :data:`MAX_BYTES` and :data:`MAX_DEPTH`);
    raise :class:`JsonError` with the reason otherwise."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    if len(data) > max_bytes:
        raise JsonError(f"larger than the limit of {max_bytes} bytes", malformed=False)
    try:
        # What json.loads does, with one decoder made once: passing parse_constant to
        # json.loads would build a new decoder on every call (3 us of a 10 us journal line).
        text = data if isinstance(data, str) else data.decode(_encoding(data), "surrogatepass")
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonError(
            f"{exc.msg} at line {exc.lineno} column {exc.colno}", malformed=True
        ) from exc
    except UnicodeDecodeError as exc:
        raise JsonError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", malformed=True) from exc
    except RecursionError as exc:
        raise JsonError(f"nested deeper than {max_depth} levels", malformed=False) from exc
    except JsonError:
        raise
    except ValueError as exc:  # the integer digit limit: the only other ValueError json raises
        raise JsonError(f"a number too long to read ({_first_line(exc)})", malformed=False) from exc
    # At most max_depth openers cannot nest deeper: most texts need no closer look.
    if text.count("[") + text.count("{") > max_depth and _depth_exceeds(data, max_depth):
        raise JsonError(f"nested deeper than {max_depth} levels", malformed=False)
    return value


def loads_quick(data: bytes | str) -> Any:
    """:func:`loads` with the default limits, in about half the time when ``data`` is plainly
    within them (no run of digits longer than Python's digit limit, fewer brackets than
    :data:`MAX_DEPTH`): pydantic-core's parser reads strict JSON as ``json`` does, and what it
    refuses (NaN, a lone surrogate, a byte-order mark, a syntax error) gets :func:`loads`'s
    reading and verdict."""
    if len(data) <= MAX_BYTES and _plainly_within(data):
        try:
            return _from_json()(data, allow_inf_nan=False, cache_strings="keys")
        except ValueError:
            pass
    return loads(data)


def _plainly_within(data: bytes | str) -> bool:
    if isinstance(data, str):
        return _plainly_within(data.encode("utf-8", "surrogatepass"))
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:
        return False
    digits = sys.get_int_max_str_digits()
    return not digits or len(data) <= digits or _long_digits(digits).search(data) is None


@functools.cache
def _from_json() -> Callable[..., Any]:
    # Imported when first used: fsm ls answered from its index imports no pydantic.
    from pydantic_core import from_json

    return from_json


@functools.cache
def _long_digits(limit: int) -> re.Pattern[bytes]:
    return re.compile(rb"[0-9]{%d}" % (limit + 1))


def load_file(path: Path, *, max_bytes: int | None = None) -> Any:
    """Read and parse the JSON file at ``path`` (raises OSError, or JsonError as :func:`loads`).

    At most one byte more than the limit is read, and only from a regular file: ``--input
    /dev/zero`` or a FIFO is refused at once (an OSError naming what it is).
    """
    from fsm.base.reading import FileTooLargeError, read_limited

    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    try:
        data = read_limited(path, max_bytes)
    except FileTooLargeError as exc:
        raise JsonError(str(exc), malformed=False) from exc
    return loads(data, max_bytes=max_bytes)


def _refuse_constant(name: str) -> Any:
    raise JsonError(f"{name} is not a JSON number", malformed=True)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _encoding(data: bytes) -> str:
    # json.detect_encoding looks for a BOM or the zero bytes of UTF-16/32; plain UTF-8 (nearly
    # every document) skips its work.
    if data[:1] not in {b"\x00", b"\xef", b"\xfe", b"\xff"} and data[1:2] != b"\x00":
        return "utf-8"
    return json.detect_encoding(data)


def _first_line(exc: Exception) -> str:
    text = str(exc)
    return text.split(":", 1)[0] if "integer string conversion" in text else text


def _depth_exceeds(data: bytes | str, limit: int) -> bool:
    """True when the (valid) JSON ``data`` nests arrays and objects deeper than ``limit``.

    It runs on every document read, after ``json.loads`` accepted the text, so it stays at C
    speed (about half the time of ``json.loads`` on a 14 kB document with 190 containers, almost
    nothing on a small one). Every escape is still whole after the first ``translate`` and is
    dropped, so each remaining quote delimits a string; strings go next, with any brackets inside
    them; then each pass that removes every innermost ``()`` lowers the nesting by one level.
    """
    kept = _utf8(data).translate(None, _NOT_STRUCTURE_OR_ESCAPE)
    if kept.count(b"[") + kept.count(b"{") <= limit:
        return False  # too few containers to be nested that deep
    if b"\\" in kept:
        kept = _ESCAPE.sub(b"", kept)
    compact = kept.translate(_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in compact:
        compact = _STRING.sub(b"", compact)
    for _ in range(limit):
        if not compact:
            return False
        compact = compact.replace(b"()", b"")
    return bool(compact)


def _utf8(data: bytes | str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")
    encoding = _encoding(data)
    if encoding in {"utf-8", "utf-8-sig"}:
        return data
    return data.decode(encoding).encode("utf-8", "surrogatepass")
