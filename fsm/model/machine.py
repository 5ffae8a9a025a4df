"""A machine: its definition with every name resolved to a Python object.

:func:`load_machine` reads a machine file, imports its module, and resolves the document model,
options model, codec, hooks, guards and actions by name. Every reference problem is collected and
raised at once as a :class:`~fsm.base.errors.DefinitionError`; nothing is resolved later, at fire
time.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from fsm.base.errors import DefinitionError
from fsm.base.log import apply_pending_configuration
from fsm.base.update import MISSING, get_path
from fsm.model.config import NoOptions
from fsm.model.definition import (
    MachineSpec,
    Problem,
    StateSpec,
    TransitionSpec,
    did_you_mean,
    format_location,
    guard_name,
    read_definition,
)
from fsm.model.identity import Identity, code_digest, graph_digest
from fsm.model.migrations import chain_from
from fsm.model.outcome import Verdict
from fsm.model.paths import annotation_at, value_at
from fsm.model.registry import Action, Codec, GuardInfo, Hooks, Registry, Update
from fsm.model.yaml_loader import LoadedYaml

__all__ = [
    "EventOption",
    "FieldCodec",
    "GuardRef",
    "Machine",
    "Transition",
    "event_options",
    "import_registry",
    "load_machine",
    "resolve",
]


@dataclass(frozen=True)
class GuardRef:
    """A guard as used on a transition: its name, negation and the registered function."""

    name: str
    negated: bool
    info: GuardInfo

    @property
    def label(self) -> str:
        """``name`` or ``not name``."""
        return f"not {self.name}" if self.negated else self.name

    def holds(self, doc: Any, ctx: Any) -> bool:
        """Evaluate the guard (negated when declared with ``not``)."""
        return bool(self.info.func(doc, ctx)) != self.negated


@dataclass(frozen=True)
class Transition:
    """A transition with its sources expanded and its names resolved."""

    index: int
    event: str
    sources: tuple[str, ...]
    dest: str | None
    guards: tuple[GuardRef, ...]
    actions: tuple[tuple[str, Action], ...]
    auto: bool
    description: str

    def dest_from(self, source: str) -> str:
        """The destination when taken from ``source`` (``"="`` stays in place)."""
        return source if self.dest is None else self.dest


class FieldCodec:
    """The FSM state kept in one dotted field of the document."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self, doc: Any) -> str:
        """The field's value ("" when absent)."""
        value = value_at(doc, self.path)
        return "" if value is None else str(value)

    def write(self, doc: Any, state: str) -> Update:
        """Set the field to ``state``."""
        return {self.path: state}


@dataclass(frozen=True)
class MachineCommand:
    """A command of the machine's own, its handler and inputs model resolved."""

    name: str
    description: str
    handler: Callable[..., Any]
    inputs_model: type[BaseModel] | None


