"""The schema of a machine file, and strict loading of it.

A machine file (``machine.yaml``) is data only: states, transitions, and the *names* of the guards,
actions, hooks and models its Python module registers. Unknown keys are errors, booleans are only
``true``/``false``, and every problem in a file is reported at once with its location and line::

    machine.yaml:14: transitions[3].dets: unknown key (did you mean 'dest'?)

The shape, with every key::

    name: counter                 # machine name (used on the command line)
    version: 1
    description: ...
    module: counter.py            # "<file>.py" beside this file, or a dotted module name
    document: Counter             # registered pydantic model of the instance document
    options: CounterOptions       # registered options model (optional)
    state: {field: phase}         # where the FSM state lives: a dotted field, or {codec: name}
    initial: idle
    storage:
      document: ".counters/{id}.json"   # relative to the workspace; {id} and option names
      meta: ".counters/{id}.fsm"        # journal, log and locks (default: beside the document)
      id_prefix: counter                # new ids are <prefix>-YYYYMMDDTHHMMSS-<8 hex>
      touch: [updated_at]               # fields set to the current time on every save
    control:                      # optional lifecycle status managed by start/pause/resume/stop
      field: status
      active: running
      owned: [failure_reason]
      commands:
        stop: {source: [running, paused], dest: failed, state: failed, description: ...}
    external_fields: [title]      # paths other programs own: their edits win over a step's
    exclusive: [[tests_passed, tests_failed]]   # guards of which at most one can hold
    needs_workspace: false        # its work needs no files of the workspace: any worker runs it
    hooks: {create: new_counter, on_error: record_error}
    migrations:                   # from earlier versions, oldest first (see fsm.model.migrations)
      - {from: 1, states: {waiting: idle, legacy: null}, events: {start: go}, update: upgrade}
    states:
      idle: {description: ...}
      done: {description: ..., final: true, tags: [success], status: completed}
    transitions:
      - {event: go, source: idle, dest: done, guards: [ready], actions: [work], description: ...}
      - {event: again, source: done, dest: idle, auto: false, unbounded: "why it ends", ...}

A guard reference is a registered guard's name, or ``not <name>`` for its negation. A transition's
``source`` is a state, a list of states, or ``"*"`` (every non-final state); ``dest: "="`` stays
in the source state. A state's ``status`` is the control status that entering it sets (a final
state usually sets the matching lifecycle status). ``auto: false`` keeps a transition out of
automatic steps (it fires only by name). Transitions are tried in the order written. Every cycle
of automatic transitions needs a budget guard (a guard registered with ``budget=True``, not
negated) on one of its transitions, or ``unbounded: "<why it ends anyway>"`` on one.
"""

from __future__ import annotations

import functools
import pickle
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from fsm.base import cache
from fsm.base.errors import DefinitionError
from fsm.model.yaml_loader import LoadedYaml, load_yaml, read_yaml_file

__all__ = [
    "CONTROL_COMMANDS",
    "ControlCommandSpec",
    "ControlSpec",
    "HooksSpec",
    "MachineSpec",
    "MigrationSpec",
    "Problem",
    "StateBinding",
    "StateSpec",
    "StorageSpec",
    "TransitionSpec",
    "describe_validation",
    "did_you_mean",
    "format_location",
    "guard_name",
    "parse_definition",
    "read_definition",
]

_NAME = r"^[A-Za-z][A-Za-z0-9_-]*$"
_DOTTED_PATH = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_GUARD_REF = r"^(not )?[A-Za-z][A-Za-z0-9_-]*$"
Name = Annotated[str, StringConstraints(pattern=_NAME)]
DottedPath = Annotated[str, StringConstraints(pattern=_DOTTED_PATH)]
GuardRef = Annotated[str, StringConstraints(pattern=_GUARD_REF)]
# Each pattern has its own rule in words: a field path allows '.', a guard reference 'not '.
_PATTERN_RULES = {
    _NAME: "not a valid name (letters, digits, '_' and '-', starting with a letter)",
    _DOTTED_PATH: "not a valid field path (names of letters, digits and '_', joined by '.')",
    _GUARD_REF: "not a valid guard reference (a guard name, or 'not ' and a guard name)",
}
Text = Annotated[str, StringConstraints(min_length=1)]

CONTROL_COMMANDS = ("start", "pause", "resume", "stop")


class _Spec(BaseModel):
    # Validators are built when a machine file is first validated: a definition read back from
    # the cache (see read_definition) is never validated again, and needs none.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class StateSpec(_Spec):
    """One FSM state."""

    description: Text
    final: bool = False
    tags: list[Name] = Field(default_factory=list)
    status: Name | None = None


class TransitionSpec(_Spec):
    """One transition: an event from source state(s) to a destination."""

    event: Name
    source: Name | Literal["*"] | list[Name]
    dest: Name | Literal["="]
    guards: list[GuardRef] = Field(default_factory=list)
    actions: list[Name] = Field(default_factory=list)
    auto: bool = True
    unbounded: Text | None = None
    """Why a cycle through this transition ends although no budget guard bounds it (``fsm
    check`` then does not ask for one); the engine itself ignores it."""
    description: Text

    @property
    def sources(self) -> list[str]:
        """The source states as a list (``"*"`` stays unexpanded)."""
        return list(self.source) if isinstance(self.source, list) else [self.source]


