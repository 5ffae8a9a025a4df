"""Fixes that need no judgement: concrete file changes computed from a rule's findings.

One fixer per rule whose strategy can be applied mechanically:

==================================  =====================  ====================================
rule                                strategy               change
==================================  =====================  ====================================
context.unbounded_history           sliding_window         trim the list after each append
memory.constraints_not_propagated   constraint_injection   copy the missing constraints in
memory.phase_without_checkpoint     checkpoint_restore     add a checkpoint/restore section
dataflow.json_parse_unvalidated     schema_enforcement     check the parsed value's shape
dataflow.inconsistent_field_names   schema_enforcement     rename variants to one spelling
agent.result_unvalidated            schema_enforcement     check the agent result is there
==================================  =====================  ====================================

A fixer returns ``None`` when the finding is not in a form it can change safely (a language it
does not know, a value that is not assigned to a name): that fix then needs judgement. Every
change is written so that the rule which found the problem no longer matches, and uses only
names the skill already has: the checkpoint section names the skill's own run-folder variable
(``workDir``...) when the skill defines one, else the folder of the state file it writes; a
skill with neither gets no checkpoint text (there is nothing for it to refer to) and the issue
is left to judgement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePosixPath

from ..diagnosis.dataflow import state_write_targets
from ..diagnosis.rule import Finding, Rule, statement_end
from ..diagnosis.run import RULES
from ..model import FileChange, Issue
from ..names import block_names
from ..skill import CodeBlock, Skill, SkillFile
from .edit import (
    append_section,
    insert_after,
    modification,
    rename_words,
)

__all__ = ["FIXERS", "Fixer", "mechanical_changes"]

Fixer = Callable[[Skill, list[Finding], int], list[FileChange] | None]

_JS = {"js", "javascript", "ts", "typescript", "jsx", "tsx", "mjs"}
_PY = {"py", "python"}


def mechanical_changes(skill: Skill, issue: Issue, window: int) -> list[FileChange] | None:
    """The changes that fix ``issue``, or None when it needs judgement."""
    rule = RULES.get(issue.rule or "")
    fixer = FIXERS.get(issue.rule or "")
    if rule is None or fixer is None:
        return None
    findings = _findings_of(rule, skill, issue.location.file)
    return fixer(skill, findings, window) if findings else None


def _findings_of(rule: Rule, skill: Skill, file: str) -> list[Finding]:
    return [f for f in rule.check(skill) if f.issue_file == file]


def _block_at(skill_file: SkillFile, line: int) -> CodeBlock | None:
    for block in skill_file.code_blocks:
        if block.start <= line < block.start + len(block.lines):
            return block
    return None


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def _insert_code(
    skill: Skill,
    findings: list[Finding],
    line_for: Callable[[Finding], str | None],
    *,
    per_block: bool,
) -> list[FileChange] | None:
    """Insert a line after the statement of each finding, or of one finding per code block
    (``per_block``: when one line fixes the whole block); None if some place cannot be fixed."""
    skill_file = skill.file(findings[0].file)
    if skill_file is None:
        return None
    by_block: dict[int, list[tuple[Finding, CodeBlock, str | None]]] = {}
    for finding in findings:
        block = _block_at(skill_file, finding.line or 0)
        if block is None:
            return None
        by_block.setdefault(block.start, []).append((finding, block, line_for(finding)))
    insertions: dict[int, list[str]] = {}
    for entries in by_block.values():
        fixable = [entry for entry in entries if entry[2] is not None]
        if (per_block and not fixable) or (not per_block and len(fixable) < len(entries)):
            return None
        for finding, block, code in fixable[:1] if per_block else fixable:
            line = finding.line or 1
            indent = _indent(skill_file.lines[line - 1])
            insertions.setdefault(statement_end(block, line), []).append(f"{indent}{code}")
    new = insert_after(skill_file.text, insertions)
    return [modification(skill_file.path, skill_file.text, new)]


def _sliding_window(skill: Skill, findings: list[Finding], window: int) -> list[FileChange] | None:
    def trim(finding: Finding) -> str | None:
        target, op, lang = finding.data["target"], finding.data["op"], finding.data["lang"]
        if op == "+=":
            return None  # a string or a list? trimming needs judgement
        note = f"sliding window: keep the last {window}"
        if lang in _JS:
            if op == ".concat(":
                return f"{target} = {target}.slice(-{window});  // {note}"
            return f"{target}.splice(0, Math.max(0, {target}.length - {window}));  // {note}"
        if lang in _PY:
            return f"del {target}[:-{window}]  # {note}"
        return None

    return _insert_code(skill, findings, trim, per_block=False)


def _append_sections(
    skill: Skill, findings: list[Finding], section_for: Callable[[Finding, str], list[str]]
) -> list[FileChange] | None:
    """Append a markdown section to the file of each finding (None when a file is gone)."""
    changes = []
    for finding in findings:
        phase = skill.file(finding.file)
        if phase is None:
            return None
        section = section_for(finding, phase.path)
        changes.append(modification(phase.path, phase.text, append_section(phase.text, section)))
    return changes


def _constraint_injection(
    skill: Skill, findings: list[Finding], _window: int
) -> list[FileChange] | None:
    def carried(finding: Finding, path: str) -> list[str]:
        return [
            f"## Constraints (carried from {finding.data['source']})",
            "",
            "The constraints of the first phase still hold in this phase:",
            "",
            *(f"- {constraint}" for constraint in finding.data["missing"].split("\n")),
        ]

    return _append_sections(skill, findings, carried)


_WORK_DIRS = ("workDir", "work_dir", "WORK_DIR", "outputDir", "output_dir", "baseDir", "base_dir")
"""Names of a folder for run files, in order of preference, that a checkpoint may be written to
when the skill defines one of them."""


def _work_dir_name(skill: Skill) -> str | None:
    """The skill's own variable for its run folder, if its code defines or reads one (a name
    it reads is given by its environment, as CCW's orchestrators give ``workDir``): a
    checkpoint section must never name a variable the skill does not have."""
    have: set[str] = set()
    for skill_file in skill.workflow_files:
        for block in skill_file.code_blocks:
            for names in block_names(block).values():
                have |= names.defined | names.roots
    return next((name for name in _WORK_DIRS if name in have), None)


def _state_file(skill: Skill) -> str | None:
    """The literal path of the state file the skill writes, if it writes one at a fixed place
    (``Write('.workflow/state.json', ...)``)."""
    paths = {target for *_rest, target in state_write_targets(skill) if "{" not in target}
    return sorted(paths)[0] if len(paths) == 1 else None


def _checkpoint_restore(
    skill: Skill, findings: list[Finding], _window: int
) -> list[FileChange] | None:
    """A checkpoint section naming where this phase's checkpoint goes: under the skill's own
    run folder (``{workDir}/checkpoints/01-collect.json``) or beside the state file it writes.
    A skill with neither has nothing such a section could refer to: the same paragraph
    appended to every phase would name no real place, so the fix is left to judgement."""
    folder = _work_dir_name(skill)
    state_file = _state_file(skill) if folder is None else None
    if folder is None and state_file is None:
        return None

    def checkpoint(finding: Finding, path: str) -> list[str]:
        stem = PurePosixPath(path).stem
        if folder is not None:
            where = f"write it to `{{{folder}}}/checkpoints/{stem}.json`."
        else:
            beside = PurePosixPath(state_file or "").parent.as_posix()
            where = (
                f"write it to `{beside}/checkpoints/{stem}.json`, beside the state file "
                f"`{state_file}`."
            )
        return [
            "## Checkpoint",
            "",
            "Before the next phase starts, save a checkpoint of what this phase produced:",
            where,
            "When the workflow resumes after an interruption, restore the newest checkpoint",
            "instead of repeating the phases it covers.",
        ]

    return _append_sections(skill, findings, checkpoint)


def _validate_parsed_json(
    skill: Skill, findings: list[Finding], _window: int
) -> list[FileChange] | None:
    def check(finding: Finding) -> str | None:
        var, lang = finding.data["var"], finding.data["lang"]
        if not var:
            return None
        message = f"schema: {var} is not a JSON object"
        if lang in _JS:
            return f"if ({var} === null || typeof {var} !== 'object') throw new Error('{message}');"
        if lang in _PY:
            return f'if not isinstance({var}, dict): raise ValueError("{message}")'
        return None

    return _insert_code(skill, findings, check, per_block=True)


def _validate_agent_result(
    skill: Skill, findings: list[Finding], _window: int
) -> list[FileChange] | None:
    def check(finding: Finding) -> str | None:
        var, lang = finding.data["var"], finding.data["lang"]
        if lang in _JS:
            return f"if (!{var}) throw new Error('agent returned no result: {var}');"
        if lang in _PY:
            return f'if not {var}: raise RuntimeError("agent returned no result: {var}")'
        return None

    return _insert_code(skill, findings, check, per_block=False)


def _one_spelling(skill: Skill, findings: list[Finding], _window: int) -> list[FileChange] | None:
    renames = {f.data["rename"]: f.data["to"] for f in findings}
    changes = []
    for skill_file in skill.files:
        code = {n for block in skill_file.code_blocks for n, _t in block.numbered()}
        new = rename_words(skill_file.text, renames, code)
        if new != skill_file.text:
            changes.append(modification(skill_file.path, skill_file.text, new))
    return changes or None


FIXERS: Mapping[str, Fixer] = {
    "context.unbounded_history": _sliding_window,
    "memory.constraints_not_propagated": _constraint_injection,
    "memory.phase_without_checkpoint": _checkpoint_restore,
    "dataflow.json_parse_unvalidated": _validate_parsed_json,
    "dataflow.inconsistent_field_names": _one_spelling,
    "agent.result_unvalidated": _validate_agent_result,
}