@dataclass
class Machine:
    """A loaded machine: definition, resolved names, and indexes the engine uses."""

    spec: MachineSpec
    path: Path
    registry: Registry
    document_model: type[BaseModel]
    options_model: type[BaseModel]
    inputs_model: type[BaseModel] | None
    codec: Codec
    hooks: Hooks
    transitions: list[Transition]
    lines: LoadedYaml | None = None
    control_actions: dict[str, tuple[tuple[str, Action], ...]] = field(default_factory=dict)
    """The actions of each control command, resolved at load like the transitions' actions."""
    commands: dict[str, MachineCommand] = field(default_factory=dict)
    """The machine's own commands (``commands:`` of machine.yaml), resolved at load."""

    @property
    def name(self) -> str:
        """The machine's name."""
        return self.spec.name

    @property
    def states(self) -> dict[str, StateSpec]:
        """States by name, in the order written."""
        return self.spec.states

    def status_of(self, data: Mapping[str, Any]) -> str | None:
        """The control status in the document ``data``, as text (None for a machine without a
        control block, or when the field is absent): what the engine and ``fsm ls`` read."""
        control = self.spec.control
        if control is None:
            return None
        value = get_path(data, control.field)
        return None if value is MISSING or value is None else str(value)

    def is_final(self, state: str) -> bool:
        """True for a final state."""
        spec = self.spec.states.get(state)
        return spec is not None and spec.final

    def is_success(self, state: str) -> bool:
        """True for a final state tagged ``success``."""
        spec = self.spec.states.get(state)
        return spec is not None and spec.final and "success" in spec.tags

    @cached_property
    def identity(self) -> Identity:
        """Its version, graph digest and code digest (:mod:`fsm.model.identity`)."""
        spec = self.spec
        code = code_digest(spec.module, self.path)
        return Identity(spec.version, graph_digest(spec), code)

    @cached_property
    def document_keys(self) -> frozenset[str]:
        """The top-level keys the document model defines (field names and aliases)."""
        keys: set[str] = set()
        for name, info in self.document_model.model_fields.items():
            keys.add(name)
            if info.alias:
                keys.add(info.alias)
            if isinstance(info.validation_alias, str):
                keys.add(info.validation_alias)
        return frozenset(keys)

    def verdict(self, state: str, doc: Any) -> Verdict | None:
        """Whether an instance in ``state`` with document ``doc`` reached the machine's goal.

        None while ``state`` is not final. The machine's ``outcome`` hook judges when it has
        one (a hook that fails judges nothing: the verdict is a failure naming the error, so a
        broken hook never reports success); otherwise the state's ``success`` tag decides.
        """
        if not self.is_final(state):
            return None
        hook = self.hooks.outcome
        if hook is None:
            success = self.is_success(state)
            kind = "success" if success else "failure"
            return Verdict(success, f"ended in {kind} state '{state}'")
        try:
            verdict = hook(doc)
        except Exception as exc:
            return Verdict(
                False,
                f"the outcome of state '{state}' could not be judged: {type(exc).__name__}: {exc}",
            )
        if not isinstance(verdict, Verdict):
            return Verdict(
                False,
                f"the outcome hook of '{self.name}' returned {type(verdict).__name__}, "
                "not a Verdict",
            )
        return verdict

    def transitions_from(self, state: str, event: str | None = None) -> list[Transition]:
        """Transitions leaving ``state`` (for ``event`` when given), in declared order."""
        return [t for t in self._by_source.get(state, ()) if event is None or t.event == event]

    def events_from(self, state: str) -> list[str]:
        """Distinct events leaving ``state``, in declared order."""
        return list(dict.fromkeys(t.event for t in self._by_source.get(state, ())))

    def __post_init__(self) -> None:
        by_source: dict[str, list[Transition]] = {}
        for transition in self.transitions:
            for source in transition.sources:
                by_source.setdefault(source, []).append(transition)
        self._by_source = by_source


@dataclass(frozen=True)
class EventOption:
    """An event leaving a state, and whether it could fire now."""

    event: str
    description: str
    enabled: bool
    auto: bool


def event_options(machine: Machine, state: str, doc: Any, ctx: Any) -> list[EventOption]:
    """Each event leaving ``state`` once, in declared order.

    An event is enabled when the guards of any of its transitions hold (a guard that raises
    counts as not holding); its description is that of its first enabled transition, else of
    its first transition.
    """
    options: dict[str, EventOption] = {}
    for transition in machine.transitions_from(state):
        known = options.get(transition.event)
        if known is not None and known.enabled:
            continue
        tctx = ctx.for_transition(transition.event, state, transition.dest_from(state))
        try:
            enabled = all(guard.holds(doc, tctx) for guard in transition.guards)
        except Exception:  # a raising guard only means "not enabled" here
            enabled = False
        if known is None or enabled:
            options[transition.event] = EventOption(
                transition.event, transition.description, enabled, transition.auto
            )
    return list(options.values())


