"""Reading what an agent printed: its JSON events when it speaks a format fsm knows, and the
line that says why it failed.

The readers take an agent's whole standard output and return an :class:`AgentReport`: the final
message (what the agent answered, as its text mode would have printed it), the files it says it
changed, how its run ended, and its token and cost figures. The formats, as each CLI documents
them:

``codex-json``
    ``codex exec --json``: one event a line, ``{"type": "thread.started"}``,
    ``turn.started``, ``item.started|updated|completed`` (``item.type``: ``agent_message``
    with ``text``, ``file_change`` with ``changes: [{path, kind}]``, ``command_execution``,
    ``error`` ...), ``turn.completed`` with ``usage`` (``input_tokens``,
    ``cached_input_tokens``, ``output_tokens``), ``turn.failed`` with ``error.message``, and
    ``error`` (``message``: a reconnect notice or a fatal error).
``claude-stream-json``
    ``claude -p --output-format stream-json --verbose`` and ``qwen -o stream-json``: messages
    ``system`` (``subtype: init``), ``assistant`` and ``user`` (``message.content``: blocks
    ``text`` and ``tool_use`` with ``name`` and ``input``), then one ``result`` with
    ``subtype``, ``is_error``, ``result`` (the final text), ``num_turns``, ``usage``,
    ``total_cost_usd`` (claude) and ``error.message`` (qwen).
``gemini-stream-json``
    ``gemini -o stream-json``: ``init``, ``message`` (``role``, ``content``, ``delta``: chunks
    of one answer), ``tool_use`` (``tool_name``, ``parameters``), ``tool_result``, ``error``
    (``severity``, ``message``) and one ``result`` (``status``, ``error``, ``stats`` with
    ``input_tokens``, ``output_tokens``, ``cached``, ``tool_calls``).

A line that is not a JSON object (a warning the CLI printed on stdout) is kept as text; an event
of a type the reader does not know is skipped, so a CLI adding events does not break fsm.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fsm.process.agents import OutputFormat

__all__ = ["AgentReport", "error_line", "read_output"]

_EDIT_TOOLS = frozenset(
    {"Edit", "MultiEdit", "Write", "NotebookEdit", "edit", "write_file", "replace"}
)
"""Tools whose ``file_path`` (or ``notebook_path``) input is a file the agent changed: claude's,
qwen's and gemini's names."""
_PATH_KEYS = ("file_path", "notebook_path", "absolute_path", "path")


@dataclass(frozen=True)
class AgentReport:
    """What an agent's structured output says about its run (all fields optional)."""

    format: OutputFormat
    final_message: str | None = None
    files_changed: tuple[str, ...] = ()
    exit_reason: str | None = None
    """``completed``, or why the run ended otherwise (the agent's own error message)."""
    failed: bool = False
    """The events say the run failed, whatever the exit code."""
    usage: Mapping[str, int | float] = field(default_factory=dict)
    """``input_tokens``, ``cached_input_tokens``, ``output_tokens``, ``cost_usd``, ``turns``
    (those the agent reported)."""
    events: int = 0
    """JSON events read (0: the output held none, and the report says nothing)."""
    text: str = ""
    """The lines of the output that were not events."""
    version: str | None = None
    """The version of the known CLI that ran (set by the executor)."""
    warning: str | None = None
    """Why fsm's invocation may not fit that version (set by the executor)."""


def read_output(output: OutputFormat, stdout: str) -> AgentReport:
    """The report of an agent's standard output in format ``output``."""
    if output == "text":
        return AgentReport("text", final_message=stdout.strip() or None, text=stdout)
    events, text = _split(stdout)
    if not events:
        return AgentReport(output, text=stdout)
    return _READERS[output](events, "\n".join(text))


