"""Checks of the properties a fix must have, beyond the rule that flagged it going quiet.

A rule can go quiet for the wrong reason (a ``# try`` comment, an empty ``catch {}`` in a shell
block, the offending call deleted), so a fix is also judged on what it is meant to achieve:

* **Code still parses in its language.** Every fenced block the fix added or changed is parsed:
  ``bash -n`` for shell, ``node --check`` for JavaScript (when ``node`` is on PATH; the block is
  wrapped in an async function, since skills use ``await`` and ``return`` at their top level),
  ``json``, YAML (safe loader) and Python's ``ast``. A block that did not parse before the fix
  either is not held against it (skills hold pseudo-code); a language without a parser here is
  not checked, and the notes say so.
* **The failure mode is handled, not removed.** For an issue about agent calls without error
  handling or parses without validation, every call or parse it named must still be in the
  skill after the fix, and be handled (:mod:`..diagnosis.handling`: real structure or prose
  saying what to do, never a token). A fix that deletes the call fixes nothing.

:func:`property_checks` returns the problems (each a reason to roll the fix back) and notes
(what was checked and how, kept in the record).
"""

from __future__ import annotations

import ast
import functools
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

import yaml

from ..diagnosis.agent import agent_calls, call_handling
from ..diagnosis.run import RULES
from ..markdown import CodeBlock
from ..model import Issue
from ..skill import Skill

__all__ = ["block_parse_error", "property_checks"]

_SHELL = frozenset({"bash", "sh", "shell", "zsh"})
_JS = frozenset({"js", "javascript", "mjs", "cjs"})
_PY = frozenset({"python", "py"})
_YAML = frozenset({"yaml", "yml"})
_NOT_CODE = frozenset(
    {"", "text", "txt", "plain", "plaintext", "markdown", "md", "mermaid", "output", "log",
     "diagram", "ascii", "tree", "console"}
)  # fmt: skip
_TIMEOUT = 20.0


def _run(command: list[str], text: str, *, suffix: str = "") -> str | None:
    """Run a syntax checker on ``text`` (a file when ``suffix`` is given, else stdin); its
    first line of complaint, or None when it accepts the text."""
    with tempfile.TemporaryDirectory(prefix="fsm-check-") as folder:
        stdin: str | None = text
        if suffix:
            path = Path(folder) / f"block{suffix}"
            path.write_text(text, encoding="utf-8", errors="surrogateescape")
            command, stdin = [*command, str(path)], None
        try:
            done = subprocess.run(
                command, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            return f"{command[0]} took more than {_TIMEOUT:g} s"
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    useful = [line for line in lines if "Error" in line or "error" in line] or lines
    return (useful[0] if useful else f"exit status {done.returncode}").replace(folder, "")


@functools.lru_cache(maxsize=1024)
def block_parse_error(lang: str, text: str) -> str | None:
    """Why a block in ``lang`` does not parse (None: it parses); ``"unchecked: ..."`` when no
    parser for the language is available here."""
    if lang in _SHELL:
        bash = shutil.which("bash")
        return _run([bash, "-n"], text) if bash else "unchecked: bash is not on PATH"
    if lang in _JS:
        node = shutil.which("node")
        if node is None:
            return "unchecked: node is not on PATH"
        return _run([node, "--check"], f"(async () => {{\n{text}\n}});\n", suffix=".js")
    if lang == "json":
        try:
            json.loads(text)
        except ValueError as exc:
            return f"invalid JSON: {exc}"
        return None
    if lang in _YAML:
        try:
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return f"invalid YAML: {str(exc).splitlines()[0]}"
        return None
    if lang in _PY:
        try:
            ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            return f"invalid Python: {exc}"
        return None
    return f"unchecked: no parser for '{lang}' blocks here"


def _raw(block: CodeBlock) -> str:
    return "\n".join(block.lines)


def _parse_checks(before: Skill, after: Skill) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes: list[str] = []
    for skill_file in after.files:
        old = before.file(skill_file.path)
        if old is not None and old.text == skill_file.text:
            continue
        old_blocks = old.code_blocks if old is not None else ()
        unchanged = {(b.lang, _raw(b)) for b in old_blocks}
        for index, block in enumerate(skill_file.code_blocks):
            if (block.lang, _raw(block)) in unchanged or block.lang in _NOT_CODE:
                continue
            where = f"{skill_file.path}:{block.start}"
            error = block_parse_error(block.lang, _raw(block))
            if error is None:
                notes.append(f"{where}: the changed {block.lang} block parses")
            elif error.startswith("unchecked: "):
                notes.append(f"{where}: {error.removeprefix('unchecked: ')}, not checked")
            elif _failed_before(old_blocks, index, block):
                notes.append(f"{where}: the {block.lang} block did not parse before the fix either")
            else:
                problems.append(f"{where}: the {block.lang} block no longer parses: {error}")
    return problems, notes


def _failed_before(old_blocks: tuple[CodeBlock, ...], index: int, block: CodeBlock) -> bool:
    """Whether the block this one replaced (same place and language) did not parse either."""
    if index >= len(old_blocks) or old_blocks[index].lang != block.lang:
        return False
    return block_parse_error(block.lang, _raw(old_blocks[index])) is not None


def _identity(text: str) -> str:
    return " ".join(text.split())


def _handling_checks(
    before: Skill, after: Skill, addressed: Iterable[Issue]
) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes: list[str] = []
    for issue in addressed:
        if issue.rule != "agent.call_without_error_handling":
            if issue.rule == "dataflow.json_parse_unvalidated":
                problems += _parses_kept(before, after, issue)
            continue
        old_file, new_file = before.file(issue.location.file), after.file(issue.location.file)
        if old_file is None:
            continue
        flagged = {f.line for f in RULES[issue.rule].check(before) if f.file == old_file.path}
        now = (
            {_identity(call.statement): call for call in agent_calls(new_file)}
            if new_file is not None
            else {}
        )
        for call in agent_calls(old_file):
            if call.line not in flagged:
                continue
            kept = now.get(_identity(call.statement))
            if kept is None or new_file is None:
                problems.append(
                    f"{old_file.path}:{call.line}: the agent call {issue.id} is about is gone; a "
                    "fix handles its failure, it does not remove the call"
                )
                continue
            how = call_handling(after, new_file, kept)
            if how is not None:  # unhandled, it is still reported: verification says so
                notes.append(f"{new_file.path}:{kept.line}: the agent call's failure: {how}")
    return problems, notes


def _parses_kept(before: Skill, after: Skill, issue: Issue) -> list[str]:
    """The parses an unvalidated-JSON issue named must still be there after its fix."""
    old_file, new_file = before.file(issue.location.file), after.file(issue.location.file)
    rule = RULES.get(issue.rule or "")
    if old_file is None or rule is None:
        return []
    remaining = _identity(new_file.text) if new_file is not None else ""
    return [
        f"{old_file.path}:{finding.line}: the parse {issue.id} is about is gone; a fix validates "
        "what it parses, it does not remove the parse"
        for finding in rule.check(before)
        if finding.file == old_file.path and _identity(finding.context) not in remaining
    ]


def property_checks(
    before: Skill, after: Skill, addressed: Iterable[Issue]
) -> tuple[list[str], list[str]]:
    """The problems (reasons to roll the fix back) and notes (what was checked) of the change
    from ``before`` to ``after`` as a fix of ``addressed``."""
    parse_problems, parse_notes = _parse_checks(before, after)
    handling_problems, handling_notes = _handling_checks(before, after, list(addressed))
    return parse_problems + handling_problems, parse_notes + handling_notes