def load_machine(path: Path | str, *, expected_name: str | None = None) -> Machine:
    """Load the machine file at ``path``; raise DefinitionError listing every problem."""
    path = Path(path)
    spec, lines = read_definition(path)
    registry, problems = import_registry(spec, path)
    machine = None
    if registry is not None:
        machine, resolve_problems = resolve(spec, registry, path, lines)
        problems.extend(resolve_problems)
    if expected_name is not None and spec.name != expected_name:
        problems.append(
            Problem(
                "name",
                lines.line_of(("name",)),
                f"is '{spec.name}', registered as '{expected_name}'",
            )
        )
    if problems or machine is None:
        raise DefinitionError(str(path), [p.render(str(path)) for p in problems])
    return machine


def import_registry(spec: MachineSpec, path: Path) -> tuple[Registry | None, list[Problem]]:
    """Import the machine's module and return its ``registry``."""
    try:
        module = _import(spec.module, path)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if spec.module.endswith(".py"):
            detail = _as_written(detail, exc, (path.parent / spec.module).resolve().parent)
        return None, [Problem("module", None, f"cannot import '{spec.module}': {detail}")]
    apply_pending_configuration()  # the module may log through structlog directly
    registry = getattr(module, "registry", None)
    if not isinstance(registry, Registry):
        return None, [
            Problem("module", None, f"'{spec.module}' defines no 'registry = Registry()'")
        ]
    return registry, []


def _package_of(folder: Path) -> str:
    """The name a machine folder's modules are imported under (see :func:`_import`)."""
    return f"_fsm_machine_{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}"


def _as_written(detail: str, exc: BaseException, folder: Path) -> str:
    """``detail`` with the package name fsm made up for ``folder`` put back as the author wrote
    it (``.modle``, not ``_fsm_machine_98b3abd3f352.modle``), and the file and line of the
    author's code that raised, when a frame of it is in the traceback."""
    package = _package_of(folder)
    detail = detail.replace(f"'{package}.", "'.").replace(f"'{package}'", "'.'")
    detail = detail.replace(" (unknown location)", "")
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        file = Path(frame.filename)
        if file.parent == folder:
            where = f"{file.name} line {frame.lineno}"
    return f"{detail} ({where})" if where else detail


def _import(module: str, path: Path) -> ModuleType:
    """Import the machine's module: a module name, or a ``.py`` file beside the machine file.

    A file is imported as a module of a package made of its folder, so that it can import the
    modules beside it relatively (``from .model import Counter``) without anything on
    ``sys.path``.
    """
    if not module.endswith(".py"):
        return importlib.import_module(module)
    file = (path.parent / module).resolve()
    folder = file.parent
    package = _package_of(folder)
    if package not in sys.modules:
        spec = importlib.util.spec_from_loader(package, loader=None, is_package=True)
        assert spec is not None  # spec_from_loader always makes one for a package
        holder = importlib.util.module_from_spec(spec)
        holder.__path__ = [str(folder)]
        sys.modules[package] = holder
    name = f"{package}.{file.stem}"
    if not file.is_file():
        raise ImportError(f"no Python file at {file}")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        sibling = folder / f"{exc.name}.py" if exc.name else None
        if sibling is not None and sibling.is_file():
            raise ImportError(
                f"No module named '{exc.name}': {sibling.name} is beside {file.name}; import it "
                f"relatively (from .{exc.name} import ...)"
            ) from exc
        raise


