"""The names a skill's code defines, reads and writes, line by line.

Skills embed JavaScript, Python and shell; none of it is ever run, so a full parser of each would
be out of proportion. This is a small scanner that is right about the things the consistency
checks ask: which free names a line reads (``workDir``, ``state``), which properties it reads
(``rule.fixExample``, ``rule['fixExample']``), which keys it writes (``fix_example: ...``,
``"review_count": 0``, ``state.count = ...``) and which names it defines (``const``, parameters,
loop variables, assignments). Strings and comments are skipped, except the ``${...}`` parts of
template literals, which are code; a template literal may span lines.

Prose has names too: ``{workDir}`` or ``${workDir}`` in a sentence is a placeholder the reader
is meant to fill with the skill's variable of that name (:func:`placeholders`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .markdown import CodeBlock

__all__ = ["BUILTINS", "LineNames", "block_names", "placeholders"]

_BUILTIN_WORDS = """
    await async break case catch class const continue debugger default delete do else export
    extends false finally for from function if import in instanceof let new null of return
    static super switch this throw true try typeof undefined var void while with yield
    Array Boolean Date Error JSON Map Math Number Object Promise RegExp Set String Symbol
    TypeError RangeError console process require module exports parseInt parseFloat isNaN
    Infinity NaN setTimeout clearTimeout globalThis window document
    Read Write Edit Glob Grep Bash Task Agent AskUserQuestion TodoWrite WebFetch WebSearch Skill
    spawn_agent wait send_input close_agent
    and as assert def del elif except False is lambda None nonlocal not or pass raise True
    global print len str int float dict list set tuple bool isinstance open range enumerate
    sorted min max sum any all zip map filter json os sys re Path ValueError RuntimeError
    KeyError Exception
