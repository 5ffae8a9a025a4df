"""Dataflow-break rules: where the data passed between phases goes astray.

The symptoms looked for: the state is written to several places (which one is the truth?), the same
field is spelled differently in different places (``iteration_count`` here, ``iterationCount``
there), and JSON is parsed and used without any validation.

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
from .handling import inside_try
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


_PARSE = re.compile(r"JSON\.parse\(|json\.loads?\(")
_PARSED_INTO = re.compile(
    r"(?:(?:const|let|var)\s+)?(?P<var>[A-Za-z_]\w*)\s*=\s*(?:await\s+)?(?:JSON\.parse|json\.loads?)\("
)
_VALIDATION = re.compile(
    r"validat|schema|assert|isinstance|typeof|Array\.isArray|hasOwnProperty|\brequired\b|zod"
)
_OPTIONAL = re.compile(r"\?\.|\?\?")


_LITERAL_READ = re.compile(r"""(?:Read|readFileSync|open)\(\s*['"]([\w./-]+\.json)['"]""")


_QUOTED = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")
"""A plain string (``'/conclusions.json'`` names no property); a template string is code."""


def _checked_later(block_lines: list[tuple[int, str]], line: int, var: str) -> bool:
    """Whether the parse's line or a later one checks the parsed value ``var``'s shape before
    anything reaches into it: a test of the value itself (``if (!data)``, ``typeof``,
    ``isinstance``), of its required fields (``if (data.summary && data.task_ids)``), optional
    chaining or a default (``data?.x``, ``data.x ?? []``); using it in a condition (``if
    (data.status === 'done')``) is not one, and a check after a plain ``data.items.length``
    comes too late (the malformed document has already broken that line)."""
    if not var:
        return False
    name = re.escape(var)
    check = re.compile(
        rf"\bif\s*\(?\s*(?:!|not\s+)\s*{name}\b|\b{name}\s*[!=]==?\s*(?:null|undefined|None)"
        rf"|\b{name}\??\.\w+\s*(?:&&|\?\?|\|\|)|\b{name}(?:\??\.\w+)*\?\.|typeof\s+{name}\b"
        rf"|isArray\(\s*{name}\b|isinstance\(\s*{name}\b|validat\w*\(\s*{name}\b"
        rf"|\bin\s+{name}\b|\b{name}\s+is\s+None\b"
    )
    reach = re.compile(rf"\b{name}(?:\.(?!get\()\w|\[)")
    for number, text in block_lines:
        if number < line:
            continue
        if check.search(text):
            return True
        if reach.search(_QUOTED.sub("''", text)):
            return False
    return False


_READ_PATH = re.compile(r"""(?:Read|readFileSync|open)\(\s*(?P<q>[`'"])(?P<path>.+?)(?P=q)""")
_JSON_WRITE = re.compile(
    r"""(?:\bWrite|writeFileSync)\(\s*(?P<q>[`'"])(?P<path>.+?)(?P=q)\s*,\s*JSON\.stringify\("""
)


_EXISTS = re.compile(r"\b(?:file_?[eE]xists|existsSync|exists)\s*\(")


def written_json(skill: Skill) -> set[str]:
    """The files the skill itself writes as ``JSON.stringify`` of a value it built, with their
    placeholders normalised to ``{}``: read back, they hold the shape the skill gave them."""
    return {
        _PLACEHOLDER.sub("{}", match.group("path"))
        for _file, _block, _number, text in code_lines(skill)
        if (match := _JSON_WRITE.search(text)) is not None
    }


_VALIDATING_CALL = re.compile(r"\bvalidat\w*\s*\(|\bassert\b|\.safeParse\(|\bajv\b")
"""A call that validates, from the parse on: it may check a value made from the parsed one
(``validateState(newState)`` of ``{...currentState, ...updates}``)."""


def _validated(numbered: list[tuple[int, str]], line: int, var: str) -> bool:
    """Whether a validation follows the parse: a validating call (:data:`_VALIDATING_CALL`), or
    a validation word (a schema, a type test) on a line naming the parsed value ``var``, or
    anywhere in the block when the value is not kept in a variable. A word such as
    ``source_schema`` elsewhere in a long block validates nothing."""
    if not var:
        return any(_VALIDATION.search(text) for _n, text in numbered)
    name = re.compile(rf"\b{re.escape(var)}\b")
    return any(
        _VALIDATING_CALL.search(text) or (_VALIDATION.search(text) and name.search(text))
        for n, text in numbered
        if n >= line
    )


def _json_parse_unvalidated(skill: Skill) -> list[Finding]:
    """Parses whose result nothing checks: not validated (a schema, a type test, an ``if`` on
    the value, optional chaining), not inside a ``try`` whose ``catch`` handles a malformed
    document, and not of a JSON file the skill ships (those are checked as the skill's data).
    Nor is a read of a file the skill writes itself as ``JSON.stringify`` of a value it built,
    guarded by a test that the file exists: it reads back the shape it wrote, and its absence is
    handled. (A state file re-read without that guard is a finding: agents and people edit it
    between steps.)"""
    findings: list[Finding] = []
    own_json = written_json(skill)
    for skill_file in skill.workflow_files:
        for block in skill_file.code_blocks:
            numbered = block.numbered()
            for number, text in numbered:
                if not _PARSE.search(text):
                    continue
                into = _PARSED_INTO.search(text)
                var = into.group("var") if into else ""
                if _validated(numbered, number, var):
                    continue
                own = _LITERAL_READ.search(text)
                parsed = _PARSE.search(text)
                rest = text[parsed.end() :] if parsed is not None else ""
                read = _READ_PATH.search(text)
                guard = " ".join(t for n, t in numbered if number - 1 <= n <= number)
                if (
                    (own is not None and own.group(1) in skill.paths)
                    or (
                        read is not None
                        and _PLACEHOLDER.sub("{}", read.group("path")) in own_json
                        and _EXISTS.search(guard) is not None
                    )
                    or _OPTIONAL.search(rest)
                    or inside_try(block, number) is not None
                    or _checked_later(numbered, number, var)
                ):
                    continue
                data = {"var": var, "lang": block.lang}
                checked = (
                    f"{var} is not checked after it (if (!{var}), {var}?., ?? ...); " if var else ""
                )
                validation = f"of {var} " if var else "in its block "
                reason = (
                    f"no validation {validation}(schema, validate, typeof, isinstance, assert); "
                    f"not inside a try whose catch handles it; {checked}"
                    "the document parsed is not a file the skill ships or writes itself"
                )
                findings.append(
                    Finding(skill_file.path, number, text.strip(), "medium", data, reason=reason)
                )
    return findings


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
        check=_json_parse_unvalidated,
    ),
)