def resolve(
    spec: MachineSpec, registry: Registry, path: Path, lines: LoadedYaml | None = None
) -> tuple[Machine | None, list[Problem]]:
    """Resolve every name of ``spec`` in ``registry``; return the machine or the problems."""
    problems: list[Problem] = []

    def problem(loc: Sequence[str | int], message: str) -> None:
        line = lines.line_of(tuple(loc)) if lines is not None else None
        problems.append(Problem(format_location(loc), line, message))

    def lookup(kind: str, table: dict[str, Any], name: str, loc: Sequence[str | int]) -> Any:
        if name in table:
            return table[name]
        problem(loc, f"unknown {kind} '{name}'{did_you_mean(name, table)}")
        return None

    states = spec.states
    document = lookup("document model", registry.documents, spec.document, ["document"])
    options: Any = NoOptions
    if spec.options is not None:
        options = lookup("options model", registry.options_models, spec.options, ["options"])
    inputs: Any = None
    if spec.inputs is not None:
        inputs = lookup("inputs model", registry.inputs_models, spec.inputs, ["inputs"])
    codec: Any = None
    if (spec.state.field is None) == (spec.state.codec is None):
        problem(["state"], "give exactly one of 'field' or 'codec'")
    elif spec.state.codec is not None:
        codec = lookup("codec", registry.codecs, spec.state.codec, ["state", "codec"])
    else:
        codec = FieldCodec(spec.state.field or "")
    if spec.initial not in states:
        problem(["initial"], f"unknown state '{spec.initial}'{did_you_mean(spec.initial, states)}")
    found_hooks: dict[str, Any] = {}
    for hook, name in spec.hooks.model_dump().items():
        if name is not None:
            found = lookup("hook", registry.hooks, name, ["hooks", hook])
            if found is not None:
                found_hooks[hook] = found
    final_states = {name for name, state in states.items() if state.final}
    transitions = [
        _resolve_transition(index, t, registry, states, final_states, problem, lookup)
        for index, t in enumerate(spec.transitions)
    ]
    control_actions: dict[str, tuple[tuple[str, Action], ...]] = {}
    if spec.control is not None:
        for command, command_spec in spec.control.commands.items():
            target = command_spec.state
            if target is not None and target not in states:
                problem(
                    ["control", "commands", command, "state"],
                    f"unknown state '{target}'{did_you_mean(target, states)}",
                )
            resolved: list[tuple[str, Action]] = []
            for position, action in enumerate(command_spec.actions):
                loc: list[str | int] = ["control", "commands", command, "actions", position]
                resolved.append((action, lookup("action", registry.actions, action, loc)))
            control_actions[command] = tuple(resolved)
    _check_migrations(spec, registry, problem)
    commands: dict[str, MachineCommand] = {}
    for name, declared in spec.commands.items():
        where: list[str | int] = ["commands", name]
        handler = lookup("hook", registry.hooks, declared.handler, [*where, "handler"])
        model = None
        if declared.inputs is not None:
            model = lookup(
                "inputs model", registry.inputs_models, declared.inputs, [*where, "inputs"]
            )
        if handler is not None:
            commands[name] = MachineCommand(name, declared.description, handler, model)
    for group_index, group in enumerate(spec.exclusive):
        for position, name in enumerate(group):
            lookup("guard", registry.guards, name, ["exclusive", group_index, position])
    if document is not None and spec.control is not None:
        for loc, value in _status_values(spec):
            refused = _refused_status(document, spec.control.field, value)
            if refused:
                problem(loc, refused)
    if problems or document is None or options is None or codec is None:
        return None, problems
    machine = Machine(
        spec=spec,
        path=path,
        registry=registry,
        document_model=document,
        options_model=options,
        inputs_model=inputs,
        codec=codec,
        hooks=Hooks(**found_hooks),
        transitions=[t for t in transitions if t is not None],
        lines=lines,
        control_actions=control_actions,
        commands=commands,
    )
    return machine, problems


