"""The static checks of ``fsm check``: everything wrong with a machine, reported at once.

A machine file is checked in three layers, and every layer reports all it finds:

1. reading: a file that cannot be read at all (missing, no permission, not UTF-8, larger than
   1 MiB) is the one finding of its report, and the report is *unreadable* (exit 2); so is YAML
   that does not parse or breaks a limit of :mod:`fsm.model._yaml_limits` (with its line);
2. the definition: duplicate keys, schema problems, a module that does not import, and names that
   do not resolve (states, guards, actions, hooks, models), as :mod:`fsm.model.definition` and
   :mod:`fsm.model.machine` find them when a machine is loaded;
3. the graph (:mod:`fsm.model._check_rules` on the view of :mod:`fsm.model._check_graph`):
   unreachable states, trap states, final states with outgoing transitions, states that cannot
   finish, ambiguous and shadowed transitions, cycles of automatic transitions that no budget guard
   bounds and no ``unbounded:`` reason explains, and final states tagged neither ``success`` nor
   ``failure`` (a warning).

Findings are ordered by line and print as ``path: level: message``::

    machines/demo/machine.yaml:14: error: transitions[3].dest: unknown state 'devlop'
    (did you mean 'develop'?)

When the YAML is broken, its problems are all the report holds. When the schema is broken, the
valid parts of the definition are still checked for names (a misspelt key and a misspelt state
are reported in one run): what does not validate is replaced by values that name nothing (see
:func:`_salvaged`); the graph rules wait for a valid schema, since their answers would echo the
problems already reported. Otherwise every layer runs, even when some names do not resolve; an
inputs model naming a field fsm owns is a finding too. A report's exit code is 0 when clean, 1
with findings of any level, 2 when unreadable (``fsm check`` prints those on stderr).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fsm.base.errors import FsmError
from fsm.model import discovery
from fsm.model._check_graph import Finding, finding_line, graph_of
from fsm.model._check_rules import check_graph
from fsm.model.definition import MachineSpec, Problem, parse_definition
from fsm.model.machine import Machine, import_registry, resolve
from fsm.model.registry import Registry
from fsm.model.yaml_loader import LoadedYaml, read_yaml_file

__all__ = ["CheckReport", "Finding", "check_all", "check_machine", "check_target"]


@dataclass
class CheckReport:
    """The findings of one target; ``readable`` is False when its file could not be read."""

    target: str
    findings: list[Finding]
    readable: bool = True

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings (errors or warnings), 2 the file could not be read."""
        if not self.readable:
            return 2
        return 1 if self.findings else 0


def check_machine(machine: Machine) -> list[Finding]:
    """The graph checks of a machine that loaded (its names already resolved)."""
    graph = graph_of(machine.spec, machine.registry.guards, machine.lines, _display(machine.path))
    return _by_line(check_graph(graph))


def check_target(target: str) -> CheckReport:
    """Check a registered machine (by name) or a machine file (or its folder) and report all."""
    try:
        entry = discovery.find_machine(target)
    except FsmError as exc:
        return _unreadable(target, target, str(exc))
    file = _display(entry.path)
    try:
        text = read_yaml_file(entry.path)
    except (OSError, ValueError) as exc:
        return _unreadable(target, file, f"cannot read machine file: {_reason(exc)}")
    registered_as = entry.name if entry.source != str(entry.path) else None
    findings, readable = _check_text(text, entry.path, file, registered_as)
    return CheckReport(target, findings, readable)


def check_all() -> list[CheckReport]:
    """Check every registered machine."""
    try:
        names = list(discovery.registered_machines())
        clashes = discovery.name_clashes()
    except FsmError as exc:
        # A broken plugin makes the registry itself unreadable: say so instead of crashing.
        return [_unreadable(getattr(exc, "source", "machines"), "machines", str(exc))]
    reports = [check_target(name) for name in names]
    # A name registered twice is an error of the installation, reported under that name.
    reports += [
        CheckReport(name, [Finding("entry points", "error", message, "name-clash")])
        for name, message in sorted(clashes.items())
    ]
    return reports


def _check_text(
    text: str, path: Path, file: str, registered_as: str | None
) -> tuple[list[Finding], bool]:
    """The findings, and False when the YAML could not be read at all."""
    spec, loaded, problems = parse_definition(text)
    # parse_definition gives YAML problems no location; schema problems always have one.
    findings = [_finding(p, file, "schema" if p.location else "yaml") for p in problems]
    if loaded is None:
        return _by_line(findings), False
    with_graph = spec is not None
    if spec is None:
        # Schema problems: check the names of what is valid too (a key and a state name
        # misspelt are reported together), but not the graph, whose answers would echo them.
        spec = _salvaged(loaded.data) if not any(not p.location for p in problems) else None
        if spec is None:
            return _by_line(findings), True
    registry, import_problems = import_registry(spec, path)
    findings += [_finding(p, file, "import") for p in import_problems]
    if registry is None:
        # Without the module only the state names can be checked: resolve them against an
        # empty registry and keep just those problems (every other name would be "unknown").
        _, state_problems = resolve(spec, Registry(), path, loaded)
        findings += [_finding(p, file, _kind(p)) for p in state_problems if _is_state(p)]
    else:
        _, name_problems = resolve(spec, registry, path, loaded)
        findings += [_finding(p, file, _kind(p)) for p in name_problems]
    if registered_as is not None and spec.name != registered_as and with_graph:
        line = loaded.line_of(("name",)) if loaded is not None else None
        message = f"name: is '{spec.name}', but the machine is registered as '{registered_as}'"
        findings.append(Finding(_at(file, line), "error", message, "registered-name"))
    if with_graph:
        guards = registry.guards if registry is not None else None
        findings += check_graph(graph_of(spec, guards, loaded, file))
        findings += _inputs_findings(spec, registry, loaded, file)
    return _by_line(findings), True