def _split(stdout: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON objects of ``stdout``, one a line, and its other lines."""
    events: list[dict[str, Any]] = []
    text: list[str] = []
    for line in stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            if isinstance(value, dict):
                events.append(value)
                continue
        if stripped:
            text.append(line)
    return events, text


def _codex(events: list[dict[str, Any]], text: str) -> AgentReport:
    message: str | None = None
    files: dict[str, None] = {}
    reason: str | None = None
    failed = False
    usage: dict[str, int | float] = {}
    errors: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "item.completed":
            item = _object(event.get("item"))
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                message = item["text"]
            elif item.get("type") == "file_change" and item.get("status") != "failed":
                for change in _objects(item.get("changes")):
                    _add_path(files, change.get("path"))
        elif kind == "turn.completed":
            # codex exec runs one turn: its usage is the run's
            usage = _numbers(_object(event.get("usage")), _CODEX_USAGE)
            reason, failed = "completed", False
        elif kind == "turn.failed":
            reason = _message(event.get("error")) or "turn failed"
            failed = True
        elif kind == "error":
            errors.append(_message(event) or "error")
    if reason is None and errors:
        reason, failed = errors[-1], True
    return AgentReport(
        "codex-json", message, tuple(files), reason, failed, usage, len(events), text
    )


_CODEX_USAGE = {
    "input_tokens": "input_tokens",
    "cached_input_tokens": "cached_input_tokens",
    "output_tokens": "output_tokens",
}


def _claude(events: list[dict[str, Any]], text: str) -> AgentReport:
    message: str | None = None
    files: dict[str, None] = {}
    reason: str | None = None
    failed = False
    usage: dict[str, int | float] = {}
    for event in events:
        kind = event.get("type")
        if kind == "assistant":
            said = []
            for block in _objects(_object(event.get("message")).get("content")):
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    said.append(block["text"])
                elif block.get("type") == "tool_use" and block.get("name") in _EDIT_TOOLS:
                    _add_path(files, _path(_object(block.get("input"))))
            if said:
                message = "\n".join(said)
        elif kind == "result":
            result = event.get("result")
            if isinstance(result, str) and result.strip():
                message = result
            failed = event.get("is_error") is True
            error = _message(event.get("error"))
            subtype = event.get("subtype")
            if failed:
                reason = error or (message if subtype == "success" else None) or str(subtype)
            else:
                reason = "completed"
            usage = _numbers(_object(event.get("usage")), _CLAUDE_USAGE)
            usage |= _numbers(event, {"total_cost_usd": "cost_usd", "num_turns": "turns"})
    return AgentReport(
        "claude-stream-json", message, tuple(files), reason, failed, usage, len(events), text
    )


_CLAUDE_USAGE = {
    "input_tokens": "input_tokens",
    "cache_read_input_tokens": "cached_input_tokens",
    "output_tokens": "output_tokens",
}


def _gemini(events: list[dict[str, Any]], text: str) -> AgentReport:
    chunks: list[str] = []
    files: dict[str, None] = {}
    reason: str | None = None
    failed = False
    usage: dict[str, int | float] = {}
    errors: list[str] = []
    for event in events:
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                # a whole message replaces the answer so far; delta chunks extend it
                chunks = [*chunks, content] if event.get("delta") is True else [content]
        elif kind == "tool_use":
            chunks = []  # the answer that counts comes after the agent's last tool call
            if event.get("tool_name") in _EDIT_TOOLS:
                _add_path(files, _path(_object(event.get("parameters"))))
        elif kind == "error" and event.get("severity") == "error":
            errors.append(_message(event) or "error")
        elif kind == "result":
            failed = event.get("status") == "error"
            reason = (_message(event.get("error")) or "error") if failed else "completed"
            stats = _object(event.get("stats"))
            usage = _numbers(stats, _GEMINI_USAGE)
    if reason is None and errors:
        reason, failed = errors[-1], True
    message = "".join(chunks) or None
    return AgentReport(
        "gemini-stream-json", message, tuple(files), reason, failed, usage, len(events), text
    )


_GEMINI_USAGE = {
    "input_tokens": "input_tokens",
    "cached": "cached_input_tokens",
    "output_tokens": "output_tokens",
}

_READERS: dict[str, Callable[[list[dict[str, Any]], str], AgentReport]] = {
    "codex-json": _codex,
    "claude-stream-json": _claude,
    "gemini-stream-json": _gemini,
}


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, dict))


def _message(value: Any) -> str | None:
    """The ``message`` of an error object (or the text itself)."""
    if isinstance(value, str):
        return value.strip() or None
    message = _object(value).get("message")
    return message.strip() or None if isinstance(message, str) else None


def _path(tool_input: dict[str, Any]) -> Any:
    return next((tool_input[k] for k in _PATH_KEYS if isinstance(tool_input.get(k), str)), None)


def _add_path(files: dict[str, None], path: Any) -> None:
    if isinstance(path, str) and path.strip():
        files[path] = None


def _numbers(source: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, int | float]:
    """The numbers of ``source`` named in ``names``, under fsm's names."""
    found: dict[str, int | float] = {}
    for key, name in names.items():
        value = source.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found[name] = value
    return found


_ERROR_LINE = re.compile(
    r"^\s*(?:\W{0,3}\s*)?(?:error|fatal|panic|invalid|unknown (?:argument|option|command)"
    r"|unexpected argument|not logged in|usage error)\b"
    r"|\b[A-Z]?[a-z]*(?:Error|Exception)\b:"
    r"|\berror:",
    re.IGNORECASE,
)


def error_line(*outputs: str) -> str:
    """The line of an agent's output that says why it failed: the first that reads as an error
    (``error: unexpected argument ...``, ``Invalid values:``, ``TypeError: ...``), with the
    indented line under it when it ends in a colon, else the last non-empty line. ``outputs``
    are searched in order (standard error first); empty when they are all empty."""
    last = ""
    for output in outputs:
        lines = output.splitlines()
        for index, line in enumerate(lines):
            if not line.strip():
                continue
            if _ERROR_LINE.search(line):
                found = line.strip()
                following = lines[index + 1].strip() if index + 1 < len(lines) else ""
                if found.endswith(":") and following:
                    found = f"{found} {following}"
                return found
        last = last or next((ln.strip() for ln in reversed(lines) if ln.strip()), "")
    return last
