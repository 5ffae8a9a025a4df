"""Whether a skill handles the failure of one statement, and how: the judgement the agent and
dataflow rules share, and that verification asks again after a fix.

A skill is instructions for an agent as much as code, so failure handling is found in both:

* **In code**, only real structure counts, never a token: the statement lies inside the body
  of a ``try`` whose ``catch`` (or ``except``) does something (an empty ``catch {}`` or a bare
  ``pass`` swallows the failure, it does not handle it), or a ``.catch(`` is chained onto it;
  in a shell block its command is tested (``cmd || ...``, ``if ! cmd``, ``$?`` read right after
  it). Comments and strings are not code (:mod:`..lexer`): ``# try`` handles nothing.
* **In prose**: the section holding the statement (from its heading to the next heading of the
  same or a higher level) says what to do when it fails (``If the CLI times out, retry once``),
  or the step right after it (the next section of the same level, which reads the result) does,
  on a line that names the failure of an agent, a tool or a timeout (a table row ``Review
  failed/timeout | Ask the user whether to retry``), or the file, or the skill's SKILL.md, has
  an error-handling section (a heading such as ``Error Handling``, ``Recovery``, ``错误处理``)
  that speaks of agents, tools, workflow nodes or timeouts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..markdown import CodeBlock
from ..skill import Skill, SkillFile

__all__ = ["Handling", "failure_handling", "inside_try", "unhandled_reason"]

_SLASH = frozenset({"js", "javascript", "ts", "typescript", "jsx", "tsx", "mjs", "cjs", ""})
_PY = frozenset({"python", "py"})
_SHELL = frozenset({"bash", "sh", "shell", "zsh", "console", ""})

_HEADING = re.compile(r"^\s{0,3}(?P<level>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_ERROR_SECTION = re.compile(
    r"error|fail|recover|fallback|resilien|exception|错误|异常|失败|容错|降级", re.IGNORECASE
)
_AGENT_WORDS = re.compile(
    r"agent|\bcli\b|gemini|codex|qwen|claude|\btask\b|\btool\b|worker|\bnodes?\b|time ?out"
    r"|超时|代理|子任务",
    re.IGNORECASE,
)
"""What runs a call, in words: an agent, a tool, a worker, a workflow's node (``Node failed
(on_fail=retry) | Retry once, then abort``), a timeout."""
_FAILURE_PROSE = re.compile(
    r"(?:\bif\b|\bwhen(?:ever)?\b|\bin case\b|如果|若|当)[^.\n。]{0,80}?"
    r"(?:\bfail\w*|\berror\w*|\btime[sd]?\s?out\b|\btimeout\w*|\bcrash\w*|\bunavailable\b"
    r"|\breturns? (?:nothing|no\b|empty)|\bno (?:result|output|response)|失败|超时|出错|错误|异常)"
    r"|\bfall ?back\b|\bretry\b|\bretries\b|重试|降级",
    re.IGNORECASE,
)
_TRY_JS = re.compile(r"\btry\s*\{")
_CATCH_JS = re.compile(r"^\s*catch\b\s*(?:\([^)]*\))?\s*\{")
_SHELL_TESTED = re.compile(r"\|\|(?!\s*(?:true|:)\s*(?:$|[;#)]))|^\s*(?:if|until|while)\s")
_STATUS_READ = re.compile(r"\$\?|PIPESTATUS")


@dataclass(frozen=True)
class Handling:
    """How a statement's failure is handled: ``where`` (file and line) and ``how``."""

    where: str
    how: str

    def __str__(self) -> str:
        return f"{self.how} ({self.where})"


def failure_handling(
    skill: Skill, skill_file: SkillFile, block: CodeBlock, start: int, end: int
) -> Handling | None:
    """How the failure of the statement on lines ``start``..``end`` of ``block`` is handled, or
    None when nothing in the code or the prose handles it."""
    return (
        _in_code(skill_file, block, start, end)
        or _in_section(skill_file, start)
        or _error_section(skill_file)
        or (None if skill_file.path == "SKILL.md" else _skill_error_section(skill))
    )


