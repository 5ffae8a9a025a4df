"""Consistency checks of a whole skill, before and after a fix: what the fix must not break.

A fix is judged by what it does to the skill as a whole, not only by whether the rule that
flagged it is quiet now. :func:`consistency_problems` compares the skill before and after and
names every problem the change brought in:

* **Names.** Every name a changed line reads must still exist where it is read from:

  - a variable read by a changed code line (``workDir``) is defined somewhere in the skill
    (``const``, a parameter, a loop variable...), is a language global or agent tool, or was
    already used by the skill before the fix (the skill's own environment, such as the
    ``state`` its orchestrator passes in). The same holds for a placeholder (``{workDir}``)
    in a changed line of prose;
  - a property a changed line now reads instead of one that is a key of the skill's JSON data
    files must be a key there too (``rule.fixExample`` -> ``rule.fix_example`` breaks every
    rule file that says ``fixExample``); any other renamed property must be written somewhere;
  - code that reads a key of the JSON data files still finds it in some data file.
* **Files.** Links, literal ``Read('...')`` paths and file names written in prose
  (```specs/quality.md```, when they point into a folder of the skill) that resolved before
  still resolve, and a changed line names no file the skill lacks; JSON
  data files that parsed before still parse and were not deleted.
* **Fences.** No code fence is left unclosed (everything after it would turn into code).

Only what the fix changed is held against it: a problem the skill already had is not reported.
"""

from __future__ import annotations

import difflib
import functools
import posixpath
import re
from collections.abc import Iterator

from ..names import BUILTINS, LineNames, block_names, placeholders
from ..skill import Skill, SkillFile

__all__ = ["consistency_problems"]

_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_MENTIONED_PATH = re.compile(r"`([\w.-]+/[\w./-]+\.\w+)`")
"""A file named in prose (```specs/quality.md```): checked when it points into a folder of the
skill."""
_READ_PATH = re.compile(r"""\b(?:Read|readFileSync|open)\(\s*['"]([\w./-]+\.\w+)['"]""")


def consistency_problems(before: Skill, after: Skill) -> list[str]:
    """Every problem of ``after`` that ``before`` did not have, one line each."""
    problems = [
        *_fence_problems(before, after),
        *_link_problems(before, after),
        *_data_problems(before, after),
        *_name_problems(before, after),
    ]
    return list(dict.fromkeys(problems))


@functools.lru_cache(maxsize=512)
def _code_names(skill_file: SkillFile) -> dict[int, LineNames]:
    found: dict[int, LineNames] = {}
    for block in skill_file.code_blocks:
        found |= block_names(block)
    return found


def _fence_problems(before: Skill, after: Skill) -> Iterator[str]:
    for skill_file in after.files:
        old = before.file(skill_file.path)
        was_open = old is not None and any(not b.closed for b in old.code_blocks)
        for block in skill_file.code_blocks:
            if not block.closed and not was_open:
                yield (
                    f"{skill_file.path}:{block.start - 1}: the code fence opened here is never "
                    "closed"
                )


def _links(skill: Skill) -> set[tuple[str, str]]:
    """(file, target) of every link and literal read path that resolves to nothing."""
    broken = set()
    folders = {path.split("/")[0] for path in skill.paths if "/" in path}
    for skill_file in skill.files:
        code = set(_code_names(skill_file))
        for number, line in enumerate(skill_file.lines, start=1):
            if number in code:  # only paths into the skill's folders, not the files of a run
                targets = [t for t in _READ_PATH.findall(line) if t.split("/")[0] in folders]
            else:
                named = _MENTIONED_PATH.findall(line)
                targets = _LINK.findall(line) + [t for t in named if t.split("/")[0] in folders]
            for target in targets:
                if not _resolves(skill, skill_file.path, target):
                    broken.add((skill_file.path, target))
    return broken


