"""Dataflow-break rules: where the data passed between phases goes astray.

The symptoms looked for: the state is written to several places (which one is the truth?), the same
field is spelled differently in different places (``iteration_count`` here, ``iterationCount``
there), and JSON is parsed and used without any validation (its judgement is :mod:`.parses`).

Two spellings of one field are not always a mistake. A line that maps one onto the other
(``fix_example: rule.fixExample``: the rule files say ``fixExample``, the findings the skill
writes say ``fix_example``) is a deliberate translation between two schemas, and the field is
left alone. And the keys of the skill's JSON data files are what code reading them must use:
the rename never goes away from them.
"""

from __future__ import annotations

import re
from collections import Counter

from ..skill import CodeBlock, Skill
from .parses import json_parse_unvalidated
from .rule import SKILL_WIDE, Finding, Rule, code_lines

__all__ = [
    "RULES",
    "canonical",
    "field_spellings",
    "mapped_concepts",
    "state_write_targets",
    "tool_argument_lines",
]

_WRITES = (
    re.compile(r"\bWrite\(\s*(?P<q>[`'\"])(?P<path>.+?)(?P=q)"),
    re.compile(r"writeFileSync\(\s*(?P<q>[`'\"])(?P<path>.+?)(?P=q)"),
    re.compile(r"\bopen\(\s*f?(?P<q>['\"])(?P<path>.+?)(?P=q)\s*,\s*['\"][wa]"),
)
_REDIRECT = re.compile(r"(?:^|[\s;|&])>>?\s*(?P<q>['\"]?)(?P<path>[^\s'\"]+\.json)(?P=q)")
"""A shell redirection into a JSON file (only in shell blocks: ``=>`` and ``<id>/`` are not)."""
_SHELL = frozenset({"bash", "sh", "shell", "zsh", "console"})
_PLACEHOLDER = re.compile(r"\$\{[^}]*\}|\{[^}]*\}")
_COPY = re.compile(r"backup|checkpoint|snapshot|restore|\.bak\b|\.tmp\b|\.orig\b", re.IGNORECASE)


def state_write_targets(skill: Skill) -> list[tuple[str, int, str, str]]:
    """Every code line writing a state file: (file, line, text, target with placeholders
    normalised to ``{}``). Backups, checkpoints and snapshots are deliberate copies, not
    competing homes of the state, and are left out."""
    found = []
    for skill_file, block, number, text in code_lines(skill):
        for pattern in (*_WRITES, _REDIRECT) if block.lang in _SHELL else _WRITES:
            match = pattern.search(text)
            if match is None:
                continue
            target = _PLACEHOLDER.sub("{}", match.group("path"))
            name = target.rsplit("/", 1)[-1]
            if "state" in name.lower() and not _COPY.search(target):
                found.append((skill_file.path, number, text.strip(), target))
            break
    return found


def _state_written_to_several_places(skill: Skill) -> list[Finding]:
    writes = state_write_targets(skill)
    targets: dict[str, str] = {}
    for path, number, _text, target in writes:
        targets.setdefault(target, f"{path}:{number}")
    if len(targets) < 2:
        return []
    listed = ", ".join(f"{target} ({where})" for target, where in targets.items())
    reason = (
        f"the state is written to {len(targets)} different files: {listed}; none of them is a "
        "backup, checkpoint or snapshot"
    )
    return [
        Finding(path, number, text, "high", {"target": target}, anchor=SKILL_WIDE, reason=reason)
        for path, number, text, target in writes
    ]


_STATE_FIELD = re.compile(r"\b\w*[sS]tate\w*\??\.(?P<name>[A-Za-z_]\w*)")
_JSON_KEY = re.compile(r"[\"'](?P<name>[A-Za-z_]\w*)[\"']\s*:")
_OBJECT_KEY = re.compile(r"(?:^|[{,])\s*(?P<name>[A-Za-z_]\w*)\??\s*:(?![:/])")


_TOOL_CALL = re.compile(
    r"(?<![\w.$])(?:mcp__[\w-]+|[A-Z]\w*|spawn_agents?\w*|wait_agent|send_input|followup_task"
    r"|close_agent|request_user_input)\s*\(\s*\{"
)
"""A call of an agent tool (``mcp__ccw-tools__session_manager({``, ``Task({``,
``AskUserQuestion({``, ``spawn_agent({``) whose argument is an object: its keys are the tool's
parameters, spelled as the tool wants them, not fields of the skill's own data."""


def tool_argument_lines(block: CodeBlock) -> set[int]:
    """The lines of ``block`` inside the object argument of an agent tool's call."""
    skeleton = block.skeleton()
    inside: set[int] = set()
    depth = 0
    for number, text in skeleton:
        code = text
        if depth <= 0:
            opening = _TOOL_CALL.search(text)
            if opening is None:
                continue
            code = text[opening.end() - 1 :]
        inside.add(number)
        depth += code.count("{") - code.count("}")
    return inside


