"""Workspace configuration (``fsm.toml``) and ``KEY=VALUE`` inputs.

``fsm.toml`` in the workspace may hold ``[machine.<name>]`` option tables,
``[agent.<tool>]`` tables (``command`` and optional ``analysis_command``, argv lists in which
``{prompt}`` becomes the prompt as one argument, and optional ``output``: what the agent prints,
``text`` unless it names one of the JSON formats of :data:`fsm.process.agents.OUTPUT_FORMATS`), a
``[machines]`` table (the workspace's own machines: a name for each machine file, a path relative
to the workspace: :mod:`fsm.model.discovery`) and a ``[store]`` table (``name``: the store that
keeps the instances, and that store's own settings: :mod:`fsm.store.selection`). Options are
layered: the machine's option model defaults, then its fsm.toml table, then ``-o KEY=VALUE``; the
result is validated by the machine's options model, and every problem is reported in one error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fsm.base import jsonio
from fsm.base.errors import DocumentInputError, OptionsError
from fsm.base.reading import FileTooLargeError, read_limited
from fsm.model.definition import did_you_mean, format_location

if TYPE_CHECKING:  # imported where an [agent.TOOL] table is read: fsm status needs no executor
    from fsm.process.executor import AgentCommand

__all__ = [
    "MAX_TOML_BYTES",
    "NoOptions",
    "WorkspaceConfig",
    "assignment_texts",
    "load_config",
    "parse_assignments",
    "parse_value",
    "resolve_options",
    "set_dotted",
    "write_space",
]


MAX_TOML_BYTES = 1024 * 1024
"""fsm.toml larger than this is refused (a cloned repository may ship one; they are tiny)."""

# tomllib's messages end in "(at line 3, column 5)" or "(at end of document)".
_TOML_WHERE = re.compile(r"(.*?) \((?:at line (\d+), column (\d+)|at end of document)\)", re.S)


class NoOptions(BaseModel):
    """The options model of a machine that declares none: accepts no keys."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class WorkspaceConfig:
    """What ``fsm.toml`` says."""

    machines: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    agents: Mapping[str, AgentCommand] = field(default_factory=dict)
    store: Mapping[str, Any] = field(default_factory=dict)
    """The ``[store]`` table (see :mod:`fsm.store.selection`)."""
    definitions: Mapping[str, str] = field(default_factory=dict)
    """The ``[machines]`` table: machine names and the paths of their files (or folders)."""


