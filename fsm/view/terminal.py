"""Text fit for a terminal: control characters from documents, journals and arguments escaped.

A ``--reason``, a title edited by a dashboard or an agent's error message may hold terminal
escape sequences (ESC ``[31m``, a CSI that moves the cursor, BEL, a carriage return that hides
what came before). Printed raw they recolour, rewrite or retitle the user's terminal. Everything
fsm prints for people goes through :func:`printable` (a newline stays a newline) or
:func:`one_line` (a newline is escaped too); each such character is shown as a Python-style
escape (``\\x1b``, ``\\r``, ``\\u202e``).

Escaped: C0 controls (U+0000-U+001F, tab included), DEL and the C1 controls (U+007F-U+009F,
where U+009B is a CSI of its own), the line and paragraph separators (U+2028, U+2029) that
split a line for some readers, the bidirectional overrides and isolates (U+202A-U+202E,
U+2066-U+2069) that make text read differently from what it is, and lone surrogates (which a
UTF-8 terminal cannot be sent at all).

JSON output needs none of this for C0 controls (``json.dumps`` writes them as ``\\u001b``) but
does for the rest when it keeps non-ASCII text: :func:`json_text` writes those as ``\\uXXXX``,
which is the same JSON value.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["emit_json", "json_text", "one_line", "out", "printable"]

_UNSAFE = "\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_KEEPING_NEWLINES = re.compile(f"[{_UNSAFE}]")
_UNSAFE_WITH_NEWLINES = re.compile(f"[{_UNSAFE}\n]")
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` with every unsafe character escaped; newlines are kept."""
    # Every unsafe character is unprintable for str.isprintable, which is much faster than a
    # search: most text is answered by it.
    if text.isprintable() or _UNSAFE_KEEPING_NEWLINES.search(text) is None:
        return text
    return _UNSAFE_KEEPING_NEWLINES.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` with every unsafe character escaped, newlines included: it prints as one line."""
    if text.isprintable() or _UNSAFE_WITH_NEWLINES.search(text) is None:
        return text
    return _UNSAFE_WITH_NEWLINES.sub(_escape, text)


def json_text(
    value: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None
) -> str:
    """``value`` as JSON that keeps non-ASCII text but escapes what a terminal would act on."""
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=False)
    if text.isascii() and "\x7f" not in text:
        return text  # JSON escapes the C0 controls itself
    # Outside strings JSON text is ASCII, so each match is inside a string: \uXXXX is exact.
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def out(text: str = "") -> None:
    """Print a line of a command's result on stdout, control characters escaped."""
    print(printable(text))


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    print(json_text(value, indent=2))