def field_spellings(skill: Skill) -> dict[str, Counter[str]]:
    """Field names used in code blocks, grouped by concept (lower case without ``_``): each
    concept maps its spellings to how often they occur. The keys of an agent tool's object
    argument are the tool's parameters and are left out (its prompt's ``state.x`` is not)."""
    concepts: dict[str, Counter[str]] = {}
    arguments: dict[int, set[int]] = {}
    for _file, block, number, text in code_lines(skill, specs=True):
        tool = arguments.setdefault(id(block), tool_argument_lines(block))
        keys = () if number in tool else (_JSON_KEY, _OBJECT_KEY)
        for pattern in (_STATE_FIELD, *keys):
            for match in pattern.finditer(text):
                name = match.group("name")
                if name[0].islower():
                    concepts.setdefault(_concept(name), Counter())[name] += 1
    return concepts


_MAPPING = re.compile(
    r"""(?<![\w.$])["']?(?P<key>[A-Za-z_]\w*)["']?\s*(?::|=(?!=))\s*"""
    r"""[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)*"""
    r"""(?:\??\.(?P<prop>[A-Za-z_]\w*)|\[\s*["'](?P<item>[A-Za-z_]\w*)["']\s*\])"""
)


_PROPERTY = re.compile(r"\??\.([A-Za-z_]\w*)")


def _concept(name: str) -> str:
    return name.replace("_", "").lower()


def mapped_concepts(skill: Skill) -> set[str]:
    """Concepts that some code line deliberately translates from one spelling to another
    (``fix_example: rule.fixExample``): both spellings are right, each in its own place."""
    mapped: set[str] = set()
    for _file, _block, _number, text in code_lines(skill, specs=True):
        if "||" in text or "??" in text:  # a?.codeReviewTool || b?.code_review_tool
            seen: dict[str, set[str]] = {}
            for name in _PROPERTY.findall(text):
                seen.setdefault(_concept(name), set()).add(name)
            mapped |= {concept for concept, names in seen.items() if len(names) > 1}
        for match in _MAPPING.finditer(text):
            key, read = match.group("key"), match.group("prop") or match.group("item")
            if key != read and _concept(key) == _concept(read):
                mapped.add(_concept(key))
    return mapped


def canonical(spellings: Counter[str], pinned: frozenset[str] = frozenset()) -> str | None:
    """The spelling to keep: the one the skill's JSON data uses (``pinned``), else the most
    used one, ties going to snake_case (CCW's style); None when the data itself uses
    several spellings (nothing can be renamed without breaking a read)."""
    fixed = sorted(set(spellings) & pinned)
    if len(fixed) > 1:
        return None
    if fixed:
        return fixed[0]
    return max(sorted(spellings), key=lambda name: (spellings[name], "_" in name))


def _inconsistent_field_names(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    mapped = mapped_concepts(skill)
    for concept, spellings in field_spellings(skill).items():
        if len(spellings) < 2 or concept in mapped:
            continue
        keep = canonical(spellings, skill.data_keys)
        if keep is None:
            continue
        for variant in sorted(set(spellings) - {keep}):
            place = _first_use(skill, variant)
            if place is not None:
                path, number, text = place
                context = f"{variant!r} and {keep!r} name the same field: {text}"
                data = {"rename": variant, "to": keep}
                kept = _first_use(skill, keep)
                at = f", first at {kept[0]}:{kept[1]}" if kept is not None else ""
                pinned = "; the skill's JSON data uses it" if keep in skill.data_keys else ""
                reason = (
                    f"{variant!r} is used {spellings[variant]} time(s), {keep!r} "
                    f"{spellings[keep]} time(s){at}{pinned}; no line maps one spelling onto "
                    "the other"
                )
                findings.append(
                    Finding(path, number, context, "medium", data, anchor=SKILL_WIDE, reason=reason)
                )
    return findings


def _first_use(skill: Skill, name: str) -> tuple[str, int, str] | None:
    word = re.compile(rf"\b{re.escape(name)}\b")
    for skill_file, _block, number, text in code_lines(skill, specs=True):
        if word.search(text):
            return skill_file.path, number, text.strip()
    return None


RULES: tuple[Rule, ...] = (
    Rule(
        name="dataflow.state_written_to_several_places",
        area="dataflow",
        title="State written to several places",
        root_cause="Different steps write the state to different files.",
        impact="Readers disagree on which file is the truth; updates are lost between them.",
        suggested_fix="Keep one state file and write it through one update function.",
        strategy="state_centralization",
        check=_state_written_to_several_places,
    ),
    Rule(
        name="dataflow.inconsistent_field_names",
        area="dataflow",
        title="Same field spelled differently",
        root_cause="A field is written under one spelling and read under another.",
        impact="Reads of the other spelling see nothing; data silently stops flowing.",
        suggested_fix="Use one spelling everywhere, the one of the state schema.",
        strategy="schema_enforcement",
        check=_inconsistent_field_names,
    ),
    Rule(
        name="dataflow.json_parse_unvalidated",
        area="dataflow",
        title="JSON parsed without validation",
        root_cause="Parsed JSON is used without checking its shape.",
        impact="A malformed or partial document flows on and breaks a later phase far from "
        "the cause.",
        suggested_fix="Validate parsed JSON against the expected schema before using it.",
        strategy="schema_enforcement",
        check=json_parse_unvalidated,
    ),
)
