"""What the machine writes about an agent run, without the secrets of its configuration.

An agent's command comes from ``[agent.<tool>]`` in fsm.toml, and people put tokens there
(``command = ["env", "API_TOKEN=...", "codex", ...]``, ``--api-key=...``). The executor's own
description of a run shows the expanded argv, and issue errors, execution records and the
report are kept in files other people read. So for agent runs the machine records the tool and
a redacted command instead: the program, option names (``--full-auto``), ``NAME=`` and
``--flag=`` prefixes, and ``{prompt}`` where the prompt went; every other argument is ``***``.
Any of those hidden values that the agent echoes in its output is hidden there too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fsm.executor import ExecResult

__all__ = ["describe_agent_run", "redacted_command"]

MASK = "***"
_OPTION = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
_ASSIGNMENT = re.compile(r"^(--?[A-Za-z][A-Za-z0-9_-]*=|[A-Za-z_][A-Za-z0-9_]*=)(.+)$", re.DOTALL)
_TAIL_LIMIT = 200
_SHORTEST_SECRET = 4
"""Hidden values shorter than this are not searched for in output (they would hide words)."""


def redacted_command(argv: Sequence[str], prompt: str) -> tuple[str, list[str]]:
    """The command as it may be shown, and the values it hides."""
    if not argv:
        return "", []
    shown = [argv[0]]
    hidden: list[str] = []
    for part in argv[1:]:
        assignment = _ASSIGNMENT.match(part)
        if part == prompt:
            shown.append("{prompt}")
        elif _OPTION.match(part):
            shown.append(part)
        elif assignment:
            shown.append(assignment.group(1) + MASK)
            hidden.append(assignment.group(2))
        else:
            shown.append(MASK)
            hidden.append(part)
    return " ".join(shown), hidden


def describe_agent_run(tool: str, prompt: str, result: ExecResult) -> str:
    """One line saying how agent ``tool`` ended, naming its command only in redacted form."""
    command, hidden = redacted_command(result.argv, prompt)
    if result.error is not None:
        # The executor's own errors name the tool or the program only, never the arguments.
        return _scrubbed(result.error, hidden)
    if result.timed_out:
        return f"agent '{tool}' timed out after {result.duration_ms / 1000:.1f}s: {command}"
    if result.exit_code == 0:
        return f"agent '{tool}' exited 0: {command}"
    lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
    tail = _scrubbed(lines[-1], hidden)[:_TAIL_LIMIT] if lines else ""
    detail = f" ({tail})" if tail else ""
    return f"agent '{tool}' exited {result.exit_code}: {command}{detail}"


def _scrubbed(text: str, hidden: Sequence[str]) -> str:
    for value in sorted(hidden, key=len, reverse=True):
        if len(value) >= _SHORTEST_SECRET and value in text:
            text = text.replace(value, MASK)
    return text