def _inputs_findings(
    spec: MachineSpec, registry: Registry | None, lines: LoadedYaml | None, file: str
) -> list[Finding]:
    """An inputs model naming a field fsm owns (the state, the control status, timestamps):
    ``fsm new`` refuses those fields, so the input could never be given."""
    model = registry.inputs_models.get(spec.inputs) if registry and spec.inputs else None
    if model is None:
        return []
    from fsm.model.inputs import engine_owned_fields

    owned = engine_owned_fields(spec)
    line = lines.line_of(("inputs",)) if lines is not None else None
    return [
        Finding(
            _at(file, line),
            "error",
            f"inputs: {spec.inputs} names '{key}', which is {owned[key]}: no creation input "
            "may set it",
            "owned-input",
        )
        for key in (info.alias or name for name, info in model.model_fields.items())
        if key in owned
    ]


_PLACEHOLDERS: dict[str, dict[str, Any]] = {
    "transitions": {
        "event": "invalid",
        "source": "*",
        "dest": "=",
        "guards": [],
        "actions": [],
        "description": "-",
    },
    "states": {"description": "-", "final": False, "tags": [], "status": None},
}
"""What a key of a transition or state that does not validate is replaced with when a definition
with schema problems is salvaged: values that name nothing, so they add no finding."""

_TOP_LEVEL: dict[str, Any] = {
    "name": "invalid",
    "version": 1,
    "description": "-",
    "options": None,
    "inputs": None,
    "state": {"field": "state"},
    "storage": {"document": "{id}.json"},
    "control": None,
    "external_fields": [],
    "exclusive": [],
    "hooks": {},
    "transitions": [],
}
"""Top-level keys a salvaged definition may replace (``module``, ``document``, ``initial`` and
``states`` are what its names are checked against: without them nothing is salvaged)."""


def _salvaged(data: Any) -> MachineSpec | None:
    """A spec made of the valid parts of ``data`` (a definition with schema problems), whose
    names can then be checked; None when too little of it is valid."""
    if not isinstance(data, dict):
        return None
    current: dict[str, Any] = copy.deepcopy(data)
    for _ in range(8):  # each round repairs what the previous one revealed
        try:
            return MachineSpec.model_validate(current)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        if not all(_repair(current, error["loc"], error["type"]) for error in errors):
            return None
    return None


def _repair(data: dict[str, Any], loc: tuple[int | str, ...], kind: str) -> bool:
    """Replace or drop the value at ``loc`` so that it validates; False when it cannot be."""
    top = loc[0] if loc else None
    if not isinstance(top, str):
        return False
    if len(loc) >= 2 and top in _PLACEHOLDERS and isinstance(data.get(top), list | dict):
        container = data[top]
        index = loc[1]
        try:
            unit = container[index]
        except (KeyError, IndexError, TypeError):
            return False
        if not isinstance(unit, dict) or len(loc) == 2:
            if top == "states":
                container[index] = dict(_PLACEHOLDERS["states"])
            else:
                container[index] = dict(_PLACEHOLDERS["transitions"])
            return True
        key = loc[2]
        if kind == "extra_forbidden":
            unit.pop(key, None)
        elif isinstance(key, str) and key in _PLACEHOLDERS[top]:
            unit[key] = _PLACEHOLDERS[top][key]
        else:
            return False
        return True
    if kind == "extra_forbidden" and len(loc) == 1:
        data.pop(top, None)
        return True
    if top in _TOP_LEVEL:
        data[top] = copy.deepcopy(_TOP_LEVEL[top])
        return True
    return False


def _is_state(problem: Problem) -> bool:
    return problem.message.startswith("unknown state ")


def _kind(problem: Problem) -> str:
    """The check id of a name-resolution problem of :func:`fsm.model.machine.resolve`."""
    if _is_state(problem):
        return "unknown-state"
    if problem.message.startswith("unknown "):
        return "unresolved-name"
    return "schema"


def _finding(problem: Problem, file: str, check: str) -> Finding:
    message = f"{problem.location}: {problem.message}" if problem.location else problem.message
    return Finding(_at(file, problem.line), "error", message, check)


def _unreadable(target: str, path: str, message: str) -> CheckReport:
    return CheckReport(target, [Finding(path, "error", message, "unreadable")], readable=False)


def _reason(exc: OSError | ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start}: {exc.reason})"
    return getattr(exc, "strerror", None) or str(exc)


def _at(file: str, line: int | None) -> str:
    return f"{file}:{line}" if line is not None else file


def _by_line(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in file order; those without a line (the whole file) come first."""
    return sorted(findings, key=finding_line)


def _display(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it (shorter to read)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