"""
BUILTINS = frozenset(_BUILTIN_WORDS.split())
"""Keywords, language globals and the agent tools every skill may use without defining them."""

_SHELL = frozenset({"bash", "sh", "shell", "zsh", "console"})
_HASH_COMMENTS = _SHELL | {"python", "py", "yaml", "yml", "toml"}
_IDENT = re.compile(r"\$?[A-Za-z_][\w$]*")
_DECLARED = re.compile(r"\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)")
_DESTRUCTURED = re.compile(r"\b(?:const|let|var)\s*[{\[]([^}\]]*)[}\]]")
_FUNCTION = re.compile(r"\bfunction\b\s*\*?\s*([A-Za-z_$][\w$]*)?\s*\(([^)]*)\)")
_ARROW = re.compile(r"\(([^()]*)\)\s*=>|([A-Za-z_$][\w$]*)\s*=>")
_CAUGHT = re.compile(r"\bcatch\s*\(\s*([A-Za-z_$][\w$]*)")
_CLASS = re.compile(r"\bclass\s+([A-Za-z_$][\w$]*)")
_PY_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::[^=]+)?=(?!=)")
_PY_DEF = re.compile(r"\bdef\s+([A-Za-z_]\w*)\s*\(([^)]*)\)")
_PY_FOR = re.compile(r"\bfor\s+([\w\s,()]+?)\s+in\b")
_AS = re.compile(r"\bas\s+([A-Za-z_]\w*)")
_IMPORT = re.compile(r"^\s*(?:from\s+\S+\s+)?import\s+(.+)$")
_SH_ASSIGN = re.compile(r"(?:^|\s)(?:export\s+|local\s+)?([A-Za-z_]\w*)=")
_SH_READ = re.compile(r"\$\{?([A-Za-z_]\w*)")
_PLACEHOLDER = re.compile(r"\$?\{\{?\s*([A-Za-z_]\w*)\s*\}?\}")


@dataclass(frozen=True)
class LineNames:
    """What one code line defines, reads and writes."""

    roots: frozenset[str]
    props: frozenset[str]
    keys: frozenset[str]
    defined: frozenset[str]


def placeholders(text: str) -> set[str]:
    """The ``{name}`` / ``${name}`` placeholders in a line of prose."""
    return set(_PLACEHOLDER.findall(text))


def _words(text: str, *, renamed: bool = False) -> set[str]:
    """The names of a parameter list or a destructuring pattern: defaults and spreads
    dropped; for ``a: b`` the name after the colon when ``renamed`` (destructuring), before it
    otherwise (a typed parameter)."""
    names = set()
    for part in re.split(r",", re.sub(r"[{}\[\]()]", ",", text)):
        item = part.split("=")[0]
        if ":" in item:
            item = item.split(":")[1 if renamed else 0]
        name = item.strip().lstrip(".").strip()
        if re.fullmatch(r"[A-Za-z_$][\w$]*", name):
            names.add(name)
    return names


def _definitions(code: str, lang: str) -> set[str]:
    found: set[str] = set(_DECLARED.findall(code))
    for group in _DESTRUCTURED.findall(code):
        found |= _words(group, renamed=True)
    for name, params in _FUNCTION.findall(code):
        found |= {name} | _words(params) if name else _words(params)
    for params, single in _ARROW.findall(code):
        found |= _words(params) if params else {single}
    found |= set(_CAUGHT.findall(code)) | set(_CLASS.findall(code)) | set(_AS.findall(code))
    if lang in _SHELL:
        return found | set(_SH_ASSIGN.findall(code)) | set(re.findall(r"\bfor\s+(\w+)\s+in", code))
    for targets in _PY_ASSIGN.findall(code):
        found |= _words(targets)
    for name, params in _PY_DEF.findall(code):
        found |= {name} | _words(params)
    for targets in _PY_FOR.findall(code):
        found |= _words(targets)
    imported = _IMPORT.match(code)
    if imported is not None:
        found |= _words(re.sub(r"\bas\b", " ", imported.group(1)))
    return found


def _classify(code: str, lang: str) -> LineNames:
    defined = _definitions(code, lang)
    if lang in _SHELL:
        return LineNames(
            frozenset(_SH_READ.findall(code)), frozenset(), frozenset(), frozenset(defined)
        )
    roots: set[str] = set()
    props: set[str] = set()
    keys: set[str] = set()
    for match in _IDENT.finditer(code):
        name = match.group().lstrip("$") or match.group()
        before = code[: match.start()].rstrip()
        after = code[match.end() :].lstrip()
        is_key = re.match(r"\??:(?!:)", after) is not None and (not before or before[-1] in "{,(")
        if before.endswith(".") and not before.endswith("..."):
            (keys if re.match(r"=(?!=)", after) else props).add(name)
        elif is_key:
            keys.add(name)
        elif name not in BUILTINS and not name[0].isdigit():
            roots.add(name)
    return LineNames(
        frozenset(roots - defined), frozenset(props), frozenset(keys), frozenset(defined)
    )


def block_names(block: CodeBlock) -> dict[int, LineNames]:
    """The names of every code line of ``block``, by line number."""
    scanner = _Scanner(hash_comments=block.lang in _HASH_COMMENTS, shell=block.lang in _SHELL)
    return {number: _classify(scanner.line(text), block.lang) for number, text in block.numbered()}


class _Scanner:
    """Turns code lines into the text the name patterns read: strings dropped (an item lookup
    ``x['k']`` becomes ``x.k``, a quoted key ``"k":`` becomes ``k:``), comments dropped, and the
    code inside ``${...}`` of template literals kept. Its state carries across lines."""

    def __init__(self, *, hash_comments: bool, shell: bool = False) -> None:
        self.hash_comments = hash_comments
        self.quotes = "'" if shell else "'\"`"  # a shell expands $NAME in "..." and `...`
        self.stack: list[str] = []  # "`" inside a template literal, "{" inside its ${...}
        self.block_comment = False

    def line(self, text: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(text):
            if self.block_comment:
                end = text.find("*/", i)
                if end == -1:
                    return "".join(out)
                self.block_comment, i = False, end + 2
                continue
            char = text[i]
            if self.stack and self.stack[-1] == "`":
                i = self._template(text, i, out)
                continue
            if char in self.quotes:
                i = self._quoted(text, i, out)
            elif text.startswith("//", i) or (self.hash_comments and char == "#"):
                break
            elif text.startswith("/*", i):
                self.block_comment, i = True, i + 2
            elif char == "/" and not self.hash_comments and self._starts_regex(out):
                i = self._regex(text, i, out)
            elif char == "}" and self.stack and self.stack[-1] == "{":
                self.stack.pop()
                i += 1
            else:
                if char == "{" and self.stack:
                    self.stack.append("{{")
                elif char == "}" and self.stack and self.stack[-1] == "{{":
                    self.stack.pop()
                out.append(char)
                i += 1
        return "".join(out)

    @staticmethod
    def _starts_regex(out: list[str]) -> bool:
        before = "".join(out).rstrip()
        return not before or before[-1] in "(,=:[!&|?{};" or before.endswith("return")

    def _template(self, text: str, i: int, out: list[str]) -> int:
        while i < len(text):
            if text[i] == "\\":
                i += 2
            elif text[i] == "`":
                self.stack.pop()
                out.append(" 0 ")
                return i + 1
            elif text.startswith("${", i):
                self.stack.append("{")
                out.append(" ")
                return i + 2
            else:
                i += 1
        return i

    def _quoted(self, text: str, i: int, out: list[str]) -> int:
        quote = text[i]
        if quote == "`":
            self.stack.append("`")
            return i + 1
        end = i + 1
        while end < len(text) and text[end] != quote:
            end += 2 if text[end] == "\\" else 1
        content = text[i + 1 : end]
        rest = text[end + 1 :].lstrip()
        simple = re.fullmatch(r"[A-Za-z_]\w*", content) is not None
        if simple and "".join(out).rstrip().endswith("[") and rest.startswith("]"):
            while out and out[-1] != "[":
                out.pop()
            out[-1:] = [".", content]
            return text.index("]", end + 1) + 1
        before = "".join(out).rstrip()
        key = simple and rest.startswith(":") and (not before or before[-1] in "{,(")
        out.append(f" {content} " if key else " 0 ")
        return end + 1

    def _regex(self, text: str, i: int, out: list[str]) -> int:
        """Skip a JavaScript regex literal starting at ``i`` (its brackets and quotes are not
        code); a lone ``/`` that is a division stays."""
        end, in_class = i + 1, False
        while end < len(text):
            char = text[end]
            if char == "\\":
                end += 2
                continue
            if char == "/" and not in_class:
                out.append(" 0 ")
                return end + 1 + len(re.match(r"[a-z]*", text[end + 1 :]).group())  # type: ignore[union-attr]
            in_class = (in_class or char == "[") and char != "]"
            end += 1
        out.append("/")
        return i + 1


def names_in(blocks: Iterable[CodeBlock]) -> tuple[set[str], set[str]]:
    """Every name defined and every key written in ``blocks``."""
    defined: set[str] = set()
    keys: set[str] = set()
    for block in blocks:
        for names in block_names(block).values():
            defined |= names.defined
            keys |= names.keys
    return defined, keys
