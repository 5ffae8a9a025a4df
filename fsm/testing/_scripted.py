"""The scripted executor: stand-in agents and commands that answer by pattern, and record calls."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from fsm.process.agents import OutputFormat
from fsm.process.executor import AgentMode, ExecResult, Executor, agent_problem, read_agent_result

__all__ = ["Answer", "Call", "Matcher", "Reply", "ScriptedExecutor"]

CallKind = Literal["shell", "run", "agent"]


@dataclass(frozen=True)
class Call:
    """One call an action made through the executor.

    ``kind`` is how it was made: ``agent`` (``tool`` is the agent, ``mode`` its mode, ``text``
    the prompt), ``shell`` (``text`` is the command, ``tool`` the shell) or ``run`` (``argv``
    the program and its arguments, ``text`` the same as one shell-quoted line, ``tool`` the
    program). ``cwd`` is the folder it ran in; ``result`` is what it answered (set on the
    calls :attr:`ScriptedExecutor.calls` records, None while a reply is being made).
    """

    kind: CallKind
    tool: str
    text: str
    cwd: Path
    argv: tuple[str, ...] = ()
    mode: AgentMode | None = None
    result: ExecResult | None = None
    scripted: bool = True
    """False for a call no rule matched, passed to the fallback executor (or refused)."""


@dataclass(frozen=True)
class Reply:
    """What a scripted agent or command answers: an exit code and its output.

    ``output`` is the format an agent's ``stdout`` is in (``codex-json`` and the other formats
    of :mod:`fsm.process.agent_output`): its result is read as the real executor reads a configured
    agent's, its ``stdout`` becoming the final message and its ``report`` what the events say.
    """

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    output: OutputFormat = "text"


Answer = Reply | Callable[[Call], "Reply | None"]
"""A reply, or a function of the call that makes one (and may edit the workspace first, as an
agent would); a function returning None answers ``Reply()`` (exit 0, no output)."""

Matcher = str | re.Pattern[str] | Callable[[str], bool] | None
"""Which calls a rule answers, tested on the call's ``text`` (prompt, command or argv line): a
regular expression searched in it, a predicate, or None for every call."""


@dataclass
class _Rule:
    kind: CallKind
    tool: str | None
    match: Matcher
    answers: Sequence[Answer]
    used: int = 0

    def matches(self, call: Call) -> bool:
        if self.kind != call.kind or (self.tool is not None and self.tool != call.tool):
            return False
        if self.match is None:
            return True
        if isinstance(self.match, str | re.Pattern):
            return re.search(self.match, call.text) is not None
        return self.match(call.text)

    def answer(self, call: Call) -> Reply:
        answer = self.answers[min(self.used, len(self.answers) - 1)]
        self.used += 1
        reply = answer(call) if callable(answer) else answer
        return Reply() if reply is None else reply


@dataclass
class ScriptedExecutor:
    """An :class:`~fsm.process.executor.Executor` whose agents and commands are scripted by pattern.

    Rules are added with :meth:`on_agent`, :meth:`on_shell` and :meth:`on_run`; each answers
    the calls it matches with its replies in turn (the last one repeats). When several rules
    match a call, the one added last answers, so a test can add a general rule and then the
    exceptions. A call no rule matches goes to ``fallback`` (a real
    :class:`~fsm.process.executor.SubprocessExecutor` runs the test suite an action starts, say) or,
    without one, fails with an ``error`` naming it. Every call is recorded in :attr:`calls`::

        executor = ScriptedExecutor()
        executor.on_agent("reviewer", Reply(stdout="APPROVE"))
        executor.on_agent("reviewer", Reply(stdout="CHANGES: no tests"), match=r"b\\.py")
        executor.on_shell(Reply(exit_code=1, stderr="E501"), match=r"^ruff ")

    ``has_agent`` is true for a scripted agent, ``has_program`` for a name in ``programs``;
    others are asked of the fallback (false without one).
    """

    fallback: Executor | None = None
    workspace: Path | None = None
    """The folder calls run in unless they name one (the harness sets its workspace)."""
    programs: set[str] = field(default_factory=set)
    calls: list[Call] = field(default_factory=list)
    _rules: list[_Rule] = field(default_factory=list, repr=False)

    def on_agent(
        self, tool: str | None = None, *answers: Answer, match: Matcher = None
    ) -> ScriptedExecutor:
        """Answer calls of agent ``tool`` (any agent when None) whose prompt matches."""
        return self._add("agent", tool, match, answers)

    def on_shell(self, *answers: Answer, match: Matcher = None) -> ScriptedExecutor:
        """Answer shell commands that match."""
        return self._add("shell", None, match, answers)

    def on_run(
        self, *answers: Answer, match: Matcher = None, program: str | None = None
    ) -> ScriptedExecutor:
        """Answer programs run without a shell (``program`` is the argv's first item)."""
        return self._add("run", program, match, answers)

    def prompts(self, tool: str | None = None) -> list[str]:
        """The prompts agent ``tool`` (every agent when None) was given, in order."""
        return [c.text for c in self.calls if c.kind == "agent" and tool in (None, c.tool)]

    def shell(
        self,
        command: str,
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Answer a shell command, or pass it on to the fallback."""
        call = Call("shell", "bash", command, self._cwd(cwd), ("bash", "-c", command))
        return self._answer(
            call,
            lambda fallback: fallback.shell(command, cwd=cwd, timeout=timeout, env=env),
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Answer a program run without a shell, or pass it on to the fallback."""
        args = tuple(argv)
        call = Call("run", args[0] if args else "", shlex.join(args), self._cwd(cwd), args)
        return self._answer(
            call, lambda fallback: fallback.run(args, cwd=cwd, timeout=timeout, env=env)
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
        """Answer an agent call, or pass it on to the fallback."""
        call = Call("agent", tool, prompt, self._cwd(cwd), (tool,), mode)
        return self._answer(
            call,
            lambda fallback: fallback.agent(tool, prompt, mode=mode, cwd=cwd, timeout=timeout),
        )

    def has_agent(self, tool: str) -> bool:
        """True for a scripted agent, else what the fallback says."""
        if any(r.kind == "agent" and r.tool in (None, tool) for r in self._rules):
            return True
        return self.fallback is not None and self.fallback.has_agent(tool)

    def agent_problem(self, tool: str) -> str | None:
        """None for a scripted agent, else what the fallback says (see
        :func:`fsm.process.executor.agent_problem`)."""
        if any(r.kind == "agent" and r.tool in (None, tool) for r in self._rules):
            return None
        if self.fallback is not None:
            return agent_problem(self.fallback, tool)
        return f"add [agent.{tool}] command = [...] to fsm.toml or put {tool} on PATH"

    def has_program(self, program: str) -> bool:
        """True for a name in ``programs``, else what the fallback says."""
        if program in self.programs:
            return True
        return self.fallback is not None and self.fallback.has_program(program)

    def _add(
        self, kind: CallKind, tool: str | None, match: Matcher, answers: Sequence[Answer]
    ) -> ScriptedExecutor:
        self._rules.append(_Rule(kind, tool, match, answers or (Reply(),)))
        return self

    def _cwd(self, cwd: Path | None) -> Path:
        return Path(cwd or self.workspace or Path.cwd())

    def _answer(self, call: Call, passed_on: Callable[[Executor], ExecResult]) -> ExecResult:
        rule = next((r for r in reversed(self._rules) if r.matches(call)), None)
        if rule is not None:
            reply = rule.answer(call)
            result = ExecResult(
                call.argv,
                None if reply.timed_out else reply.exit_code,
                reply.stdout,
                reply.stderr,
                timed_out=reply.timed_out,
            )
            if call.kind == "agent":
                result = read_agent_result(result, reply.output)
        elif self.fallback is not None:
            result = passed_on(self.fallback)
        else:
            what = f"agent {call.tool}" if call.kind == "agent" else f"{call.kind} command"
            first = (call.text.splitlines() or [""])[0][:120]
            result = ExecResult(call.argv, None, error=f"not scripted: {what}: {first}")
        self.calls.append(replace(call, result=result, scripted=rule is not None))
        return result
