"""The agent CLIs fsm knows, and how each version of them is invoked.

For each CLI (codex, claude, gemini, qwen) :data:`KNOWN` holds its invocation *profiles*, oldest
first: from which version on a profile applies, the argv of an ``analysis`` task (read-only) and
of a ``write`` task (edits in the workspace only), and the structured output that argv asks for
(see :mod:`fsm.process.agent_output`). fsm reads the installed version with ``PROGRAM --version``
and uses the newest profile whose ``since`` is not above it. Flags change between releases (codex
dropped ``exec --full-auto`` in 0.147; gemini's ``plan`` mode needs a setting before 0.37 and
headless gemini ignores approval modes in an untrusted folder from 0.41 unless given
``--skip-trust``), so a version outside the range these profiles were checked against is never run
silently: a newer one gets the newest profile and a warning line, an older one the oldest and a
warning line, and :mod:`fsm.process.agent_check` compares the flags with the CLI's own ``--help``.

``tested`` is the version each CLI's invocations were last checked against with its real argument
parser (``scripts/agent-clis.sh`` installs exactly these; ``docs/agents.md`` tells how each
profile boundary was found).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "KNOWN",
    "OUTPUT_FORMATS",
    "AgentMode",
    "KnownAgent",
    "OutputFormat",
    "Profile",
    "Version",
    "parse_version",
    "shown_version",
]

AgentMode = Literal["analysis", "write"]
OutputFormat = Literal["text", "codex-json", "claude-stream-json", "gemini-stream-json"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = (
    "text",
    "codex-json",
    "claude-stream-json",
    "gemini-stream-json",
)
"""What an agent prints: free text, or one of the JSON event streams fsm reads (qwen's
``stream-json`` has claude's shape)."""

Version = tuple[int, ...]

_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> Version | None:
    """The first ``MAJOR.MINOR[.PATCH]`` in ``text`` (what ``--version`` printed), or None."""
    found = _VERSION.search(text)
    if found is None:
        return None
    return tuple(int(part) for part in found.groups() if part is not None)


def shown_version(version: Version) -> str:
    """``(0, 169, 0)`` -> ``"0.169.0"``."""
    return ".".join(map(str, version))


@dataclass(frozen=True)
class Profile:
    """How one range of a CLI's versions is invoked (from ``since`` up to the next profile)."""

    since: Version
    analysis: tuple[str, ...]
    write: tuple[str, ...]
    output: OutputFormat = "text"
    unlisted: frozenset[str] = frozenset()
    """Options these versions accept though their ``--help`` does not list them (checked by
    running them without credentials, where they stop after parsing the argv)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables these versions need to run unattended (added to fsm's own)."""

    def template(self, mode: AgentMode) -> tuple[str, ...]:
        """The argv template for ``mode``."""
        return self.analysis if mode == "analysis" else self.write


@dataclass(frozen=True)
class KnownAgent:
    """An agent CLI fsm knows: its program, where it comes from, and its profiles."""

    name: str
    program: str
    package: str
    """The npm package it is installed from."""
    tested: Version
    """The newest version its invocation was checked against with the real parser."""
    profiles: tuple[Profile, ...]
    """Oldest first."""

    @property
    def newest(self) -> Profile:
        """The profile of the newest versions."""
        return self.profiles[-1]

    def profile_for(self, version: Version | None) -> tuple[Profile, str | None]:
        """The profile for ``version`` (None: it could not be read) and the warning line to
        show with it, None when the version is within the range fsm was checked against."""
        newest = self.newest
        tested = shown_version(self.tested)
        if version is None:
            return newest, (
                f"could not read the version of {self.name} ({self.program} --version): "
                f"using the invocation for {tested}"
            )
        if version > self.tested:
            return newest, (
                f"{self.name} {shown_version(version)} is newer than the newest version fsm "
                f"was checked against ({tested}): using the invocation for {tested}; "
                "`fsm agents` tells whether it still accepts it"
            )
        chosen = [p for p in self.profiles if p.since <= version]
        if not chosen:
            oldest = self.profiles[0]
            return oldest, (
                f"{self.name} {shown_version(version)} is older than any version fsm knows "
                f"(from {shown_version(oldest.since)}): using the oldest invocation; "
                f"upgrade it (npm install -g {self.package})"
            )
        return chosen[-1], None


def _codex() -> KnownAgent:
    # --sandbox chooses what the agent may touch; exec never asks for approval. Outside a git
    # folder codex exec refuses to run without --skip-git-repo-check.
    read, write = ("--sandbox", "read-only"), ("--sandbox", "workspace-write")
    base = ("codex", "exec")
    unattended = ("--skip-git-repo-check",)
    return KnownAgent(
        name="codex",
        program="codex",
        package="@openai/codex",
        tested=(0, 169, 0),
        profiles=(
            # before 0.44 --json printed an older event shape: read as text
            Profile(
                (0, 1),
                (*base, *read, *unattended, "{prompt}"),
                (*base, *write, *unattended, "{prompt}"),
            ),
            Profile(
                (0, 44),
                (*base, *read, *unattended, "--json", "{prompt}"),
                (*base, *write, *unattended, "--json", "{prompt}"),
                "codex-json",
            ),
        ),
    )


CLAUDE_PERMISSION_MODE: Version = (1, 0, 53)
"""The first claude release with ``--permission-mode`` (1.0.51 has none; 1.0.52 was not
published)."""


def _claude() -> KnownAgent:
    # stream-json with -p needs --verbose; it carries the edits (tool calls) the single json
    # result leaves out
    stream = ("--output-format", "stream-json", "--verbose")
    return KnownAgent(
        name="claude",
        program="claude",
        package="@anthropic-ai/claude-code",
        tested=(2, 1, 332),
        profiles=(
            # Before --permission-mode, -p refuses every tool that needs a permission (read-only
            # analysis); writes name the edit tools it may use.
            Profile(
                (1, 0),
                ("claude", "-p", "{prompt}", *stream),
                ("claude", "-p", "{prompt}", "--allowedTools", "Edit,MultiEdit,Write", *stream),
                "claude-stream-json",
            ),
            Profile(
                CLAUDE_PERMISSION_MODE,
                ("claude", "-p", "{prompt}", "--permission-mode", "plan", *stream),
                ("claude", "-p", "{prompt}", "--permission-mode", "acceptEdits", *stream),
                "claude-stream-json",
            ),
        ),
    )


def _gemini() -> KnownAgent:
    stream = ("-o", "stream-json")
    edits = ("--approval-mode", "auto_edit")
    plan = ("--approval-mode", "plan")
    # Headless, gemini leaves out the tools that need approval in its default mode: before
    # 'plan' existed (usable without a setting from 0.37) that was its read-only analysis.
    # Releases before --skip-trust (0.41) already turn the approval mode back to 'default' in a
    # folder the user never trusted (0.40 does; 0.30 does not); they read the variable the flag
    # sets later.
    trust = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
    return KnownAgent(
        name="gemini",
        program="gemini",
        package="@google/gemini-cli",
        tested=(0, 61, 0),
        profiles=(
            Profile((0, 1), ("gemini", "-p", "{prompt}"), ("gemini", *edits, "-p", "{prompt}")),
            Profile(
                (0, 11),
                ("gemini", *stream, "-p", "{prompt}"),
                ("gemini", *edits, *stream, "-p", "{prompt}"),
                "gemini-stream-json",
                env=trust,
            ),
            Profile(
                (0, 37),
                ("gemini", *plan, *stream, "-p", "{prompt}"),
                ("gemini", *edits, *stream, "-p", "{prompt}"),
                "gemini-stream-json",
                env=trust,
            ),
            # From 0.41 an untrusted folder turns any approval mode back to 'default' headless
            Profile(
                (0, 41),
                ("gemini", "--skip-trust", *plan, *stream, "-p", "{prompt}"),
                ("gemini", "--skip-trust", *edits, *stream, "-p", "{prompt}"),
                "gemini-stream-json",
            ),
        ),
    )


def _qwen() -> KnownAgent:
    # The prompt is positional (-p is deprecated); approval modes are spelled with a hyphen.
    plan, edits = ("--approval-mode", "plan"), ("--approval-mode", "auto-edit")
    stream = ("-o", "stream-json")
    return KnownAgent(
        name="qwen",
        program="qwen",
        package="@qwen-code/qwen-code",
        tested=(0, 24, 4),
        profiles=(
            Profile((0, 1), ("qwen", *plan, "{prompt}"), ("qwen", *edits, "{prompt}")),
            Profile(
                (0, 5),
                ("qwen", *plan, *stream, "{prompt}"),
                ("qwen", *edits, *stream, "{prompt}"),
                "claude-stream-json",
            ),
            # 0.21 and 0.22 accept --approval-mode but leave it out of their --help
            Profile(
                (0, 21),
                ("qwen", *plan, *stream, "{prompt}"),
                ("qwen", *edits, *stream, "{prompt}"),
                "claude-stream-json",
                frozenset({"--approval-mode"}),
            ),
            Profile(
                (0, 23),
                ("qwen", *plan, *stream, "{prompt}"),
                ("qwen", *edits, *stream, "{prompt}"),
                "claude-stream-json",
            ),
        ),
    )


KNOWN: Mapping[str, KnownAgent] = {a.name: a for a in (_claude(), _codex(), _gemini(), _qwen())}
"""The agent CLIs fsm runs without an ``[agent.NAME]`` table when found on ``PATH``."""
