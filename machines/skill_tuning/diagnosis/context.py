"""Context-explosion rules: what makes the prompt of a skill grow without bound.

The symptoms looked for: history that grows every turn and is never trimmed, whole files read and
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


_HISTORY_NAME = re.compile(r"history|messages|conversation|transcript", re.IGNORECASE)
_LOOP_HEAD = re.compile(r"\b(?:for|while)\s*\(|\.forEach\(|\bfor\s+\w+\s+in\b|\bwhile\s+\w")


def _bounded(block: CodeBlock, target: str) -> bool:
    return any(target in text and _BOUNDING.search(text) for text in block.lines)


def _declared_here(block: CodeBlock, target: str) -> bool:
    """Whether ``target`` is a list made afresh in this block (``const x = []``)."""
    made = re.compile(rf"(?:\b(?:const|let|var)\s+|^\s*){re.escape(target)}\s*=\s*\[")
    return any(made.search(text) for _n, text in block.numbered())


def _in_loop(block: CodeBlock, line: int) -> bool:
    """Whether ``line`` lies in the body of a loop of the block: within the braces a loop
    head opens, or (Python, shell) indented deeper than it on the lines that follow it."""
    return bool(_loops_around(block, line))


def _loops_around(block: CodeBlock, line: int) -> list[list[tuple[int, str]]]:
    """The loops of the block whose body holds ``line``, each as its lines (head first)."""
    skeleton = block.skeleton()
    loops: list[list[tuple[int, str]]] = []
    for index, (number, head) in enumerate(skeleton):
        if number >= line or not _LOOP_HEAD.search(head):
            continue
        depth = 0
        level = len(head) - len(head.lstrip())
        body: list[tuple[int, str]] = []
        for other, code in skeleton[index:]:
            depth += code.count("{") - code.count("}")
            braced = "{" in head
            ended = (
                depth <= 0
                if braced
                else (code.strip() and other > number and len(code) - len(code.lstrip()) <= level)
            )
            if ended and other != number and not braced:
                break  # the first line after an indented body
            body.append((other, code))
            if ended and other != number:
                break  # the brace that closes the body
        if any(other == line for other, _code in body):
            loops.append(body)
    return loops


_COLLECTION_PASS = re.compile(
    r"\bfor\s*\(\s*(?:const|let|var)\s+[^;]*?\s(?:of|in)\s|\.forEach\(|\bfor\s+[\w, ]+\s+in\b"
)
"""A loop over a collection (``for (const x of xs)``, ``xs.forEach(``, ``for x in xs:``): it
runs once per item, not turn after turn."""


def _one_pass(block: CodeBlock, line: int, target: str) -> bool:
    """Whether the append on ``line`` fills a list in one pass over a collection: every loop
    around it iterates a collection and reads nothing of the list but that append, so the list
    ends as long as the collection and is not pasted anywhere while it grows."""
    loops = _loops_around(block, line)
    name = re.compile(rf"\b{re.escape(target)}\b")
    raw = dict(block.numbered())  # with strings: a template can paste the list
    return bool(loops) and all(
        _COLLECTION_PASS.search(body[0][1])
        and not any(name.search(raw.get(number, "")) for number, _code in body if number != line)
        for body in loops
    )


def _pasted(skill_file_text: str, target: str) -> bool:
    """Whether the list is put into text somewhere in the file (a prompt, a summary)."""
    name = re.escape(target.rsplit(".", maxsplit=1)[-1])
    return (
        re.search(rf"\$\{{[^}}]*\b{name}\b|\b{name}\.(?:join|map)\(", skill_file_text) is not None
    )


def _unbounded_history(skill: Skill) -> list[Finding]:
    """A list that grows turn after turn and reaches the prompts: appended to and never
    trimmed, and either named as a history (``history``, ``messages``...), kept in the state,
    or pasted into text. A list made afresh in the block and filled a fixed number of times
    (no loop around the append), or in one pass over a collection that reads nothing of it while
    it grows (one entry per keyword, read after the loop), is bounded by construction."""
    findings: list[Finding] = []
    for skill_file, block, number, text in code_lines(skill):
        match = _GROWING.search(text)
        if match is None:
            continue
        target = match.group("target")
        if _bounded(block, target):
            continue
        if _declared_here(block, target) and (
            not _in_loop(block, number) or _one_pass(block, number, target)
        ):
            continue
        if _HISTORY_NAME.search(target):
            reaches = "its name says it is a history the prompts carry"
        elif target.lower().startswith("state."):
            reaches = "it is kept in the state, which every later step reads"
        elif _pasted(skill_file.text, target):
            reaches = "the file pastes it into text (${...}, .join( or .map()"
        else:
            continue
        in_loop = _LOOP.search(block.text) is not None
        severity: Severity = "critical" if in_loop else "high"
        data = {"target": target, "op": match.group("op"), "lang": block.lang}
        made = (
            "made afresh in the block but filled in a loop that reads it as it grows"
            if _declared_here(block, target)
            else "not made afresh in this block, so it keeps what earlier turns added"
        )
        reason = (
            f"{target} grows by {match.group('op')} and no line of the block trims it (slice, "
            f"splice, shift, pop(0), [-n:], del, a limit); it is {made}; {reaches}"
        )
        findings.append(
            Finding(skill_file.path, number, text.strip(), severity, data, reason=reason)
        )
    return findings


_READ_CALL = r"(?:Read\([^)]*\)|open\([^)]*\)\.read\(\)|readFileSync\([^)]*\))"
_READ_INLINE = re.compile(
    rf"\$\{{\s*{_READ_CALL}|{_READ_CALL}\s*\+|\+\s*{_READ_CALL}|\{{{_READ_CALL}\}}"
)
_READ_ASSIGN = re.compile(rf"(?:const|let|var)?\s*(?P<var>[A-Za-z_]\w*)\s*=\s*{_READ_CALL}")
_READ_ASSIGN_ANY = re.compile(r"(?:const|let|var)?\s*(?P<var>[A-Za-z_]\w*)\s*=(?!=)")


_OWN_INSTRUCTIONS = re.compile(r"""(?:Read|readFileSync|open)\(\s*[`'"]phases/""")
"""A read of the skill's own instructions (a phase or spec file handed to the agent that runs
it): that is how a skill passes a step's instructions, bounded by the phase-size rule."""
_WRITTEN_TO = re.compile(r"\b(?:Write|writeFileSync|write_text|writeFile)\(")


def _file_read_into_prompt(skill: Skill) -> list[Finding]:
    findings: list[Finding] = []
    for skill_file in skill.workflow_files:
        for block in skill_file.code_blocks:
            read_vars: dict[str, int] = {}
            written = {
                name
                for _n, line in block.numbered()
                if _WRITTEN_TO.search(line)
                for name in re.findall(r"[A-Za-z_]\w*", line.split("(", 1)[-1])
            }
            for number, text in block.numbered():
                assigned = _READ_ASSIGN.search(text)
                if assigned is not None and _READ_INLINE.search(text) is None:
                    if _OWN_INSTRUCTIONS.search(text) is None:
                        read_vars[assigned.group("var")] = number
                    continue
                into = _READ_ASSIGN_ANY.search(text)
                if into is not None and into.group("var") in written:
                    continue  # file content edited and written back, not a prompt
                pasted = [
                    var
                    for var in read_vars
                    if re.search(rf"\$\{{\s*{var}\s*\}}|\+\s*{var}\b|\b{var}\s*\+", text)
                ]
                inline = _READ_INLINE.search(text)
                if inline is None and not pasted:
                    continue
                if inline is not None:
                    what = f"the whole content of {inline.group(0).strip('${}+ ')} is put into text"
                else:
                    var = pasted[0]
                    what = (
                        f"{var} holds the whole file read on line {read_vars[var]} and is put "
                        "into text"
                    )
                reason = (
                    f"{what}, not its path or a summary; the file is not one of the skill's own "
                    "phases, and the text is not written back to a file"
                )
                findings.append(
                    Finding(skill_file.path, number, text.strip(), "high", reason=reason)
                )
    return findings


_STATE_DUMP = re.compile(
    r"(?:\$\{\s*|\+\s*|\{)(?:JSON\.stringify|json\.dumps)\(\s*(?:\w+\.)?\w*(?:state|State)\s*[,)]"
)
"""The whole state serialised: ``JSON.stringify(state)``, ``json.dumps(new_state, ...)``; a
field of it (``state.target_skill.phases``) or a digest (``stateKeyInfo``) is what the rule
recommends instead."""


def _state_dumped_into_prompt(skill: Skill) -> list[Finding]:
    return [
        Finding(
            skill_file.path,
            number,
            text.strip(),
            "medium",
            reason=f"{dump.group(0).lstrip('${+ ')} puts the whole state into the text, not "
            "the fields the step needs nor the state file's path",
        )
        for skill_file, _block, number, text in code_lines(skill)
        if (dump := _STATE_DUMP.search(text)) is not None
    ]


def _oversized_phase_file(skill: Skill) -> list[Finding]:
    return [
        Finding(
            phase.path,
            None,
            f"{len(phase.text)} characters in {len(phase.lines)} lines "
            f"(more than {MAX_PHASE_CHARS} characters)",
            "medium",
            reason=f"{len(phase.text)} characters counted exactly, over the limit of "
            f"{MAX_PHASE_CHARS}: the whole file is read into the context when its phase runs",
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
