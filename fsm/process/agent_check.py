"""Whether an agent CLI accepts the invocation fsm gives it, asked of the CLI itself offline.

fsm never sends a request to check an agent: it runs ``PROGRAM --version`` and the ``--help`` of
the (sub)command it invokes (``codex exec --help``), and checks that every option of the argv
appears in that help and that an option's value is one of the choices the help lists for it
(clap's ``[possible values: ...]``, commander's ``(choices: ...)``, yargs' ``[choices: ...]``).
What the two calls print is cached per program file (its real path, size and modification time:
an upgrade is a new entry) in fsm's cache folder (:mod:`fsm.base.cache`), so a run pays them once
per installed version, not once per run.

Used by ``fsm agents`` (every known and configured agent) and by the run preflight, through
:meth:`fsm.process.executor.SubprocessExecutor.agent_problem`. A command whose program is not one of
the CLIs fsm knows (a wrapper script, a stand-in) is not checked: its help has no known shape.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsm.base import cache
from fsm.process.agents import KNOWN, AgentMode, KnownAgent, Version, parse_version, shown_version

__all__ = [
    "AgentStatus",
    "Configured",
    "Invocation",
    "Probe",
    "check_invocation",
    "help_command",
    "inspect_agent",
    "known_program",
    "parse_help",
    "probe",
    "version_of",
]

PROBE_TIMEOUT = 30.0
"""Seconds a ``--version`` or ``--help`` call may take (a node CLI starts in one or two)."""
_CACHE_KIND = "agent-probes"
_PLACEHOLDER = re.compile(r"^\{(prompt|prompt_file|mode)\}$")
_NAME = re.compile(r"^--?[A-Za-z0-9][\w-]*$")
_CHOICES = re.compile(r"(?:choices|possible values):\s*([^\])]*)", re.IGNORECASE)
_QUOTED = re.compile(r'"([^"]*)"')
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPTION_INDENT = 8


@dataclass(frozen=True)
class Probe:
    """What a program printed for one set of arguments (``exit_code`` None: it did not run)."""

    exit_code: int | None
    output: str


@dataclass(frozen=True)
class Invocation:
    """The verdict on one argv template: ``problem`` is None when the CLI accepts it, the one
    line saying what it refuses otherwise; ``unchecked`` says why it could not be checked."""

    mode: AgentMode
    argv: tuple[str, ...]
    problem: str | None = None
    unchecked: str | None = None


def known_program(argv: Sequence[str]) -> tuple[int, KnownAgent] | None:
    """Where in ``argv`` a CLI fsm knows starts (after ``env`` and ``NAME=value`` items), and
    which one; None when the command runs something else."""
    index = 0
    if argv and os.path.basename(argv[0]) == "env":
        index = 1
        while index < len(argv) and _ASSIGNMENT.match(argv[index]):
            index += 1
    if index >= len(argv):
        return None
    name = os.path.basename(argv[index])
    agent = next((a for a in KNOWN.values() if a.program == name), None)
    return (index, agent) if agent is not None else None


def help_command(argv: Sequence[str]) -> tuple[str, ...]:
    """The words of ``argv`` that name the (sub)command: the program and the plain words right
    after it (``codex exec``), before the first option or placeholder."""
    words = [argv[0]]
    for part in argv[1:]:
        if (
            part.startswith("-")
            or _PLACEHOLDER.match(part)
            or not re.fullmatch(r"[a-z][\w-]*", part)
        ):
            break
        words.append(part)
    return tuple(words)


def parse_help(text: str) -> dict[str, frozenset[str] | None]:
    """The options a ``--help`` text lists, each with the choices it lists for its value (None
    when it lists none)."""
    options: dict[str, frozenset[str] | None] = {}
    block_names: list[str] = []
    block: list[str] = []

    def close() -> None:
        found = _CHOICES.search(" ".join(block))
        choices = None
        if found is not None:
            listed = found.group(1)
            quoted = _QUOTED.findall(listed)
            items = quoted or [item.strip() for item in listed.split(",")]
            choices = frozenset(item for item in items if item)
        for name in block_names:
            options.setdefault(name, choices)

    for line in text.splitlines():
        stripped = line.strip()
        # options start near the margin; a description's wrapped line that happens to begin
        # with an option name is indented further
        if stripped.startswith("-") and len(line) - len(line.lstrip()) <= _OPTION_INDENT:
            close()
            head = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
            words = re.split(r"[\s,|=]+", re.sub(r"<[^>]*>|\[[^\]]*\]", " ", head))
            block_names = [w for w in words if _NAME.match(w)]
            block = [stripped[len(head) :]]
        elif stripped and block_names:
            block.append(stripped)
        elif not stripped and block_names and _CHOICES.search(" ".join(block)):
            close()
            block_names, block = [], []
    close()
    return options


def check_invocation(
    agent: KnownAgent,
    version: Version | None,
    argv: Sequence[str],
    helps: dict[str, str],
    unlisted: frozenset[str] = frozenset(),
) -> str | None:
    """The one line saying which option of ``argv`` (a template, from the known program on)
    the CLI's help refuses, naming the option and the version; None when it accepts them all.
    ``helps`` maps each help command (``"codex exec"``) to its text; ``unlisted`` are options
    known to be accepted though the help does not list them."""
    words = help_command(argv)
    options = parse_help(helps[" ".join(words)])
    who = f"{agent.name} {shown_version(version)}" if version else agent.name
    where = f"`{' '.join(words)} --help`"
    rest = list(argv[len(words) :])
    index = 0
    while index < len(rest):
        part = rest[index]
        index += 1
        if part == "--":
            break
        if not part.startswith("-") or part == "-" or _PLACEHOLDER.match(part):
            continue
        name, has_value, value = part.partition("=")
        if name not in options:
            if name in unlisted:
                continue
            return f"{who} has no option '{name}' (not in {where})"
        choices = options[name]
        if choices is None:
            continue
        if not has_value:
            if index >= len(rest) or rest[index].startswith("-"):
                continue
            value = rest[index]
            index += 1
        if not _PLACEHOLDER.match(value) and value not in choices:
            listed = ", ".join(sorted(choices))
            return f"{who} refuses '{name} {value}' (its choices: {listed})"
    return None


def probe(program: str, args: Sequence[str]) -> Probe:
    """``program args`` run without input, from the cache when the program file is unchanged."""
    try:
        real = os.path.realpath(program)
        info = os.stat(real)
    except OSError as exc:
        return Probe(None, f"cannot read {program}: {exc.strerror or exc}")
    name = cache.digest(real, str(info.st_size), str(info.st_mtime_ns), *args)
    key = (name,)
    found = _MEMO.get(key)
    if found is not None:
        return found
    stored = cache.read(_CACHE_KIND, name)
    if stored is not None:
        try:
            data = json.loads(stored)
            found = Probe(data["exit_code"], data["output"])
        except (ValueError, KeyError, TypeError):
            found = None
    if found is None:
        found = _run(program, args)
        if found.exit_code is not None:
            payload = {"exit_code": found.exit_code, "output": found.output}
            cache.write(_CACHE_KIND, name, json.dumps(payload).encode("utf-8"))
    _MEMO[key] = found
    return found


_MEMO: dict[tuple[str, ...], Probe] = {}


def _run(program: str, args: Sequence[str]) -> Probe:
    import subprocess

    try:
        done = subprocess.run(
            [program, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT,
            cwd=Path.home() if Path.home().is_dir() else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Probe(None, f"`{program} {' '.join(args)}` did not answer in {PROBE_TIMEOUT:g}s")
    except OSError as exc:
        return Probe(None, f"cannot run {program}: {exc.strerror or exc}")
    return Probe(done.returncode, done.stdout + done.stderr)


def version_of(program: str) -> tuple[Version | None, Probe]:
    """The version ``program --version`` prints, and the probe it came from."""
    answer = probe(program, ("--version",))
    version = parse_version(answer.output) if answer.exit_code == 0 else None
    return version, answer


def check_template(
    agent: KnownAgent,
    program: str,
    version: Version | None,
    mode: AgentMode,
    argv: Sequence[str],
    unlisted: frozenset[str] = frozenset(),
) -> Invocation:
    """Whether the CLI at ``program`` accepts ``argv`` (a template starting at the known
    program)."""
    words = help_command(argv)
    answer = probe(program, (*words[1:], "--help"))
    if answer.exit_code != 0 or not parse_help(answer.output):
        why = answer.output.strip().splitlines()[-1:] or ["no output"]
        return Invocation(
            mode, tuple(argv), unchecked=f"`{' '.join(words)} --help` failed: {why[0][:160]}"
        )
    problem = check_invocation(agent, version, argv, {" ".join(words): answer.output}, unlisted)
    return Invocation(mode, tuple(argv), problem=problem)


@dataclass(frozen=True)
class AgentStatus:
    """What ``fsm agents`` says about one agent, and what the preflight refuses."""

    name: str
    origin: str
    """``built-in`` (a CLI fsm knows, found on PATH) or ``fsm.toml`` (an ``[agent.NAME]``)."""
    program: str
    path: str | None
    version: str | None = None
    output: str = "text"
    invocations: tuple[Invocation, ...] = ()
    warning: str | None = None
    problem: str | None = None
    """Why fsm cannot run this agent (its program is missing, or it refuses an option)."""

    @property
    def checked(self) -> bool:
        """True when every invocation was checked against the CLI's help."""
        return bool(self.invocations) and all(i.unchecked is None for i in self.invocations)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (``fsm agents --json``)."""
        return {
            "name": self.name,
            "origin": self.origin,
            "program": self.program,
            "path": self.path,
            "version": self.version,
            "output": self.output,
            "accepted": None if not self.invocations else self.problem is None,
            "invocations": {
                i.mode: {"argv": list(i.argv), "problem": i.problem, "unchecked": i.unchecked}
                for i in self.invocations
            },
            "warning": self.warning,
            "problem": self.problem,
        }


Configured = tuple[tuple[str, ...], tuple[str, ...] | None, str]
"""An ``[agent.NAME]`` table: its command, analysis command and output format."""


def inspect_agent(
    name: str, configured: Configured | None, resolve: Callable[[str], str | None]
) -> AgentStatus:
    """The status of agent ``name``: configured in fsm.toml (``configured``) or a CLI fsm knows.
    ``resolve`` finds a program (a name on PATH, or a path) and returns where it is."""
    if configured is not None:
        return _inspect_configured(name, configured, resolve)
    known = KNOWN.get(name)
    if known is None:
        listed = ", ".join(sorted(KNOWN))
        return AgentStatus(
            name,
            "none",
            name,
            None,
            problem=(
                f"fsm.toml has no [agent.{name}] table and '{name}' is not an agent CLI fsm "
                f"knows ({listed}): add [agent.{name}] command = [...] to fsm.toml"
            ),
        )
    path = resolve(known.program)
    if path is None:
        return AgentStatus(
            name,
            "built-in",
            known.program,
            None,
            output=known.newest.output,
            problem=(
                f"'{known.program}' is not on PATH and fsm.toml has no [agent.{name}] table: "
                f"install it (npm install -g {known.package}) or add [agent.{name}] "
                "command = [...] to fsm.toml"
            ),
        )
    version, _ = version_of(path)
    profile, warning = known.profile_for(version)
    invocations = tuple(
        check_template(known, path, version, mode, profile.template(mode), profile.unlisted)
        for mode in ("analysis", "write")
    )
    refused = next((i for i in invocations if i.problem), None)
    problem = None
    if refused is not None:
        problem = (
            f"{refused.problem}, which fsm's {refused.mode} invocation passes: install a "
            f"version fsm knows (npm install -g {known.package}@{shown_version(known.tested)}) "
            f"or set [agent.{name}] command = [...] in fsm.toml"
        )
    return AgentStatus(
        name,
        "built-in",
        known.program,
        path,
        shown_version(version) if version else None,
        profile.output,
        invocations,
        warning,
        problem,
    )


def _inspect_configured(
    name: str, configured: Configured, resolve: Callable[[str], str | None]
) -> AgentStatus:
    command, analysis, output = configured
    templates: list[tuple[AgentMode, tuple[str, ...]]] = [("write", command)]
    if analysis is not None:
        templates.insert(0, ("analysis", analysis))
    for _, template in templates:
        if resolve(template[0]) is None:
            return AgentStatus(
                name,
                "fsm.toml",
                template[0],
                None,
                output=output,
                problem=(
                    f"[agent.{name}] in fsm.toml runs '{template[0]}', which is not installed "
                    "or not on PATH: install it or correct the command in fsm.toml"
                ),
            )
    path = resolve(command[0])
    found = known_program(command)
    if found is None:
        return AgentStatus(name, "fsm.toml", command[0], path, output=output)
    start, known = found
    program = resolve(command[start])
    if program is None:
        return AgentStatus(
            name,
            "fsm.toml",
            command[start],
            None,
            output=output,
            problem=(
                f"[agent.{name}] in fsm.toml runs '{command[start]}', which is not installed "
                "or not on PATH: install it or correct the command in fsm.toml"
            ),
        )
    version, _ = version_of(program)
    invocations = tuple(
        check_template(known, program, version, mode, template[start:])
        for mode, template in templates
    )
    refused = next((i for i in invocations if i.problem), None)
    problem = None
    if refused is not None:
        key = "analysis_command" if refused.mode == "analysis" else "command"
        problem = f"{refused.problem}: correct {key} of [agent.{name}] in fsm.toml"
    return AgentStatus(
        name,
        "fsm.toml",
        command[start],
        program,
        shown_version(version) if version else None,
        output,
        invocations,
        None,
        problem,
    )
