"""Executors: run a shell command or an agent CLI in the workspace, never raising for failure.

Every run has a timeout that kills the whole process group (the command's children too), captures
stdout and stderr, and returns an :class:`ExecResult`. A program that cannot be found or started
is a failed result with a clear ``error``, not an exception: an action decides what a failure
means for its machine.

Agent commands come from ``fsm.toml``::

    [agent.codex]
    command = ["codex", "exec", "--full-auto", "{prompt}"]
    analysis_command = ["codex", "exec", "--sandbox", "read-only", "{prompt}"]

``{prompt}`` is replaced by the prompt as one argument (no shell is involved), ``{prompt_file}``
by the path of a temporary file holding the prompt (for prompts too long for one argument, over
100 kB, which are refused otherwise), and ``{mode}`` by the task's mode. ``command`` is used
for ``write`` tasks, and for ``analysis`` tasks unless an ``analysis_command`` is given.
Without a table, a known agent CLI found on ``PATH`` runs in its
documented non-interactive mode (see :data:`KNOWN_AGENTS`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from fsm import orphans
from fsm.redaction import redacted_command, scrubbed

# subprocess, shutil, signal and tempfile are imported where commands run: commands that run
# none (fsm status, fsm ls) start faster without them.

__all__ = [
    "KNOWN_AGENTS",
    "AgentCommand",
    "ExecResult",
    "Executor",
    "RecordsCommands",
    "SubprocessExecutor",
]

AgentMode = Literal["analysis", "write"]

KNOWN_AGENTS: Mapping[str, Mapping[AgentMode, tuple[str, ...]]] = {
    "claude": {
        "analysis": ("claude", "-p", "{prompt}", "--permission-mode", "plan"),
        "write": ("claude", "-p", "{prompt}", "--permission-mode", "acceptEdits"),
    },
    "codex": {
        "analysis": ("codex", "exec", "--sandbox", "read-only", "{prompt}"),
        "write": ("codex", "exec", "--full-auto", "{prompt}"),
    },
    "gemini": {
        "analysis": ("gemini", "-p", "{prompt}"),
        "write": ("gemini", "--approval-mode", "auto_edit", "-p", "{prompt}"),
    },
    "qwen": {
        "analysis": ("qwen", "-p", "{prompt}"),
        "write": ("qwen", "--approval-mode", "auto_edit", "-p", "{prompt}"),
    },
}
"""Non-interactive invocations of the agent CLIs fsm knows, used when fsm.toml has no table."""

_OUTPUT_LIMIT = 1_000_000
_PLACEHOLDER = re.compile(r"\{(prompt|prompt_file|mode)\}")
_ARGUMENT_LIMIT = 100_000
"""Longer prompts do not fit one argv argument on Linux (128 KiB): use ``{prompt_file}``."""


@dataclass(frozen=True)
class ExecResult:
    """What one run of a command produced."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    timed_out: bool = False
    error: str | None = None
    timeout: float | None = None
    """The time limit that was reached (set when ``timed_out``)."""
    leftovers: int = 0
    """Background processes of the command still running after it exited, killed by fsm."""

    @property
    def ok(self) -> bool:
        """True when the command ran to the end and exited 0."""
        return self.error is None and not self.timed_out and self.exit_code == 0

    def describe(self) -> str:
        """One line saying how the run ended."""
        shown = _show(self.argv)
        if self.error is not None:
            return self.error
        if self.timed_out:
            limit = f" (limit {self.timeout:g}s)" if self.timeout is not None else ""
            return f"timed out after {self.duration_ms / 1000:.1f}s{limit}: {shown}"
        if self.exit_code == 0:
            return f"exited 0: {shown}"
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
        detail = f" ({tail[0][:200]})" if tail[0] else ""
        return f"exited {self.exit_code}: {shown}{detail}"


