"""A small lexer for the code blocks of skills: which characters are comments and strings.

The rules look for tokens (``try``, ``catch``, ``validate``, ``Task(``) in code; a token in a
comment (``# try``) or inside a string (``grep "Task("``) is not code and must not count. This
lexer walks a block once, keeping the state of strings that span lines (JavaScript template
literals, Python triple quotes, shell quotes), and gives for every line:

* ``code``: the line without its comment (strings kept: ``ccw cli`` inside a ``Bash('...')``
  string is still a command);
* ``skeleton``: the same with the contents of every string blanked, for structure (brackets,
  ``try``/``catch`` keywords, calls written in the code itself).

Languages: C-like comments (``//``, ``/* */``) for JavaScript and its relatives, ``#`` comments
for shell, Python, YAML and the like; an untagged block gets both. Anything else is read
without comments. It is a lexer for judging, not a parser: malformed code gives a best effort.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["HASH_COMMENTS", "SLASH_COMMENTS", "Lexed", "lex"]

SLASH_COMMENTS = frozenset(
    {"js", "javascript", "ts", "typescript", "jsx", "tsx", "mjs", "cjs", "java", "c", "cpp",
     "go", "rust", "rs", "kotlin", "swift", "json5", "jsonc", ""}
)  # fmt: skip
"""Language tags whose comments are ``//`` and ``/* */``."""
HASH_COMMENTS = frozenset(
    {"bash", "sh", "shell", "zsh", "console", "python", "py", "yaml", "yml", "toml", "ruby",
     "rb", "perl", "powershell", "ps1", "r", "make", "makefile", "dockerfile", ""}
)  # fmt: skip
"""Language tags whose comments start with ``#``."""

_PY = frozenset({"python", "py"})
_SHELL = frozenset({"bash", "sh", "shell", "zsh", "console", ""})


@dataclass(frozen=True)
class Lexed:
    """One line of a block: its code (comment removed) and its skeleton (strings blanked)."""

    code: str
    skeleton: str


def lex(lines: Sequence[str], lang: str) -> list[Lexed]:
    """Every line of a block written in ``lang``, with comments removed and strings marked."""
    slash, hashed = lang in SLASH_COMMENTS, lang in HASH_COMMENTS
    quotes = "'\"`" if lang not in _PY else "'\""
    state: str | None = None  # the open quote ('"', "'", '`', '"""', "'''") or "/*"
    result: list[Lexed] = []
    for line in lines:
        code: list[str] = []
        skeleton: list[str] = []
        index = 0
        while index < len(line):
            char = line[index]
            rest = line[index:]
            if state == "/*":
                end = line.find("*/", index)
                if end == -1:
                    index = len(line)
                    break
                index = end + 2
                state = None
                continue
            if state is not None:
                if char == "\\" and not (state == "'" and lang in _SHELL):
                    escaped = line[index : index + 2]
                    code.append(escaped)
                    skeleton.append(" " * len(escaped))
                    index += 2
                    continue
                if rest.startswith(state):
                    code.append(state)
                    skeleton.append(state)
                    index += len(state)
                    state = None
                    continue
                code.append(char)
                skeleton.append(" ")
                index += 1
                continue
            if slash and rest.startswith("//") and not _in_url(line, index):
                break
            if slash and rest.startswith("/*"):
                state = "/*"
                index += 2
                continue
            if hashed and char == "#" and _hash_comment(line, index, lang):
                break
            if char in quotes:
                triple = rest[:3] if lang in _PY and rest[:3] in ('"""', "'''") else ""
                state = triple or char
                code.append(state)
                skeleton.append(state)
                index += len(state)
                continue
            code.append(char)
            skeleton.append(char)
            index += 1
        if state is not None and state in "'\"" and lang not in _SHELL:
            state = None  # an unclosed one-line string ends with its line
        result.append(Lexed("".join(code).rstrip(), "".join(skeleton).rstrip()))
    return result


def _in_url(line: str, index: int) -> bool:
    """Whether the ``//`` at ``index`` belongs to a URL (``https://``) rather than a comment."""
    return index > 0 and line[index - 1] == ":"


def _hash_comment(line: str, index: int, lang: str) -> bool:
    """Whether the ``#`` at ``index`` starts a comment: after a space or at the start of the
    line (``${#list[@]}`` is not one), not a shebang, and in an untagged block only at the
    start of the line (``# BAD``), where ``//`` comments are read too."""
    if index and line[index - 1] not in " \t;":
        return False
    if index == 0 and line.startswith("#!") and lang in _SHELL:
        return False
    return lang != "" or not line[:index].strip()