def load_config(workspace: Path) -> WorkspaceConfig:
    """Read ``workspace/fsm.toml`` (an absent file is an empty configuration)."""
    path = workspace / "fsm.toml"
    try:
        text = read_limited(path, MAX_TOML_BYTES).decode("utf-8")
    except FileNotFoundError:
        return WorkspaceConfig()
    except FileTooLargeError as exc:
        raise OptionsError(f"{path}: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionsError(f"{path}: cannot read: {exc}") from exc
    data = _parse_toml(path, text)
    problems: list[str] = []
    unknown = sorted(set(data) - {"machine", "machines", "agent", "store"})
    problems += [
        f"unknown table '{name}' (use [machine.NAME], [machines], [agent.TOOL] or [store])"
        for name in unknown
    ]
    definitions = _definitions(data.get("machines", {}), problems)
    machines = data.get("machine", {})
    if not isinstance(machines, dict) or not all(isinstance(v, dict) for v in machines.values()):
        problems.append("[machine.NAME] entries must be tables")
        machines = {}
    agent_tables = data.get("agent", {})
    if not isinstance(agent_tables, dict):
        problems.append("[agent.TOOL] entries must be tables")
        agent_tables = {}
    agents: dict[str, AgentCommand] = {}
    for tool, table in agent_tables.items():
        command = _agent(tool, table, problems)
        if command is not None:
            agents[tool] = command
    store = data.get("store", {})
    if not isinstance(store, dict):
        problems.append("[store] must be a table")
        store = {}
    elif not isinstance(store.get("name", ""), str):
        problems.append("[store] name must be a string (the store's name: 'files', ...)")
    space = store.get("space", "x")
    if not isinstance(space, str) or not space or "/" in space or len(space) > 200:
        problems.append(
            "[store] space must be a name without '/' (what the workspace's instances are kept "
            "under in a shared store: 'fsm store init' writes one when there is none)"
        )
    if problems:
        # every problem of the file at once, so that one edit fixes them all
        raise OptionsError(f"{path}: " + "; ".join(problems))
    return WorkspaceConfig(machines, agents, store, definitions)


_STORE_HEADER = re.compile(r"^[ \t]*\[[ \t]*store[ \t]*\][ \t]*(#.*)?$", re.M)


def write_space(workspace: Path) -> str:
    """Give the workspace an identity in shared stores: a new ``space`` (its folder's name and
    8 random hex digits) written into ``[store]`` of its fsm.toml (made when absent; the line
    is added under the table's header, the rest of the file kept byte for byte); return it.
    OptionsError when fsm.toml names one already or cannot take the line."""
    import secrets

    from fsm.base.files import atomic_write_bytes

    path = workspace / "fsm.toml"
    if load_config(workspace).store.get("space") is not None:
        raise OptionsError(f"{path}: [store] names a space already")
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", workspace.name).strip("-.")[:40] or "workspace"
    space = f"{stem}-{secrets.token_hex(4)}"
    try:
        text = read_limited(path, MAX_TOML_BYTES).decode("utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionsError(f"{path}: cannot read: {exc}") from exc
    line = f'space = "{space}"  # this project\'s identity in shared stores: commit it\n'
    header = _STORE_HEADER.search(text)
    if header is not None:
        cut = text.index("\n", header.end()) + 1 if "\n" in text[header.end() :] else len(text)
        updated = text[:cut] + ("" if text[:cut].endswith("\n") else "\n") + line + text[cut:]
    else:
        updated = text + ("\n" if text and not text.endswith("\n") else "")
        updated += ("\n" if text else "") + "[store]\n" + line
    atomic_write_bytes(path, updated.encode("utf-8"), root=workspace)
    if load_config(workspace).store.get("space") != space:
        atomic_write_bytes(path, text.encode("utf-8"), root=workspace)
        raise OptionsError(
            f'{path}: could not add space = "{space}" to its [store] table: add it by hand'
        )
    return space


_MACHINE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _definitions(table: Any, problems: list[str]) -> dict[str, str]:
    """The ``[machines]`` table's names and paths; its problems are added to ``problems``."""
    if not isinstance(table, dict):
        problems.append('[machines] must be a table of names and paths (counter = "machine.yaml")')
        return {}
    found: dict[str, str] = {}
    for name, where in table.items():
        if isinstance(where, dict):
            problems.append(
                f"[machines] {name} must be the path of a machine file "
                f"(a machine's options go in [machine.{name}])"
            )
        elif not isinstance(where, str) or not where or "\0" in where:
            problems.append(f"[machines] {name} must be the path of a machine file (a string)")
        elif not _MACHINE_NAME.fullmatch(name):
            problems.append(
                f"[machines] '{name}' is not a machine name (a letter, then letters, digits, "
                "'-' or '_')"
            )
        else:
            found[name] = where
    return found


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    """``text`` parsed; a problem is one line naming the file and, when known, the line."""
    import tomllib  # only a workspace with fsm.toml needs it

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_WHERE.fullmatch(str(exc))
        if found is None:
            raise OptionsError(f"{path}: malformed TOML: {exc}") from exc
        message, line, column = found.groups()
        where = f"{path}:{line}" if line else str(path)
        at = f" (column {column})" if column else " (at the end of the file)"
        raise OptionsError(f"{where}: malformed TOML: {message}{at}") from exc
    except RecursionError as exc:  # tomllib nests inline tables by recursion
        raise OptionsError(f"{path}: malformed TOML: values nested too deeply") from exc
    except ValueError as exc:  # Python's digit limit on integers
        raise OptionsError(f"{path}: malformed TOML: a number too long to read") from exc


def _agent(tool: str, table: Any, problems: list[str]) -> AgentCommand | None:
    """The agent command of ``[agent.<tool>]``; its problems are added to ``problems``."""
    from fsm.process.agents import OUTPUT_FORMATS
    from fsm.process.executor import AgentCommand

    if not isinstance(table, dict):
        problems.append(f"[agent.{tool}] must be a table")
        return None
    before = len(problems)
    problems += [
        f"[agent.{tool}] has unknown key '{key}'"
        for key in sorted(set(table) - {"command", "analysis_command", "output"})
    ]
    output = table.get("output", "text")
    if output not in OUTPUT_FORMATS:
        listed = ", ".join(f'"{name}"' for name in OUTPUT_FORMATS)
        problems.append(f"[agent.{tool}] output must be one of {listed}, not {output!r}")
    command = _argv(tool, "command", table.get("command"), problems)
    if "command" not in table:
        problems.append(f'[agent.{tool}] needs command = ["program", ..., "{{prompt}}"]')
    analysis = _argv(tool, "analysis_command", table.get("analysis_command"), problems)
    if len(problems) > before or command is None:
        return None
    return AgentCommand(command, analysis, output)


def _argv(tool: str, key: str, value: Any, problems: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        problems.append(f"[agent.{tool}] {key} must be a non-empty list of strings")
        return None
    return tuple(value)


def parse_value(text: str) -> Any:
    """JSON when ``text`` parses as JSON, else the text itself.

    JSON beyond fsm's limits (nested too deep, a number too long) raises JsonError.
    """
    try:
        return jsonio.loads(text)
    except jsonio.JsonError as exc:
        if exc.malformed:
            return text
        raise


def set_dotted(target: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts, creating the intermediate ones."""
    parts = path.split(".")
    for part in parts[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = {}
            target[part] = child
        target = child
    target[parts[-1]] = value


def parse_assignments(items: Iterable[str], *, what: str) -> dict[str, Any]:
    """``["a.b=1", "c=x"]`` -> ``{"a": {"b": 1}, "c": "x"}``; a malformed item is an input error."""
    result: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            error = OptionsError if what == "option" else DocumentInputError
            raise error(f"invalid {what} '{item}': expected KEY=VALUE")
        try:
            parsed = parse_value(value)
        except jsonio.JsonError as exc:
            error = OptionsError if what == "option" else DocumentInputError
            raise error(f"invalid {what} '{key}': {exc}") from exc
        set_dotted(result, key, parsed)
    return result


def assignment_texts(items: Iterable[str]) -> dict[str, str]:
    """``["a=1", "b.c=x"]`` -> ``{"a": "1"}``: the text typed for each top-level key."""
    texts: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if sep and key.strip() and "." not in key:
            texts[key.strip()] = value
    return texts


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, Mapping):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_nul(item) for item in value)
    return False


def resolve_options(
    model: type[BaseModel],
    machine: str,
    table: Mapping[str, Any],
    overrides: Mapping[str, Any],
    texts: Mapping[str, str] | None = None,
    misplaced: Callable[[str], str] | None = None,
) -> BaseModel:
    """Validate fsm.toml's table for ``machine`` overlaid with ``-o`` overrides.

    ``-o`` values are parsed as JSON when they parse; when such a value is refused and the text
    typed for it is accepted (``-o test_command=true`` for a text option), the text wins. Every
    problem says where the value came from; an unknown key gets ``misplaced(key)`` (where it
    belongs instead) or a did-you-mean and the list of the options.
    """
    merged = {**table, **overrides}
    with_nul = [key for key, value in merged.items() if _holds_nul(value)]
    if with_nul:
        # No path, argv or environment can hold NUL: refused here, not by the first system call
        # that meets it (an internal error there).
        problems = [
            f"option '{key}' ({'-o' if key in overrides else f'fsm.toml [machine.{machine}]'}) "
            "contains a NUL character, which no path or command can hold"
            for key in with_nul
        ]
        raise OptionsError(f"options of machine '{machine}': " + "; ".join(problems))
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        refused = {str(e["loc"][0]) for e in exc.errors(include_url=False) if e["loc"]}
        retry = {
            key: texts[key]
            for key in refused
            if texts and key in texts and merged.get(key) != texts[key]
        }
        if retry:
            try:
                return model.model_validate({**merged, **retry})
            except ValidationError:
                pass
        problems = []
        known = [info.alias or name for name, info in model.model_fields.items()]
        for error in exc.errors(include_url=False):
            key = str(error["loc"][0]) if error["loc"] else ""
            source = "-o" if key in overrides else f"fsm.toml [machine.{machine}]"
            where = format_location(error["loc"]) or "options"
            if error["type"] != "extra_forbidden":
                problems.append(f"{where} ({source}): {error['msg']}")
                continue
            hint = misplaced(key) if misplaced is not None else ""
            listed = ", ".join(known) or "none"
            problems.append(
                hint
                or f"unknown option '{key}' ({source}){did_you_mean(key, known)}; the options "
                f"of {machine} are: {listed}"
            )
        raise OptionsError(f"options of machine '{machine}': " + "; ".join(problems)) from exc