@dataclass(frozen=True)
class AgentCommand:
    """How to invoke one agent tool (a table ``[agent.<tool>]`` of fsm.toml)."""

    command: tuple[str, ...]
    analysis_command: tuple[str, ...] | None = None

    def template(self, mode: AgentMode) -> tuple[str, ...]:
        """The argv template used for ``mode``."""
        if mode == "analysis" and self.analysis_command is not None:
            return self.analysis_command
        return self.command

    def argv(self, prompt: str, mode: AgentMode, prompt_file: str = "") -> tuple[str, ...]:
        """The argv for ``prompt`` in ``mode``, with placeholders replaced."""
        # One pass, so that a prompt containing "{mode}" reaches the agent as written.
        values = {"prompt": prompt, "mode": mode, "prompt_file": prompt_file}
        return tuple(
            _PLACEHOLDER.sub(lambda m: values[m.group(1)], part) for part in self.template(mode)
        )


class Executor(Protocol):
    """Runs commands for actions. The seam tests replace with a scripted double."""

    def shell(
        self,
        command: str,
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` through bash."""
        ...

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` directly, without a shell."""
        ...

    def agent(
        self,
        tool: str,
        prompt: str,
        *,
        mode: AgentMode = "analysis",
        cwd: Path | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run the agent ``tool`` with ``prompt``."""
        ...

    def has_agent(self, tool: str) -> bool:
        """True when ``tool`` is configured or found on PATH, and its program can be found."""
        ...

    def has_program(self, program: str) -> bool:
        """True when ``program`` (a name looked up on PATH, or a path) can be run."""
        ...


@runtime_checkable
class RecordsCommands(Protocol):
    """An executor that can record the commands it leaves running (optional).

    Each instance asks for its own copy with the folder where its commands are recorded, so
    that the next run of the instance can reap what a killed run left behind (see
    :mod:`fsm.orphans`). An executor without this method is used as it is, unrecorded.
    """

    def for_instance(self, running_dir: Path) -> Executor:
        """This executor, recording running commands in ``running_dir``."""
        ...


@dataclass
class SubprocessExecutor:
    """Runs commands as subprocesses of this process, in their own process group."""

    workspace: Path
    agents: Mapping[str, AgentCommand] = field(default_factory=dict)
    default_timeout: float = 600.0
    running_dir: Path | None = None
    """Where running commands are recorded (see :mod:`fsm.orphans`); set per instance."""

    def for_instance(self, running_dir: Path) -> SubprocessExecutor:
        """This executor, recording the commands it runs in ``running_dir``."""
        return replace(self, running_dir=running_dir)

    def shell(
        self,
        command: str,
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` with ``bash -c`` in ``cwd`` (default: the workspace)."""
        import shutil

        bash = shutil.which("bash") or "/bin/sh"
        return self.run([bash, "-c", command], cwd=cwd, timeout=timeout, env=env)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv``; when ``timeout`` seconds pass, kill its whole process tree (see
        :mod:`fsm.proctree`: children that left its session or hold its output included)."""
        import subprocess

        from fsm import proctree

        args = tuple(argv)
        limit = self.default_timeout if timeout is None else timeout
        merged_env = {**os.environ, **env} if env else None
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                cwd=cwd or self.workspace,
                env=merged_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            workdir = cwd or self.workspace
            if not Path(workdir).is_dir():
                return ExecResult(args, None, error=f"working folder not found: {workdir}")
            return ExecResult(args, None, error=f"program not found: {args[0]}")
        except OSError as exc:
            return ExecResult(args, None, error=f"cannot start {args[0]}: {exc.strerror or exc}")
        tree = proctree.ProcessTree(proc.pid)
        marker = None
        try:  # from here on an interrupt takes the command down, even while it is recorded
            if self.running_dir:
                marker = orphans.record(self.running_dir, proc.pid, args, self.workspace)
            collected = proctree.collect(
                proc, tree, limit, on_grow=lambda members: orphans.update(marker, members)
            )
        except BaseException:
            tree.kill()  # interrupted before collect took charge of the command
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            raise
        finally:
            orphans.forget(marker)
        duration = int((time.monotonic() - started) * 1000)
        return ExecResult(
            args,
            None if collected.timed_out else proc.returncode,
            _clip(_text(collected.stdout)),
            _clip(_text(collected.stderr)),
            duration,
            timed_out=collected.timed_out,
            timeout=limit if collected.timed_out else None,
            leftovers=collected.leftovers,
        )

    def agent(
        self,
        tool: str,
        prompt: str,
        *,
        mode: AgentMode = "analysis",
        cwd: Path | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run agent ``tool`` non-interactively with ``prompt`` as one argument."""
        command = self._agent_command(tool)
        if command is None:
            return ExecResult(
                (tool,),
                None,
                error=(
                    f"agent '{tool}' is not configured: add [agent.{tool}] command = [...] "
                    f"to fsm.toml or put '{tool}' on PATH"
                ),
            )
        if not any("{prompt_file}" in part for part in command.template(mode)):
            if len(prompt.encode("utf-8", "replace")) > _ARGUMENT_LIMIT:
                return ExecResult(
                    (tool,),
                    None,
                    error=(
                        f"the prompt for agent '{tool}' is too long for one argument "
                        f"({len(prompt)} characters): use {{prompt_file}} in its fsm.toml command"
                    ),
                )
            result = self.run(command.argv(prompt, mode), cwd=cwd, timeout=timeout)
            return _redacted(result, prompt)
        import tempfile

        with tempfile.TemporaryDirectory(prefix="fsm-prompt-") as folder:
            path = Path(folder) / "prompt.md"
            path.write_text(prompt, encoding="utf-8", errors="backslashreplace")
            result = self.run(command.argv(prompt, mode, str(path)), cwd=cwd, timeout=timeout)
        return _redacted(result, prompt, str(path))

    def has_agent(self, tool: str) -> bool:
        """True when ``tool`` has a table in fsm.toml or is a known CLI on PATH, and the program
        its command starts can be found (a table naming a program that is not installed does
        not make an agent)."""
        command = self._agent_command(tool)
        return command is not None and all(
            self.has_program(template[0])
            for template in (command.command, command.analysis_command)
            if template
        )

    def has_program(self, program: str) -> bool:
        """True when ``program`` is found on PATH, or is a path (relative to the workspace) of
        an executable file."""
        import shutil

        if os.sep in program:
            path = Path(program) if Path(program).is_absolute() else self.workspace / program
            return path.is_file() and os.access(path, os.X_OK)
        return shutil.which(program) is not None

    def _agent_command(self, tool: str) -> AgentCommand | None:
        if tool in self.agents:
            return self.agents[tool]
        known = KNOWN_AGENTS.get(tool)
        import shutil

        if known is None or shutil.which(known["write"][0]) is None:
            return None
        return AgentCommand(known["write"], known["analysis"])


def _redacted(result: ExecResult, prompt: str, prompt_file: str = "") -> ExecResult:
    """``result`` of an agent run with its command shown redacted and the hidden values
    scrubbed from its output (see :mod:`fsm.redaction`): the command's arguments come from
    fsm.toml and may hold a token."""
    placeholders = {prompt: "{prompt}"}
    if prompt_file:
        placeholders[prompt_file] = "{prompt_file}"
    argv, hidden = redacted_command(result.argv, placeholders)
    return replace(
        result,
        argv=argv,
        stdout=scrubbed(result.stdout, hidden),
        stderr=scrubbed(result.stderr, hidden),
        error=scrubbed(result.error, hidden) if result.error else result.error,
    )


def _text(data: bytes) -> str:
    """Output as text: UTF-8 (undecodable bytes replaced), newlines as Python's text mode."""
    text = data.decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _clip(text: str | None) -> str:
    if not text:
        return ""
    if len(text) <= _OUTPUT_LIMIT:
        return text
    return text[:_OUTPUT_LIMIT] + f"\n... [{len(text) - _OUTPUT_LIMIT} characters cut]"


def _show(argv: Sequence[str]) -> str:
    """The command as a person wrote it: a shell command without the shell that ran it (whose
    path differs from machine to machine), at most 120 characters."""
    if len(argv) == 3 and argv[1] == "-c" and os.path.basename(argv[0]) in {"bash", "sh"}:
        shown = argv[2]
    else:
        shown = " ".join(argv)
    return shown if len(shown) <= 120 else shown[:117] + "..."