class ControlCommandSpec(_Spec):
    """A control command: the statuses it may leave, the status it sets, what else it does."""

    source: Name | list[Name]
    dest: Name
    state: Name | None = None
    actions: list[Name] = Field(default_factory=list)
    description: Text

    @property
    def sources(self) -> list[str]:
        """The statuses this command may be given in."""
        return list(self.source) if isinstance(self.source, list) else [self.source]


class ControlSpec(_Spec):
    """The lifecycle status layer that start/pause/resume/stop act on."""

    field: DottedPath
    active: Name = "running"
    owned: list[DottedPath] = Field(default_factory=list)
    commands: dict[Literal["start", "pause", "resume", "stop"], ControlCommandSpec]


class MachineCommandSpec(_Spec):
    """A command of the machine's own (``fsm command M ID NAME``): a person's request that is
    neither an event nor a control command, such as adding a task to a loop. Its ``handler``
    (a registered hook) gets the document, the context and the validated ``inputs`` and returns
    the document's update; it may write the instance's side files too."""

    description: Text
    handler: Name
    inputs: Name | None = None
    """A registered inputs model the command's inputs are validated with (none: it takes none)."""


class StateBinding(_Spec):
    """Where the FSM state is kept in the document: one field, or a registered codec."""

    field: DottedPath | None = None
    codec: Name | None = None


class StorageSpec(_Spec):
    """Where instances live, relative to the workspace."""

    document: Text
    meta: Text | None = None
    id_prefix: Name | None = None
    read_retries: Annotated[int, Field(ge=0, le=50)] = 3
    retry_interval_ms: Annotated[int, Field(ge=0, le=5000)] = 50
    indent: Annotated[int, Field(ge=0, le=8)] = 2
    touch: list[DottedPath] = Field(default_factory=list)


class HooksSpec(_Spec):
    """Names of the registered hook functions."""

    create: Name | None = None
    on_error: Name | None = None
    summary: Name | None = None
    recover: Name | None = None
    after_save: Name | None = None
    outcome: Name | None = None
    preflight: Name | None = None
    retry: Name | None = None


class MigrationSpec(_Spec):
    """How instances of an earlier ``version:`` become instances of the next one (see
    :mod:`fsm.model.migrations`): state and event renames (a state renamed to ``null`` cannot
    migrate), and an optional registered hook that updates the document."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, defer_build=True, populate_by_name=True
    )
    from_version: int | Text = Field(alias="from")
    states: dict[Name, Name | None] = Field(default_factory=dict)
    events: dict[Name, Name] = Field(default_factory=dict)
    update: Name | None = None
    """A registered hook ``(data, ctx) -> Update`` run on the document's JSON data before its
    state is renamed."""
    description: Text | None = None


class MachineSpec(_Spec):
    """A whole machine file."""

    name: Name
    version: int | Text
    description: Text
    module: Text
    document: Name
    options: Name | None = None
    inputs: Name | None = None
    state: StateBinding
    initial: Name
    storage: StorageSpec
    control: ControlSpec | None = None
    commands: dict[Name, MachineCommandSpec] = Field(default_factory=dict)
    external_fields: list[DottedPath] = Field(default_factory=list)
    exclusive: list[list[Name]] = Field(default_factory=list)
    needs_workspace: bool = True
    """Whether its instances' work needs the files of the workspace they were created in (a
    repository to edit, side files): workers run them only where that workspace's queue is
    served. ``false`` (a machine that only computes): any worker runs them."""
    hooks: HooksSpec = Field(default_factory=HooksSpec)
    states: dict[Name, StateSpec]
    transitions: list[TransitionSpec]
    migrations: list[MigrationSpec] = Field(default_factory=list)
    """From each earlier version to the next, oldest first: the last leads to ``version``."""


class Problem(typing.NamedTuple):
    """A definition problem: where it is (``transitions[3].dest``), its line, and what it is."""

    location: str
    line: int | None
    message: str

    def render(self, source: str) -> str:
        """``source:line: location: message``."""
        where = f"{source}:{self.line}" if self.line is not None else source
        prefix = f"{self.location}: " if self.location else ""
        return f"{where}: {prefix}{self.message}"


def guard_name(ref: str) -> tuple[str, bool]:
    """Split a guard reference into (name, negated)."""
    if ref.startswith("not "):
        return ref[4:], True
    return ref, False


def did_you_mean(word: str, candidates: typing.Iterable[str]) -> str:
    """A " (did you mean 'x'?)" suffix, or "" when nothing is close."""
    import difflib  # only when something is misspelt

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def format_location(loc: typing.Sequence[str | int]) -> str:
    """``("transitions", 3, "dest")`` -> ``transitions[3].dest``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def describe_validation(exc: ValidationError, limit: int = 3) -> str:
    """The first few validation errors as ``location: message`` text."""
    parts = [
        f"{format_location(e['loc']) or 'document'}: {e['msg']}"
        for e in exc.errors(include_url=False)[:limit]
    ]
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def read_definition(path: Path) -> tuple[MachineSpec, LoadedYaml]:
    """Read and parse the machine file at ``path``; raise DefinitionError with every problem.

    A file checked before (the same text, checked by the same schema) is read back from the
    cache (:mod:`fsm.base.cache`) instead of being parsed and validated again.
    """
    try:
        text = read_yaml_file(path)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and the size limit included
        raise DefinitionError(str(path), [f"cannot read machine file: {exc}"]) from exc
    key = cache.digest(_schema_fingerprint(), text)
    cached = _cached(key)
    if cached is not None:
        return cached
    spec, loaded, problems = parse_definition(text)
    if spec is None or loaded is None:
        raise DefinitionError(str(path), [p.render(str(path)) for p in problems])
    cache.write("definitions", key, pickle.dumps((spec, loaded), pickle.HIGHEST_PROTOCOL))
    return spec, loaded


