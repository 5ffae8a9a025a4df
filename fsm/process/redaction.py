"""Showing an agent's command without the secrets of its configuration.

An agent's command comes from ``[agent.<tool>]`` in fsm.toml, and people put tokens there
(``command = ["env", "API_TOKEN=...", "codex", ...]``, ``--api-key=...``). Results of agent runs
are copied by machines into documents, reports and progress files that other people read, so
the executor hands out the command with its secrets masked as ``***``, and nothing else: an
ordinary value (``--approval-mode auto-edit``, ``--sandbox workspace-write``, a model name) is
what a reader needs to understand a failure, and is shown. A secret is

* the value of an option or a ``NAME=value`` item whose name reads as a secret (``--api-key``,
  ``--token``, ``OPENAI_API_KEY=``, ``-c model_providers.x.api_key=...``, ``--password``);
* a value that looks like a token on its own: a known token prefix (``sk-``, ``ghp_``,
  ``xoxb-``, ``AKIA``, ``AIza``, ``glpat-``...) or an unbroken run of 20 or more letters and
  digits mixed (a key, a JWT), where ordinary values are words joined by ``-``, ``_`` or ``.``;
* a ``Bearer ...`` or ``Basic ...`` credential.

The values hidden that way, and the values of the environment variables named like secrets, are
also masked wherever the agent echoes them in its output (:func:`scrubbed`). A path is not a
secret: ``PWD``, ``OLDPWD`` and ``HOME`` (``pwd`` reads as "password" in other names) are never
secret names, and a variable whose value is an absolute path (``DB_PASSWORD_FILE=/run/secrets/db``)
names where a secret is, not the secret, so neither is masked in output: masking them turned
every path an agent printed into ``***``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

__all__ = [
    "MASK",
    "is_secret_name",
    "looks_like_token",
    "redacted_command",
    "scrubbed",
    "secret_environment",
]

MASK = "***"
_OPTION = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
_ASSIGNMENT = re.compile(
    r"^(--?[A-Za-z][A-Za-z0-9_-]*=|[A-Za-z_][A-Za-z0-9_.\-]*=)(.+)$", re.DOTALL
)
_SECRET_NAME = re.compile(
    r"(?:^|[^a-z])(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|apikey|access[_-]?key|"
    r"private[_-]?key|client[_-]?secret|credentials?|authorization|auth[_-]?token|cookie|"
    r"session[_-]?key|bearer)(?:$|[^a-z])",
    re.IGNORECASE,
)
_TOKEN_PREFIX = re.compile(
    r"^(?:sk|pk|rk)-[A-Za-z0-9_-]{6,}|^(?:ghp|gho|ghs|ghu|ghr|github_pat)_[A-Za-z0-9_]{6,}"
    r"|^xox[abprs]-[A-Za-z0-9-]{6,}|^AKIA[A-Z0-9]{12,}|^AIza[A-Za-z0-9_-]{20,}"
    r"|^glpat-[A-Za-z0-9_-]{10,}"
)
_CREDENTIAL = re.compile(r"\b(Bearer|Basic)\s+(\S+)")
_SHORTEST_SECRET = 4
"""Hidden values shorter than this are not searched for in output (they would hide words)."""
_SHORTEST_ENV_SECRET = 8
_PATH_NAMES = frozenset({"PWD", "OLDPWD", "HOME"})
"""Variables the shell sets to folders, whatever their names look like."""


def is_secret_name(name: str) -> bool:
    """True when ``name`` (an option, a variable, a config key) names a secret."""
    bare = name.lstrip("-")
    return bare.upper() not in _PATH_NAMES and _SECRET_NAME.search(bare) is not None


def looks_like_token(value: str) -> bool:
    """True when ``value`` looks like a key or token whatever it is named."""
    if _TOKEN_PREFIX.match(value):
        return True
    longest = max(re.split(r"[-_.:/\s,]", value), key=len, default="")
    return (
        len(longest) >= 20
        and re.fullmatch(r"[A-Za-z0-9+=]+", longest) is not None
        and any(c.isdigit() for c in longest)
        and any(c.isalpha() for c in longest)
    )


def redacted_command(
    argv: Sequence[str], placeholders: Mapping[str, str]
) -> tuple[tuple[str, ...], list[str]]:
    """The command as it may be shown, and the values it hides.

    ``placeholders`` maps the values that replaced placeholders (the prompt, the prompt file)
    back to their placeholder names, which are shown instead.
    """
    if not argv:
        return (), []
    shown = [argv[0]]
    hidden: list[str] = []
    secret_value_next = False
    for part in argv[1:]:
        if part in placeholders:
            shown.append(placeholders[part])
            secret_value_next = False
            continue
        if _OPTION.match(part):
            shown.append(part)
            secret_value_next = is_secret_name(part)
            continue
        assignment = _ASSIGNMENT.match(part)
        if secret_value_next or looks_like_token(part):
            shown.append(MASK)
            hidden.append(part)
        elif assignment and (
            is_secret_name(assignment.group(1)) or looks_like_token(assignment.group(2))
        ):
            shown.append(assignment.group(1) + MASK)
            hidden.append(assignment.group(2))
        else:
            credential = _CREDENTIAL.search(part)
            if credential:
                shown.append(part.replace(credential.group(2), MASK))
                hidden.append(credential.group(2))
            else:
                shown.append(part)
        secret_value_next = False
    return tuple(shown), hidden


def secret_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment variables named like secrets (``OPENAI_API_KEY``...),
    which an agent has and may echo; not those that are absolute paths."""
    source = os.environ if environ is None else environ
    return [
        value
        for name, value in source.items()
        if is_secret_name(name) and len(value) >= _SHORTEST_ENV_SECRET and not os.path.isabs(value)
    ]


def scrubbed(text: str, hidden: Sequence[str]) -> str:
    """``text`` with every hidden value of at least four characters replaced by the mask."""
    for value in sorted(hidden, key=len, reverse=True):
        if len(value) >= _SHORTEST_SECRET and value in text:
            text = text.replace(value, MASK)
    return text
