"""Executors: run a shell command or an agent CLI in the workspace, never raising for failure.

Every run has a timeout that kills the whole process group (the command's children too), captures
stdout and stderr, and returns an :class:`ExecResult`. A program that cannot be found or started
is a failed result with a clear ``error``, not an exception: an action decides what a failure
means for its machine. Standard input is closed (``/dev/null``): an agent waiting for input
would wait until its timeout.

Agent commands come from ``fsm.toml``::

    [agent.codex]
    command = ["codex", "exec", "--sandbox", "workspace-write", "--skip-git-repo-check",
               "--json", "{prompt}"]
    analysis_command = ["codex", "exec", "--sandbox", "read-only", "--skip-git-repo-check",
                        "--json", "{prompt}"]
    output = "codex-json"

``{prompt}`` is replaced by the prompt as one argument (no shell is involved), ``{prompt_file}``
by the path of a temporary file holding the prompt (for prompts too long for one argument, over
100 kB, which are refused otherwise), and ``{mode}`` by the task's mode. ``command`` is used
for ``write`` tasks, and for ``analysis`` tasks unless an ``analysis_command`` is given.
``output`` says what the agent prints (``text`` unless given; see :mod:`fsm.process.agent_output`):
in a JSON format, the result's ``stdout`` is the agent's final message and its ``report`` holds what
the events say (files changed, exit reason, tokens, cost). Without a table, a known agent CLI found
on ``PATH`` runs in the non-interactive invocation of its version (see :mod:`fsm.process.agents`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from fsm.process import orphans
from fsm.process.agent_output import AgentReport, error_line, read_output
from fsm.process.agents import KNOWN, AgentMode, OutputFormat, shown_version
from fsm.process.redaction import redacted_command, scrubbed, secret_environment

if TYPE_CHECKING:
    from fsm.process.agent_check import AgentStatus

# subprocess, shutil, signal and tempfile are imported where commands run: commands that run
# none (fsm status, fsm ls) start faster without them.

__all__ = [
    "KNOWN_AGENTS",
    "STORE_VARIABLES",
    "AgentCommand",
    "AgentMode",
    "ChecksAgents",
    "ExecResult",
    "Executor",
    "RecordsCommands",
    "SubprocessExecutor",
    "agent_problem",
    "read_agent_result",
    "task_environment",
]

KNOWN_AGENTS: Mapping[str, Mapping[AgentMode, tuple[str, ...]]] = {
    name: {"analysis": agent.newest.analysis, "write": agent.newest.write}
    for name, agent in KNOWN.items()
}
"""Non-interactive invocations of the current versions of the agent CLIs fsm knows, used when
fsm.toml has no table (older versions get their own: :data:`fsm.process.agents.KNOWN`)."""

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
    report: AgentReport | None = None
    """What an agent's output says about its run (agent runs only; see
    :mod:`fsm.process.agent_output`)."""
    timeout: float | None = None
    """The time limit that was reached (set when ``timed_out``)."""
    leftovers: int = 0
    """Background processes of the command still running after it exited, killed by fsm."""

    @property
    def ok(self) -> bool:
        """True when the command ran to the end and exited 0 (and, for an agent whose events
        say how its run ended, they do not say it failed)."""
        failed = self.report is not None and self.report.failed
        return self.error is None and not self.timed_out and self.exit_code == 0 and not failed

    def describe(self) -> str:
        """One line saying how the run ended; a failure names the line that says why (the
        agent's own error, or the first output line that reads as an error, else the last)."""
        shown = _show(self.argv)
        if self.error is not None:
            return self.error
        if self.timed_out:
            limit = f" (limit {self.timeout:g}s)" if self.timeout is not None else ""
            return f"timed out after {self.duration_ms / 1000:.1f}s{limit}: {shown}"
        reason = self.report.exit_reason if self.report and self.report.failed else None
        if self.exit_code == 0 and reason is None:
            return f"exited 0: {shown}"
        line = reason or error_line(self.stderr, self.stdout)
        detail = f" ({line[:200]})" if line else ""
        return f"exited {self.exit_code}: {shown}{detail}"


@dataclass(frozen=True)
class AgentCommand:
    """How to invoke one agent tool (a table ``[agent.<tool>]`` of fsm.toml)."""

    command: tuple[str, ...]
    analysis_command: tuple[str, ...] | None = None
    output: OutputFormat = "text"
    """What the agent prints (see :mod:`fsm.process.agent_output`)."""
    version: str | None = None
    """The version of a known CLI whose invocation this is (built-in commands only)."""
    warning: str | None = None
    """Why this invocation may not fit the installed version (built-in commands only)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables the agent needs besides fsm's (built-in commands only)."""

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
class ChecksAgents(Protocol):
    """An executor that can say why an agent cannot run (optional; see :func:`agent_problem`)."""

    def agent_problem(self, tool: str) -> str | None:
        """One line saying why agent ``tool`` cannot run here, None when it can."""
        ...


def agent_problem(executor: Executor, tool: str) -> str | None:
    """Why agent ``tool`` cannot run on ``executor``: its own answer when it can tell (the
    program of its fsm.toml table is missing, the installed CLI refuses an option fsm passes),
    else a general line when :meth:`Executor.has_agent` is false. Machines' preflight hooks use
    it so that a run is refused before it starts for the reason that holds."""
    if isinstance(executor, ChecksAgents):
        return executor.agent_problem(tool)
    if executor.has_agent(tool):
        return None
    return f"add [agent.{tool}] command = [...] to fsm.toml or put {tool} on PATH"


@runtime_checkable
class RecordsCommands(Protocol):
    """An executor that can record the commands it leaves running (optional).

    Each instance asks for its own copy with the folder where its commands are recorded, so
    that the next run of the instance can reap what a killed run left behind (see
    :mod:`fsm.process.orphans`). An executor without this method is used as it is, unrecorded.
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
    """Where running commands are recorded (see :mod:`fsm.process.orphans`); set per instance."""

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
        :mod:`fsm.process.proctree`: children that left its session or hold its output included)."""
        import subprocess

        from fsm.process import proctree

        args = tuple(argv)
        limit = self.default_timeout if timeout is None else timeout
        merged_env = {**task_environment(), **(env or {})}
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
        command = self._agent_command(tool, probe=True)
        if command is None or self._resolve(command.template(mode)[0]) is None:
            return ExecResult(
                (tool,), None, error=f"agent '{tool}' cannot run: {self._missing(tool)}"
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
            result = self.run(
                command.argv(prompt, mode), cwd=cwd, timeout=timeout, env=command.env or None
            )
            return _redacted(_read(result, command), prompt)
        import tempfile

        with tempfile.TemporaryDirectory(prefix="fsm-prompt-") as folder:
            path = Path(folder) / "prompt.md"
            path.write_text(prompt, encoding="utf-8", errors="backslashreplace")
            argv = command.argv(prompt, mode, str(path))
            result = self.run(argv, cwd=cwd, timeout=timeout, env=command.env or None)
        return _redacted(_read(result, command), prompt, str(path))

    def has_agent(self, tool: str) -> bool:
        """True when ``tool`` has a table in fsm.toml or is a known CLI on PATH, and the program
        its command starts can be found (a table naming a program that is not installed does
        not make an agent)."""
        command = self._agent_command(tool, probe=False)
        return command is not None and all(
            self.has_program(template[0])
            for template in (command.command, command.analysis_command)
            if template
        )

    def agent_problem(self, tool: str) -> str | None:
        """Why agent ``tool`` cannot run here (one line), None when it can: its fsm.toml table
        runs a program that is not installed, no table and no known CLI on PATH, or the
        installed CLI's ``--help`` does not accept an option fsm passes (checked offline and
        cached per installed version: :mod:`fsm.process.agent_check`)."""
        return self.agent_status(tool).problem

    def agent_status(self, tool: str) -> AgentStatus:
        """What ``fsm agents`` shows about ``tool`` (see
        :func:`fsm.process.agent_check.inspect_agent`)."""
        from fsm.process.agent_check import inspect_agent

        table = self.agents.get(tool)
        configured = None
        if table is not None:
            configured = (table.command, table.analysis_command, table.output)
        return inspect_agent(tool, configured, self._resolve)

    def has_program(self, program: str) -> bool:
        """True when ``program`` is found on PATH, or is a path (relative to the workspace) of
        an executable file."""
        return self._resolve(program) is not None

    def _resolve(self, program: str) -> str | None:
        """Where ``program`` is: a name looked up on PATH, or a path relative to the workspace
        of an executable file."""
        import shutil

        if os.sep in program:
            path = Path(program) if Path(program).is_absolute() else self.workspace / program
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        return shutil.which(program)

    def _agent_command(self, tool: str, *, probe: bool) -> AgentCommand | None:
        """The command of ``tool``: its fsm.toml table, else the invocation of the known CLI
        found on PATH for its version (read when ``probe``, else the newest)."""
        if tool in self.agents:
            return self.agents[tool]
        known = KNOWN.get(tool)
        if known is None:
            return None
        path = self._resolve(known.program)
        if path is None:
            return None
        if not probe:
            newest = known.newest
            return AgentCommand(newest.write, newest.analysis, newest.output)
        from fsm.process.agent_check import version_of

        version, _ = version_of(path)
        profile, warning = known.profile_for(version)
        shown = shown_version(version) if version else None
        return AgentCommand(
            profile.write, profile.analysis, profile.output, shown, warning, profile.env
        )

    def _missing(self, tool: str) -> str:
        """Why ``tool`` has no command (no table, and no known CLI on PATH)."""
        problem = self.agent_problem(tool)
        return problem or f"add [agent.{tool}] command = [...] to fsm.toml or put {tool} on PATH"


def _read(result: ExecResult, command: AgentCommand) -> ExecResult:
    return read_agent_result(result, command.output, command.version, command.warning)


def read_agent_result(
    result: ExecResult,
    output: OutputFormat,
    version: str | None = None,
    warning: str | None = None,
) -> ExecResult:
    """``result`` of an agent run with the report of what the agent printed in format
    ``output``: for an agent speaking JSON events, ``stdout`` becomes its final message (what
    its text mode would print) when the events hold one, else the lines that were not
    events."""
    report = read_output(output, result.stdout)
    report = replace(report, version=version, warning=warning)
    if report.format == "text" or not report.events:
        return replace(result, report=report)
    stdout = report.final_message if report.final_message is not None else report.text
    return replace(result, stdout=stdout, report=report)


STORE_VARIABLES = re.compile(r"FSM_STORE|PG[A-Z_]*")
"""The variables a task or an agent does not inherit from fsm: ``FSM_STORE`` (a database's
address, password included) and libpq's ``PG*`` (``PGPASSWORD``, ``PGPASSFILE``, ``PGSERVICE``,
the host and user): the store's credentials are fsm's, and a task that prints its environment
(``env``) would write them into its output and the machine's progress files. A task or agent
that needs one is given it explicitly (its own ``env``: what it is given that way is kept)."""


def task_environment() -> dict[str, str]:
    """fsm's environment as a task or an agent inherits it: without the store's credentials
    (:data:`STORE_VARIABLES`)."""
    return {
        name: value for name, value in os.environ.items() if not STORE_VARIABLES.fullmatch(name)
    }


def _redacted(result: ExecResult, prompt: str, prompt_file: str = "") -> ExecResult:
    """``result`` of an agent run with its command shown redacted and the hidden values
    scrubbed from its output (see :mod:`fsm.process.redaction`): the command's arguments come from
    fsm.toml and may hold a token."""
    placeholders = {prompt: "{prompt}"}
    if prompt_file:
        placeholders[prompt_file] = "{prompt_file}"
    argv, hidden = redacted_command(result.argv, placeholders)
    hidden += secret_environment()
    report = result.report
    if report is not None:
        report = replace(
            report,
            final_message=scrubbed(report.final_message, hidden)
            if report.final_message
            else report.final_message,
            exit_reason=scrubbed(report.exit_reason, hidden)
            if report.exit_reason
            else report.exit_reason,
            files_changed=tuple(scrubbed(f, hidden) for f in report.files_changed),
            text=scrubbed(report.text, hidden),
        )
    return replace(
        result,
        argv=argv,
        stdout=scrubbed(result.stdout, hidden),
        stderr=scrubbed(result.stderr, hidden),
        error=scrubbed(result.error, hidden) if result.error else result.error,
        report=report,
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
