"""Agent-failure rules: how a skill's calls to sub-agents go wrong.

The symptoms looked for: agent calls with no error handling (one failing agent ends the whole
workflow), agent results used without checking them, and agents told to start further agents
(nesting that hides failures and multiplies cost).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..skill import CodeBlock, Skill, SkillFile
from .handling import Handling, failure_handling, unhandled_reason
from .rule import Finding, Rule, statement_end

__all__ = ["AGENT_CALL", "RULES", "AgentCall", "agent_calls", "call_handling"]

AGENT_CALL = re.compile(
    r"\b(?:Task|spawn_agent|Agent)\s*\(|\bccw cli\b|\bcodex exec\b|\bclaude -p\b|\bgemini -p\b"
)
"""How CCW's skills start an agent: the Task tool, spawn_agent, or an agent CLI."""
_TOOL_CALL = re.compile(r"(?<![\w.])(?:Task|spawn_agent|Agent)\s*\((?!\s*\))")
"""The tool forms of :data:`AGENT_CALL`, as code (outside strings and comments, with
arguments: ``Agent()`` in a sentence names the tool, it does not call it)."""
_CLI_CALL = re.compile(r"\bccw cli\b|\bcodex exec\b|\bclaude -p\b|\bgemini -p\b")
"""The command forms of :data:`AGENT_CALL`: a command line, or a string a ``Bash(...)`` runs."""
_ASSIGNED_CALL = re.compile(
    r"(?:(?:const|let|var)\s+)?(?P<var>[A-Za-z_]\w*)\s*=\s*(?:await\s+)?[A-Za-z_][\w.]*\s*\("
)
_CHECK = re.compile(r"\bif\b|validat|assert|\bthrow\b|\braise\b|schema|\?\.")
_HANDLE = re.compile(r"\bspawn_agent\s*\(|\brun_in_background\s*[:=]\s*[Tt]rue\b")
"""A call that returns a handle to a running agent, not its result (``spawn_agent`` returns an
id; the result comes from a later ``wait``): there is no result to check at the call."""
_NESTED_PROSE = re.compile(
    r"(?:spawn|launch|start|call)\s+(?:a|an|another)\s+(?:sub-?)?agent|use the Task tool"
    r"|\b(?:gemini|codex|qwen|claude)\s+cli\b",
    re.IGNORECASE,
)
"""A prompt telling its agent to start another one: in words, or by naming an agent CLI for it
to run (``**Step 2: Semantic Analysis** (Gemini CLI)``)."""


def _span(block: CodeBlock, start: int) -> tuple[int, str]:
    end = statement_end(block, start)
    text = "\n".join(t for n, t in block.numbered() if start <= n <= end)
    return end, text


@dataclass(frozen=True)
class AgentCall:
    """One agent call of a skill file: its block, the line it starts on, its whole statement."""

    block: CodeBlock
    line: int
    text: str
    statement: str


def agent_calls(skill_file: SkillFile) -> list[AgentCall]:
    """Every agent call of ``skill_file``, each once.

    A call is its statement, from the line that starts it to where its brackets balance: a line
    inside that statement that looks like another call (a ``ccw cli`` in the prompt) is part of
    it, not a second call. The same statement written again in the file (a phase repeating the
    call in a later block) is the same call and counts once, at its first place.
    """
    seen: set[str] = set()
    calls: list[AgentCall] = []
    for block in skill_file.code_blocks:
        covered = 0
        skeleton = dict(block.skeleton())
        for number, text in block.numbered():
            if number <= covered or not (
                _TOOL_CALL.search(skeleton.get(number, "")) or _CLI_CALL.search(text)
            ):
                continue
            covered, statement = _span(block, number)
            identity = " ".join(statement.split())
            if identity not in seen:
                seen.add(identity)
                calls.append(AgentCall(block, number, text, statement))
    return calls


