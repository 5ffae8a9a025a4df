"""What the loop records about an agent run, without the secrets its command may hold.

An ``[agent.<tool>]`` command in fsm.toml may carry a token (``["codex", "--api-key", "sk-...",
"exec", "{prompt}"]``). The executor's own description of a run repeats the whole argv, so the
loop never records it: it records the tool, a redacted command (the program's name, option names,
the words of the agent CLIs fsm knows, ``{prompt}`` / ``{prompt_file}`` / the mode; every other
argument shown as ``***``) and the run's outcome, with every redacted argument scrubbed from the
output it keeps. This holds for the document, changes.log, develop.md and the instance log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fsm.executor import KNOWN_AGENTS, ExecResult

__all__ = ["AgentRun", "agent_run"]

_PUBLIC = frozenset(
    word
    for templates in KNOWN_AGENTS.values()
    for template in templates.values()
    for word in template
    if "{" not in word
)
_SECRET_MIN = 6
"""Shorter arguments are not scrubbed from output: they would mangle it, and no token is that
short."""


@dataclass(frozen=True)
class AgentRun:
    """An agent run as it may be recorded."""

    command: str
    """The redacted command, e.g. ``codex --api-key *** exec --full-auto {prompt}``."""
    secrets: tuple[str, ...]
    """The redacted arguments, scrubbed from any text that is kept."""

    def scrub(self, text: str) -> str:
        """``text`` with every redacted argument replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def describe(self, tool: str, result: ExecResult) -> str:
        """How the run ended, in one line, naming the tool and never the argv."""
        if result.error is not None:
            return self.scrub(result.error)
        if result.timed_out:
            return f"agent {tool} timed out after {result.duration_ms / 1000:.1f}s"
        if result.exit_code == 0:
            return f"agent {tool} exited 0"
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
        detail = f" ({self.scrub(tail[0])[:200]})" if tail[0] else ""
        return f"agent {tool} exited {result.exit_code}{detail}"


def agent_run(argv: Sequence[str], prompt: str, mode: str) -> AgentRun:
    """The recordable form of the agent run with ``argv`` (as the executor ran it)."""
    shown: list[str] = []
    secrets: list[str] = []
    for index, word in enumerate(argv):
        if index == 0:
            shown.append(Path(word).name)
        elif prompt and prompt in word:
            shown.append(word.replace(prompt, "{prompt}"))
        elif "fsm-prompt-" in word:
            shown.append("{prompt_file}")
        elif word == mode or word in _PUBLIC or (word.startswith("-") and "=" not in word):
            shown.append(word)
        elif word.startswith("-"):
            name, value = word.split("=", 1)
            shown.append(f"{name}=***")
            secrets.append(value)
        else:
            shown.append("***")
            secrets.append(word)
    kept = sorted({s for s in secrets if len(s) >= _SECRET_MIN}, key=len, reverse=True)
    return AgentRun(" ".join(shown), tuple(kept))