def _resolves(skill: Skill, source: str, target: str) -> bool:
    path = target.split("#", 1)[0].split("?", 1)[0]
    if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path) or path.startswith("/"):
        return True  # a URL, an anchor in the same file, or an absolute path: not the skill's
    candidates = {
        posixpath.normpath(posixpath.join(posixpath.dirname(source), path)),
        posixpath.normpath(path),
    }
    return any(
        c in skill.paths or any(p.startswith(f"{c}/") for p in skill.paths) for c in candidates
    )


def _link_problems(before: Skill, after: Skill) -> Iterator[str]:
    for source, target in sorted(_links(after) - _links(before)):
        yield f"{source} refers to {target}, which does not exist"


def _data_problems(before: Skill, after: Skill) -> Iterator[str]:
    now = {data.path: data for data in after.data}
    for data in before.data:
        if data.keys is None:
            continue
        if data.path not in now:
            yield f"the data file {data.path} was deleted"
        elif now[data.path].keys is None:
            yield f"the data file {data.path} is no longer valid JSON"
    lost = before.data_keys - after.data_keys
    for skill_file in after.files:
        for number, names in sorted(_code_names(skill_file).items()):
            for key in sorted(names.props & lost):
                yield (
                    f"{skill_file.path}:{number} reads `.{key}`, which no JSON data file of the "
                    "skill has any more"
                )


def _vocabulary(skill: Skill) -> tuple[set[str], set[str]]:
    """Every name the skill defines, and every name it uses as a name (defined, read, or
    mentioned as a placeholder in prose)."""
    defined: set[str] = set()
    used: set[str] = set()
    for skill_file in skill.files:
        code = _code_names(skill_file)
        for names in code.values():
            defined |= names.defined
            used |= names.defined | names.roots
        for number, line in enumerate(skill_file.lines, start=1):
            if number not in code:
                used |= placeholders(line)
    return defined, used


def _written(skill: Skill) -> set[str]:
    keys = set(skill.data_keys)
    for skill_file in skill.files:
        for names in _code_names(skill_file).values():
            keys |= names.keys
    return keys


def _changed_lines(old: list[str], new: list[str]) -> Iterator[tuple[int | None, int]]:
    """(old line number or None, new line number) of every line a change added or replaced."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            for offset in range(j2 - j1):
                paired = i1 + offset if tag == "replace" and i1 + offset < i2 else None
                yield (paired + 1 if paired is not None else None), j1 + offset + 1


def _name_problems(before: Skill, after: Skill) -> Iterator[str]:
    defined, _used = _vocabulary(after)
    _defined_before, used = _vocabulary(before)
    known = defined | used | BUILTINS
    data_before, data_after, written = before.data_keys, after.data_keys, _written(after)
    for skill_file in after.files:
        old_file = before.file(skill_file.path)
        if old_file is not None and old_file.text == skill_file.text:
            continue
        old_lines = old_file.lines if old_file is not None else []
        old_code = _code_names(old_file) if old_file is not None else {}
        new_code = _code_names(skill_file)
        lines = skill_file.lines
        for old_number, number in _changed_lines(old_lines, lines):
            where = f"{skill_file.path}:{number}"
            if number not in new_code:
                old_text = old_lines[old_number - 1] if old_number is not None else ""
                for name in sorted(placeholders(lines[number - 1]) - placeholders(old_text)):
                    if name not in known:
                        yield f"{where} mentions {{{name}}}, a name the skill never defines"
                continue
            empty = LineNames(frozenset(), frozenset(), frozenset(), frozenset())
            new = new_code[number]
            old = old_code.get(old_number, empty) if old_number is not None else empty
            for name in sorted(new.roots - old.roots - known):
                yield f"{where} reads `{name}`, a name the skill never defines"
            dropped, added = old.props - new.props, new.props - old.props
            from_data = sorted(dropped & data_before)
            for name in sorted(added):
                if from_data and name not in data_after:
                    yield (
                        f"{where} reads `.{name}` instead of `.{from_data[0]}`, but the skill's "
                        f"JSON data has `{from_data[0]}`, not `{name}`"
                    )
                elif dropped and not from_data and name not in written:
                    yield f"{where} reads `.{name}`, which nothing in the skill writes"