def call_handling(skill: Skill, skill_file: SkillFile, call: AgentCall) -> Handling | None:
    """How the failure of ``call`` is handled (:mod:`.handling`), or None."""
    end = statement_end(call.block, call.line)
    return failure_handling(skill, skill_file, call.block, call.line, end)


def _call_without_error_handling(skill: Skill) -> list[Finding]:
    return [
        Finding(
            skill_file.path,
            call.line,
            call.text.strip(),
            "high",
            end=statement_end(call.block, call.line),
            reason=unhandled_reason(skill, skill_file, call.block, call.line),
        )
        for skill_file in skill.workflow_files
        for call in agent_calls(skill_file)
        if call_handling(skill, skill_file, call) is None
    ]


def _result_unvalidated(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.workflow_files:
        for call in agent_calls(skill_file):
            assigned = _ASSIGNED_CALL.search(call.text)
            if assigned is None or _HANDLE.search(call.statement):
                continue
            end = statement_end(call.block, call.line)
            var = assigned.group("var")
            uses = re.compile(rf"\b{re.escape(var)}\b")
            later = [(n, t) for n, t in call.block.numbered() if n > end and uses.search(t)]
            if not any(_CHECK.search(t) for _n, t in later):
                data = {"var": var, "lang": call.block.lang, "end": str(end)}
                used = f"used on line {later[0][0]}" if later else "not read again in its block"
                reason = (
                    f"{var}, the call's result, is {used}, and no line of the block after the "
                    f"call checks it (if, validate, assert, throw, schema, ?.)"
                )
                findings.append(
                    Finding(
                        skill_file.path,
                        call.line,
                        call.text.strip(),
                        "medium",
                        data,
                        end=end,
                        reason=reason,
                    )
                )
    return findings


def _nested_agent_call(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.workflow_files:
        for call in agent_calls(skill_file):
            first = AGENT_CALL.search(call.statement)
            offset = first.end() if first is not None else len(call.statement)
            inner = AGENT_CALL.search(call.statement, offset) or _NESTED_PROSE.search(
                call.statement, offset
            )
            if inner is None:
                continue
            end = statement_end(call.block, call.line)
            numbers = [n for n, _t in call.block.numbered() if call.line <= n <= end]
            line = numbers[min(call.statement.count("\n", 0, inner.start()), len(numbers) - 1)]
            reason = (
                f"the prompt of this call starts another agent: '{inner.group(0)}' on line "
                f"{line}, inside the call's own statement"
            )
            findings.append(
                Finding(
                    skill_file.path, call.line, call.text.strip(), "high", end=end, reason=reason
                )
            )
    return findings


RULES: tuple[Rule, ...] = (
    Rule(
        name="agent.call_without_error_handling",
        area="agent",
        title="Agent call without error handling",
        root_cause="An agent is called with no try/catch (or equivalent) around the call.",
        impact="One failing or timed-out agent aborts the whole workflow and loses its state.",
        suggested_fix="Wrap each agent call, record the failure in the state and decide "
        "whether to retry or skip.",
        strategy="orchestrator_refactor",
        check=_call_without_error_handling,
    ),
    Rule(
        name="agent.result_unvalidated",
        area="agent",
        title="Agent result used without validation",
        root_cause="The result of an agent call is used without checking that it is there and "
        "has the expected shape.",
        impact="An empty or malformed answer flows into the state and breaks later phases.",
        suggested_fix="Check the result right after the call and fail clearly when it is "
        "missing or malformed.",
        strategy="schema_enforcement",
        check=_result_unvalidated,
    ),
    Rule(
        name="agent.nested_agent_call",
        area="agent",
        title="Nested agent call",
        root_cause="An agent's prompt tells it to start further agents.",
        impact="Failures of the inner agents are invisible to the orchestrator; cost and "
        "context multiply.",
        suggested_fix="Let the orchestrator start every agent; pass results between them "
        "through the state.",
        strategy="orchestrator_refactor",
        check=_nested_agent_call,
    ),
)