def _check_migrations(
    spec: MachineSpec,
    registry: Registry,
    problem: Callable[[Sequence[str | int], str], None],
) -> None:
    """Each migration's versions, hook and renames: a ``from`` once and not the file's own
    version, a registered hook, and every state a chain of migrations renames to (composed
    through the later ones) a state of this definition."""
    seen: set[str] = set()
    for index, migration in enumerate(spec.migrations):
        loc: list[str | int] = ["migrations", index]
        version = str(migration.from_version)
        if version in seen or version == str(spec.version):
            problem([*loc, "from"], f"version {version} is this file's own or migrated twice")
        seen.add(version)
        hook = migration.update
        if hook is not None and hook not in registry.hooks:
            problem([*loc, "update"], f"unknown hook '{hook}'{did_you_mean(hook, registry.hooks)}")
        chain = chain_from(spec, migration.from_version)
        if chain is None:
            continue
        for old, new in migration.states.items():
            final = chain.states.get(old, new)
            if final is not None and final not in spec.states:
                problem(
                    [*loc, "states", old],
                    f"renames '{old}' to '{final}', which is no state of version {spec.version}"
                    f"{did_you_mean(final, spec.states)}",
                )


def _status_values(spec: MachineSpec) -> list[tuple[list[str | int], str]]:
    """Every control status the definition names: commands' sources and destinations, and the
    statuses final states set."""
    assert spec.control is not None
    found: list[tuple[list[str | int], str]] = []
    for command, command_spec in spec.control.commands.items():
        found.append((["control", "commands", command, "dest"], command_spec.dest))
        for position, source in enumerate(command_spec.sources):
            found.append((["control", "commands", command, "source", position], source))
    found.append((["control", "active"], spec.control.active))
    for state_name, state in spec.states.items():
        if state.status is not None:
            found.append((["states", state_name, "status"], state.status))
    return found


def _refused_status(document: type[BaseModel], field: str, value: str) -> str:
    """Why the document model refuses ``value`` in its control field (``""`` when it accepts
    it, or when the field cannot be found: a model that types it loosely accepts anything)."""
    from pydantic import TypeAdapter, ValidationError

    annotation = annotation_at(document, field)
    if annotation is None:
        return ""
    try:
        TypeAdapter(annotation).validate_python(value)
    except ValidationError:
        return (
            f"status '{value}' is not a value of the document's {field} field "
            f"({document.__name__}.{field})"
        )
    except Exception:  # an annotation TypeAdapter cannot build: nothing to check against
        return ""
    return ""


def _resolve_transition(
    index: int,
    spec: TransitionSpec,
    registry: Registry,
    states: dict[str, StateSpec],
    final_states: set[str],
    problem: Callable[[Sequence[str | int], str], None],
    lookup: Callable[[str, dict[str, Any], str, Sequence[str | int]], Any],
) -> Transition | None:
    loc: list[str | int] = ["transitions", index]
    ok = True
    if spec.sources == ["*"]:
        sources = tuple(name for name in states if name not in final_states)
    else:
        sources = tuple(spec.sources)
        for position, source in enumerate(sources):
            if source not in states:
                where = (
                    [*loc, "source", position]
                    if isinstance(spec.source, list)
                    else [*loc, "source"]
                )
                problem(where, f"unknown state '{source}'{did_you_mean(source, states)}")
                ok = False
    dest = None if spec.dest == "=" else spec.dest
    if dest is not None and dest not in states:
        problem([*loc, "dest"], f"unknown state '{dest}'{did_you_mean(dest, states)}")
        ok = False
    guards: list[GuardRef] = []
    for position, ref in enumerate(spec.guards):
        name, negated = guard_name(ref)
        info = lookup("guard", registry.guards, name, [*loc, "guards", position])
        if info is None:
            ok = False
        else:
            guards.append(GuardRef(name, negated, info))
    actions: list[tuple[str, Action]] = []
    for position, name in enumerate(spec.actions):
        func = lookup("action", registry.actions, name, [*loc, "actions", position])
        if func is None:
            ok = False
        else:
            actions.append((name, func))
    if not ok:
        return None
    return Transition(
        index=index,
        event=spec.event,
        sources=sources,
        dest=dest,
        guards=tuple(guards),
        actions=tuple(actions),
        auto=spec.auto,
        description=spec.description,
    )
