"""The agent runs of a step: recorded by the engine into the step's journal record, shown by
``fsm status``, ``fsm history`` and ``fsm serve``.

The engine hands the guards and actions of a step an executor that passes every call on and
keeps, for each agent run, one entry (:func:`run_entry`): the agent, its mode and version, the
command (redacted), how it ended, and what its structured output says (final message, files
changed, exit reason, tokens and cost). The entries go into the step's record as ``agents``
(:func:`fsm.model.records.agent_runs`); a step that ran no agent has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fsm.process.executor import AgentMode, ExecResult, Executor, agent_problem

__all__ = ["AgentRecorder", "run_entry", "run_line"]

MESSAGE_LIMIT = 2000
"""Characters of an agent's final message kept in the journal (the end is cut)."""
FILES_LIMIT = 50


def run_entry(tool: str, mode: str, result: ExecResult) -> dict[str, Any]:
    """The journal entry of one agent run (keys without a value are left out)."""
    entry: dict[str, Any] = {
        "tool": tool,
        "mode": mode,
        "command": " ".join(result.argv),
        "exit_code": result.exit_code,
        "ok": result.ok,
        "duration_ms": result.duration_ms,
    }
    if not result.ok:
        entry["reason"] = result.describe()
    report = result.report
    if report is None:
        return entry
    entry["output"] = report.format
    if report.version:
        entry["version"] = report.version
    if report.warning:
        entry["warning"] = report.warning
    message = report.final_message
    if message:
        cut = len(message) - MESSAGE_LIMIT
        entry["final_message"] = (
            message if cut <= 0 else message[:MESSAGE_LIMIT] + f" [... {cut} characters cut]"
        )
    if report.files_changed:
        entry["files_changed"] = list(report.files_changed[:FILES_LIMIT])
    if report.exit_reason:
        entry["exit_reason"] = report.exit_reason
    if report.usage:
        entry["usage"] = dict(report.usage)
    return entry


def run_line(entry: Mapping[str, Any]) -> str:
    """One line about an agent run entry: who, how it ended, files, tokens and cost, and the
    first line of its final message."""
    tool = entry.get("tool", "?")
    version = f" {entry['version']}" if entry.get("version") else ""
    head = f"agent {tool}{version} ({entry.get('mode', '?')})"
    if entry.get("ok"):
        ended = (
            "completed"
            if entry.get("exit_reason") in (None, "completed")
            else str(entry["exit_reason"])
        )
    else:
        why = entry.get("exit_reason") or entry.get("reason") or f"exit {entry.get('exit_code')}"
        ended = f"failed: {why}"
    parts = [f"{head} {ended}"]
    files = entry.get("files_changed")
    if isinstance(files, list) and files:
        shown = ", ".join(str(f) for f in files[:3]) + (
            f" and {len(files) - 3} more" if len(files) > 3 else ""
        )
        parts.append(f"changed {shown}")
    usage = entry.get("usage")
    if isinstance(usage, Mapping) and usage:
        parts.append(usage_text(usage))
    message = entry.get("final_message")
    if isinstance(message, str) and message.strip():
        first = message.strip().splitlines()[0]
        parts.append(f'"{first[:100]}{"..." if len(first) > 100 else ""}"')
    return "; ".join(parts)


def usage_text(usage: Mapping[str, Any]) -> str:
    """``1200 tokens in (200 cached), 345 out, $0.0123, 3 turns`` from a usage entry."""
    words = []
    if "input_tokens" in usage:
        cached = (
            f" ({usage['cached_input_tokens']} cached)" if usage.get("cached_input_tokens") else ""
        )
        words.append(f"{usage['input_tokens']} tokens in{cached}")
    if "output_tokens" in usage:
        words.append(f"{usage['output_tokens']} out")
    if isinstance(usage.get("cost_usd"), int | float):
        words.append(f"${usage['cost_usd']:.4f}")
    if "turns" in usage:
        words.append(f"{usage['turns']} turns")
    return ", ".join(words)


class AgentRecorder:
    """An executor that passes every call on to ``inner`` and keeps an entry per agent run
    (the engine clears them before a step and writes them into its record)."""

    def __init__(self, inner: Executor, log: Any = None) -> None:
        self.inner = inner
        self.log = log
        self.runs: list[dict[str, Any]] = []

    def clear(self) -> None:
        """Forget the runs kept so far (a new step starts)."""
        self.runs = []

    def shell(
        self,
        command: str,
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` through bash (passed on)."""
        return self.inner.shell(command, cwd=cwd, timeout=timeout, env=env)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` without a shell (passed on)."""
        return self.inner.run(argv, cwd=cwd, timeout=timeout, env=env)

    def agent(
        self,
        tool: str,
        prompt: str,
        *,
        mode: AgentMode = "analysis",
        cwd: Path | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run agent ``tool`` (passed on) and keep the entry of its run."""
        result = self.inner.agent(tool, prompt, mode=mode, cwd=cwd, timeout=timeout)
        entry = run_entry(tool, mode, result)
        self.runs.append(entry)
        if self.log is not None:
            if "warning" in entry:
                self.log.warning("agent_version_unchecked", tool=tool, warning=entry["warning"])
            self.log.info("agent_ran", **{k: v for k, v in entry.items() if k != "final_message"})
        return result

    def has_agent(self, tool: str) -> bool:
        """Whether agent ``tool`` is there (passed on)."""
        return self.inner.has_agent(tool)

    def has_program(self, program: str) -> bool:
        """Whether ``program`` can be run (passed on)."""
        return self.inner.has_program(program)

    def agent_problem(self, tool: str) -> str | None:
        """Why agent ``tool`` cannot run (passed on)."""
        return agent_problem(self.inner, tool)
