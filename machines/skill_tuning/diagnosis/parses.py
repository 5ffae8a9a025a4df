"""Whether JSON a skill parses is checked before it is used: the dataflow rule "JSON parsed
without validation", and the judgements it rests on.

A parse is excused when its value is validated (a schema, a validating call, a type test of the
value), checked before anything reaches into it (``if (!data)``, ``data?.x``, ``data.x ?? d``),
read inside a ``try`` whose ``catch`` handles a malformed document, or when the document is the
skill's own: a JSON file it ships, or one it writes itself from a value it built and reads back
behind a test that the file exists.
"""

from __future__ import annotations

import re

from ..skill import Skill
from .handling import inside_try
from .rule import Finding, code_lines

__all__ = ["json_parse_unvalidated", "written_json"]

_PLACEHOLDER = re.compile(r"\$\{[^}]*\}|\{[^}]*\}")
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


def json_parse_unvalidated(skill: Skill) -> list[Finding]:
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
