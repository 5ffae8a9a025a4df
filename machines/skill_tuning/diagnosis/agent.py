"""Agent-failure rules: how a skill's calls to sub-agents go wrong.

SPEC 4.3's symptoms: agent calls with no error handling (one failing agent ends the whole
workflow), agent results used without checking them, and agents told to start further agents
(nesting that hides failures and multiplies cost).
"""

from __future__ import annotations

import re

from machines.skill_tuning.diagnosis.rule import Finding, Rule, statement_end
from machines.skill_tuning.skill import CodeBlock, Skill

__all__ = ["AGENT_CALL", "RULES"]

AGENT_CALL = re.compile(
    r"\b(?:Task|spawn_agent|Agent)\s*\(|\bccw cli\b|\bcodex exec\b|\bclaude -p\b|\bgemini -p\b"
)
"""How the skills of the seeds start an agent: the Task tool, spawn_agent, or an agent CLI."""

_ERROR_HANDLING = re.compile(r"\btry\b|\bcatch\b|\bexcept\b|onError|on_error|\.catch\(")
_ASSIGNED_CALL = re.compile(
    r"(?:(?:const|let|var)\s+)?(?P<var>[A-Za-z_]\w*)\s*=\s*(?:await\s+)?[A-Za-z_][\w.]*\s*\("
)
_CHECK = re.compile(r"\bif\b|validat|assert|\bthrow\b|\braise\b|schema|\?\.")
_NESTED_PROSE = re.compile(
    r"(?:spawn|launch|start|call)\s+(?:a|an|another)\s+(?:sub-?)?agent|use the Task tool",
    re.IGNORECASE,
)


def _span(block: CodeBlock, start: int) -> tuple[int, str]:
    end = statement_end(block, start)
    text = "\n".join(t for n, t in block.numbered() if start <= n <= end)
    return end, text


def _call_without_error_handling(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.files:
        for block in skill_file.code_blocks:
            if _ERROR_HANDLING.search(block.text):
                continue
            findings.extend(
                Finding(skill_file.path, number, text.strip(), "high")
                for number, text in block.numbered()
                if AGENT_CALL.search(text)
            )
    return findings


def _result_unvalidated(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.files:
        for block in skill_file.code_blocks:
            for number, text in block.numbered():
                assigned = _ASSIGNED_CALL.search(text)
                if assigned is None:
                    continue
                end, span = _span(block, number)
                if AGENT_CALL.search(span) is None:
                    continue
                var = assigned.group("var")
                uses = re.compile(rf"\b{re.escape(var)}\b")
                checked = any(
                    uses.search(t) and _CHECK.search(t) for n, t in block.numbered() if n > end
                )
                if not checked:
                    data = {"var": var, "lang": block.lang, "end": str(end)}
                    findings.append(Finding(skill_file.path, number, text.strip(), "medium", data))
    return findings


def _nested_agent_call(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.files:
        for block in skill_file.code_blocks:
            for number, text in block.numbered():
                call = AGENT_CALL.search(text)
                if call is None:
                    continue
                _end, span = _span(block, number)
                rest = span[call.end() :]
                if AGENT_CALL.search(rest) or _NESTED_PROSE.search(rest):
                    findings.append(Finding(skill_file.path, number, text.strip(), "high"))
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