def unhandled_reason(skill: Skill, skill_file: SkillFile, block: CodeBlock, start: int) -> str:
    """What :func:`failure_handling` looked for around the statement starting on ``start`` and
    did not find, in one line: the evidence that the failure is really unhandled."""
    looked = [
        text
        for langs, text in (
            (_SLASH, "a try whose catch does something, a .catch( or allSettled("),
            (_PY, "a try whose except does something"),
            (_SHELL, "a test of its exit status (||, if, $?)"),
        )
        if block.lang in langs
    ]
    code = f"nothing in its {block.lang or 'untagged'} block handles a failure" + (
        f" (looked for {', '.join(looked)})" if looked else ""
    )
    around = [s for s in _sections(skill_file) if s[0] <= start <= s[1]]
    if around:
        first, last, title, _level = max(around, key=lambda s: s[0])
        section = (
            f"its section '{title}' (lines {first}-{last}) and the step after it say nothing "
            "of what to do on failure"
        )
    else:
        section = "it lies in no section, and no prose around it speaks of failure"
    files = [skill_file] + [
        main for main in [skill.file("SKILL.md")] if main is not None and main is not skill_file
    ]
    silent = [
        f"'{title}' (line {first}) speaks of no agent, tool or timeout"
        for f in files
        for first, _last, title, _level in _sections(f)
        if _ERROR_SECTION.search(title)
    ]
    names = " or ".join(f.path for f in files)
    errors = (
        f"of the error sections of {names}, {'; '.join(silent)}"
        if silent
        else f"no error-handling section in {names}"
    )
    return f"{code}; {section}; {errors}"


def _in_code(skill_file: SkillFile, block: CodeBlock, start: int, end: int) -> Handling | None:
    where = f"{skill_file.path}:{start}"
    skeleton = block.skeleton()
    if block.lang in _SLASH:
        found = _js_try(skeleton, start)
        if found is not None:
            return Handling(f"{skill_file.path}:{found}", "inside a try whose catch handles it")
        chained = " ".join(text for number, text in skeleton if start <= number <= end + 1)
        if ".catch(" in chained.replace(" ", "") or "allSettled(" in chained:
            return Handling(where, "a .catch( handles its rejection")
    if block.lang in _PY:
        found = _py_try(skeleton, start)
        if found is not None:
            return Handling(f"{skill_file.path}:{found}", "inside a try whose except handles it")
    if block.lang in _SHELL:
        lines = dict(skeleton)
        tested = [lines.get(n, "") for n in range(start, end + 1)]
        if any(_SHELL_TESTED.search(text) for text in tested):
            return Handling(where, "its exit status is tested")
        after = [lines.get(n, "") for n in range(end + 1, end + 4)]
        if any(_STATUS_READ.search(text) for text in after):
            return Handling(where, "its exit status is read right after it")
    return None


def inside_try(block: CodeBlock, line: int) -> int | None:
    """The line of a ``try`` (JavaScript or Python) whose body holds ``line`` and whose
    ``catch``/``except`` does something, or None."""
    if block.lang in _SLASH:
        return _js_try(block.skeleton(), line)
    if block.lang in _PY:
        return _py_try(block.skeleton(), line)
    return None


def _js_try(skeleton: list[tuple[int, str]], line: int) -> int | None:
    """The line of a ``try`` whose body holds ``line`` and whose ``catch`` body is not empty."""
    chars: list[tuple[int, str]] = [(n, c) for n, text in skeleton for c in text + "\n"]
    text = "".join(c for _n, c in chars)
    for match in _TRY_JS.finditer(text):
        body_end = _closing(text, match.end() - 1)
        if body_end is None:
            continue
        first, last = chars[match.start()][0], chars[body_end][0]
        if not first <= line <= last:
            continue
        catch = _CATCH_JS.match(text[body_end + 1 :])
        if catch is None:
            continue
        open_at = body_end + 1 + catch.end() - 1
        close_at = _closing(text, open_at)
        if close_at is not None and text[open_at + 1 : close_at].strip():
            return first
    return None