def _cached(key: str) -> tuple[MachineSpec, LoadedYaml] | None:
    data = cache.read("definitions", key)
    if data is None:
        return None
    try:
        spec, loaded = pickle.loads(data)
    except Exception:  # an entry from another version of the classes: parse again
        return None
    if not isinstance(spec, MachineSpec) or not isinstance(loaded, LoadedYaml):
        return None
    return spec, loaded


@functools.cache
def _schema_fingerprint() -> str:
    """What decides how a machine file reads: the source of the modules that parse and check
    it, and the versions of Python and pydantic."""
    import pydantic

    here = Path(__file__).parent
    sources = [(here / name).read_bytes() for name in _SCHEMA_SOURCES]
    return cache.digest(sys.version, pydantic.VERSION, *sources)


_SCHEMA_SOURCES = ("definition.py", "yaml_loader.py", "_yaml_limits.py")


def parse_definition(text: str) -> tuple[MachineSpec | None, LoadedYaml | None, list[Problem]]:
    """Parse machine-file text into a spec; return it (or None) and every problem."""
    loaded, yaml_problems = load_yaml(text)
    problems = [Problem("", p.line, p.message) for p in yaml_problems]
    if loaded is None:
        return None, None, problems
    if not isinstance(loaded.data, dict):
        problems.append(Problem("", 1, "a machine file must be a mapping of keys to values"))
        return None, loaded, problems
    try:
        spec = MachineSpec.model_validate(loaded.data)
    except ValidationError as exc:
        problems.extend(_problems_from(exc, loaded))
        return None, loaded, problems
    if problems:
        return None, loaded, problems
    return spec, loaded, problems


def _problems_from(exc: ValidationError, loaded: LoadedYaml) -> list[Problem]:
    seen: set[tuple[str, str]] = set()
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = _clean_loc(error["loc"])
        if error["type"] == "extra_forbidden":
            key = str(loc[-1])
            allowed = _allowed_keys(loc[:-1])
            message = f"unknown key '{key}'{did_you_mean(key, allowed)}"
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == "literal_error" and loc and loc[0] == "control":
            message = f"unknown control command (use one of {', '.join(CONTROL_COMMANDS)})"
        else:
            message = _describe(error)
        location = format_location(loc)
        if (location, message) in seen:
            continue
        seen.add((location, message))
        problems.append(Problem(location, loaded.line_of(loc), message))
    return problems


def _clean_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """Drop pydantic's union-branch markers (``str``, ``list[str]``, ...) from a location."""
    cleaned: list[int | str] = []
    for part in loc:
        if isinstance(part, str) and ("[" in part or part in {"str", "int", "literal['*']"}):
            continue
        if isinstance(part, str) and part.startswith(("constrained-str", "function-")):
            continue
        cleaned.append(part)
    return tuple(cleaned)


def _describe(error: Any) -> str:
    value = error.get("input")
    shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    message = str(error["msg"])
    if error["type"] == "string_pattern_mismatch":
        message = _PATTERN_RULES.get(str(error.get("ctx", {}).get("pattern")), message)
    elif error["type"] == "bool_type":
        message = "must be true or false"
    return f"{message} (got {shown})"


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed at ``loc``, found by walking the schema's annotations."""
    annotation: Any = MachineSpec
    for part in loc:
        annotation = _step_into(annotation, part)
        if annotation is None:
            return []
    model = _find_model(annotation)
    return list(model.model_fields) if model is not None else []


def _step_into(annotation: Any, part: int | str) -> Any:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _step_into(get_args(annotation)[0], part)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _step_into(arg, part)
            if found is not None:
                return found
        return None
    if origin is dict:
        return get_args(annotation)[1]
    if origin is list:
        return get_args(annotation)[0] if isinstance(part, int) else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(str(part))
        return field.annotation if field is not None else None
    return None


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None
