"""Context-explosion rules: what makes the prompt of a skill grow without bound.

SPEC 4.3's symptoms: history that grows every turn and is never trimmed, whole files read and
pasted into prompts (and whole state documents serialised into them), and phase files so large
that reading one fills the context on its own.
"""

from __future__ import annotations

import re

from ..model import Severity
from ..skill import CodeBlock, Skill
from .rule import Finding, Rule, code_lines

__all__ = ["MAX_PHASE_CHARS", "RULES"]

MAX_PHASE_CHARS = 12_000
"""A phase file longer than this is read whole into the context every time its phase runs."""

_GROWING = re.compile(
    r"(?P<target>\b(?:[A-Za-z_][\w.]*?)?(?:history|messages|conversation|transcript|results"
    r"|outputs|context)\w*)\s*(?P<op>\.push\(|\.append\(|\.extend\(|\.concat\(|\+=(?!\s*\d))",
    re.IGNORECASE,
)
_BOUNDING = re.compile(r"slice\(|splice\(|shift\(|pop\(0\)|\[-\d+:\]|\bdel\b|truncat|MAX_|limit")
_LOOP = re.compile(r"\bwhile\s*\(|\bfor\s*\(|\.forEach\(|\bfor\s+\w+\s+in\b|\bwhile\s+\w")


def _bounded(block: CodeBlock, target: str) -> bool:
    return any(target in text and _BOUNDING.search(text) for text in block.lines)


def _unbounded_history(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file, block, number, text in code_lines(skill):
        match = _GROWING.search(text)
        if match is None or _bounded(block, match.group("target")):
            continue
        in_loop = _LOOP.search(block.text) is not None
        severity: Severity = "critical" if in_loop else "high"
        data = {"target": match.group("target"), "op": match.group("op"), "lang": block.lang}
        findings.append(Finding(skill_file.path, number, text.strip(), severity, data))
    return findings


_READ_CALL = r"(?:Read\([^)]*\)|open\([^)]*\)\.read\(\)|readFileSync\([^)]*\))"
_READ_INLINE = re.compile(
    rf"\$\{{\s*{_READ_CALL}|{_READ_CALL}\s*\+|\+\s*{_READ_CALL}|\{{{_READ_CALL}\}}"
)
_READ_ASSIGN = re.compile(rf"(?:const|let|var)?\s*(?P<var>[A-Za-z_]\w*)\s*=\s*{_READ_CALL}")


def _file_read_into_prompt(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.files:
        for block in skill_file.code_blocks:
            read_vars: set[str] = set()
            for number, text in block.numbered():
                assigned = _READ_ASSIGN.search(text)
                if assigned is not None and _READ_INLINE.search(text) is None:
                    read_vars.add(assigned.group("var"))
                    continue
                pasted = any(
                    re.search(rf"\$\{{\s*{var}\s*\}}|\+\s*{var}\b|\b{var}\s*\+", text)
                    for var in read_vars
                )
                if _READ_INLINE.search(text) or pasted:
                    findings.append(Finding(skill_file.path, number, text.strip(), "high"))
    return findings


_STATE_DUMP = re.compile(
    r"(?:\$\{\s*|\+\s*|\{)(?:JSON\.stringify|json\.dumps)\(\s*\w*state\w*\b", re.IGNORECASE
)


def _state_dumped_into_prompt(skill: Skill) -> list[Finding]:
    return [
        Finding(skill_file.path, number, text.strip(), "medium")
        for skill_file, _block, number, text in code_lines(skill)
        if _STATE_DUMP.search(text)
    ]


def _oversized_phase_file(skill: Skill) -> list[Finding]:
    return [
        Finding(
            phase.path,
            None,
            f"{len(phase.text)} characters in {len(phase.lines)} lines "
            f"(more than {MAX_PHASE_CHARS} characters)",
            "medium",
        )
        for phase in skill.files
        if phase.role == "phase" and len(phase.text) > MAX_PHASE_CHARS
    ]


RULES: tuple[Rule, ...] = (
    Rule(
        name="context.unbounded_history",
        area="context",
        title="History grows without bound",
        root_cause="Entries are appended to a history/results list on every turn and nothing "
        "ever trims it.",
        impact="Every turn carries all previous turns; the context overflows on long runs.",
        suggested_fix="Keep a sliding window: trim the list to its last entries after each append.",
        strategy="sliding_window",
        check=_unbounded_history,
    ),
    Rule(
        name="context.file_read_into_prompt",
        area="context",
        title="Whole file read and pasted into a prompt",
        root_cause="A file's full content is concatenated or interpolated into a prompt.",
        impact="Prompt size follows file size; large files crowd out the instructions.",
        suggested_fix="Pass the file path (or a summary) and let the agent read what it needs.",
        strategy="context_summarization",
        check=_file_read_into_prompt,
    ),
    Rule(
        name="context.state_dumped_into_prompt",
        area="context",
        title="Whole state serialised into a prompt",
        root_cause="JSON.stringify(state) (or json.dumps) is pasted into a prompt.",
        impact="The prompt grows with the state, which grows with every action.",
        suggested_fix="Pass only the fields the step needs, or the path of the state file.",
        strategy="context_summarization",
        check=_state_dumped_into_prompt,
    ),
    Rule(
        name="context.oversized_phase_file",
        area="context",
        title="Phase file too large",
        root_cause=f"The phase file is longer than {MAX_PHASE_CHARS} characters.",
        impact="Reading the phase fills a large share of the context before any work is done.",
        suggested_fix="Split the phase, or move reference material into specs/ read on demand.",
        strategy="context_summarization",
        check=_oversized_phase_file,
    ),
)