def _closing(text: str, opening: int) -> int | None:
    depth = 0
    for index in range(opening, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _py_try(skeleton: list[tuple[int, str]], line: int) -> int | None:
    """The line of a ``try:`` whose body holds ``line`` and whose ``except`` body is not only
    ``pass`` (or ``...``)."""
    lines = [(n, t) for n, t in skeleton if t.strip()]
    target = next((t for n, t in lines if n == line), None)
    if target is None:
        return None
    for index, (number, text) in enumerate(lines):
        if number >= line or text.strip() != "try:" or _indent(target) <= _indent(text):
            continue
        level = _indent(text)
        after = [(n, t) for n, t in lines[index + 1 :] if n > line]
        for position, (_n, other) in enumerate(after):
            if _indent(other) < level or (_indent(other) == level and not other.strip()):
                break
            if _indent(other) == level:
                if not other.strip().startswith("except"):
                    break
                body = [t for _m, t in after[position + 1 :] if _indent(t) > level]
                first = body[0].strip() if body else "pass"
                if first not in ("pass", "..."):
                    return number
                break
    return None


def _fenced(skill_file: SkillFile) -> set[int]:
    """The line numbers of every fenced block of the file, fences included."""
    return {
        block.start + offset
        for block in skill_file.code_blocks
        for offset in range(-1, len(block.lines) + 1)
    }


def _sections(skill_file: SkillFile) -> list[tuple[int, int, str, int]]:
    """(first line, last line, title, level) of every section of the file, outside code."""
    code = _fenced(skill_file)
    headings = [
        (number, match.group("title"), len(match.group("level")))
        for number, text in enumerate(skill_file.lines, start=1)
        if number not in code and (match := _HEADING.match(text)) is not None
    ]
    sections = []
    for index, (number, title, level) in enumerate(headings):
        end = next(
            (n - 1 for n, _t, other in headings[index + 1 :] if other <= level),
            len(skill_file.lines),
        )
        sections.append((number, end, title, level))
    return sections


def _prose_lines(skill_file: SkillFile, first: int, last: int) -> list[tuple[int, str]]:
    code = _fenced(skill_file)
    return [
        (number, skill_file.lines[number - 1])
        for number in range(first, min(last, len(skill_file.lines)) + 1)
        if number not in code
    ]


def _in_section(skill_file: SkillFile, line: int) -> Handling | None:
    """Prose of the innermost section holding ``line`` that says what to do on failure."""
    around = [s for s in _sections(skill_file) if s[0] <= line <= s[1]]
    if not around:
        return None
    first, last, _title, level = max(around, key=lambda s: s[0])
    for number, text in _prose_lines(skill_file, first + 1, last):
        if _FAILURE_PROSE.search(text):
            return Handling(f"{skill_file.path}:{number}", "its section says what to do on failure")
    following = [s for s in _sections(skill_file) if s[0] == last + 1 and s[3] == level]
    for next_first, next_last, _next_title, _next_level in following:
        # the step right after, which reads the result ("Review failed/timeout | Ask the user
        # whether to retry"), says what to do when the call failed
        for number, text in _prose_lines(skill_file, next_first + 1, next_last):
            if _FAILURE_PROSE.search(text) and _AGENT_WORDS.search(text):
                where = f"{skill_file.path}:{number}"
                return Handling(where, "the next step says what to do when it fails")
    return None


def _error_section(skill_file: SkillFile) -> Handling | None:
    """An error-handling section of the file that speaks of agents, tools or timeouts."""
    for first, last, title, _level in _sections(skill_file):
        if not _ERROR_SECTION.search(title):
            continue
        body = _prose_lines(skill_file, first + 1, last)
        if any(_AGENT_WORDS.search(text) for _n, text in body):
            return Handling(f"{skill_file.path}:{first}", f"the section '{title}' covers it")
    return None


def _skill_error_section(skill: Skill) -> Handling | None:
    main = skill.file("SKILL.md")
    return _error_section(main) if main is not None else None
