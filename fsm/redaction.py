"""Showing an agent's command without the secrets of its configuration.

An agent's command comes from ``[agent.<tool>]`` in fsm.toml, and people put tokens there
(``command = ["env", "API_TOKEN=...", "codex", ...]``, ``--api-key=...``). Results of agent runs
are copied by machines into documents, reports and progress files that other people read, so
the executor never hands out the expanded command: it shows the program, option names
(``--full-auto``), ``NAME=`` and ``--flag=`` prefixes and ``{prompt}`` where the prompt went,
and every other argument as ``***``. A hidden value the agent echoes in its output is hidden
there too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["MASK", "redacted_command", "scrubbed"]

MASK = "***"
_OPTION = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
_ASSIGNMENT = re.compile(r"^(--?[A-Za-z][A-Za-z0-9_-]*=|[A-Za-z_][A-Za-z0-9_]*=)(.+)$", re.DOTALL)
_SHORTEST_SECRET = 4
"""Hidden values shorter than this are not searched for in output (they would hide words)."""


def redacted_command(
    argv: Sequence[str], placeholders: dict[str, str]
) -> tuple[tuple[str, ...], list[str]]:
    """The command as it may be shown, and the values it hides.

    ``placeholders`` maps the values that replaced placeholders (the prompt, the prompt file)
    back to their placeholder names, which are shown instead.
    """
    if not argv:
        return (), []
    shown = [argv[0]]
    hidden: list[str] = []
    for part in argv[1:]:
        assignment = _ASSIGNMENT.match(part)
        if part in placeholders:
            shown.append(placeholders[part])
        elif _OPTION.match(part):
            shown.append(part)
        elif assignment:
            shown.append(assignment.group(1) + MASK)
            hidden.append(assignment.group(2))
        else:
            shown.append(MASK)
            hidden.append(part)
    return tuple(shown), hidden


def scrubbed(text: str, hidden: Sequence[str]) -> str:
    """``text`` with every hidden value of at least four characters replaced by the mask."""
    for value in sorted(hidden, key=len, reverse=True):
        if len(value) >= _SHORTEST_SECRET and value in text:
            text = text.replace(value, MASK)
    return text
