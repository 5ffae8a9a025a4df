"""The registry a machine module fills with its document model, guards, actions and hooks.

A machine file names everything by string; its Python module exposes one ``registry`` in which
those names are defined. Names are resolved to callables once, when the machine is loaded, so a
typo is a load error and never a surprise at fire time::

    registry = Registry()

    @registry.document
    class Counter(BaseModel): ...

    @registry.guard(budget=True)
    def below_limit(doc: Counter, ctx: Context) -> bool:
        return doc.count < doc.limit

    @registry.action
    def increment(doc: Counter, ctx: Context) -> Update:
        return {"count": doc.count + 1}

Guards are pure predicates ``(doc, ctx) -> bool``. A guard registered with ``budget=True`` bounds
loops (an iteration or error limit); the static checks require one (not negated) on every cycle
of automatic transitions, or a transition of the cycle that says why it ends
(``unbounded: <reason>`` in the machine file). Actions are
``(doc, ctx) -> Update | None``: they may touch the workspace, and change the document only
through the update they return (a mapping of dotted paths to new values).

Hooks (named in the machine file's ``hooks:`` table):

* ``create(inputs, ctx) -> document``: build a new instance's document from ``fsm new`` inputs.
* ``on_error(doc, ctx, error) -> Update``: the error bookkeeping written when an action fails.
* ``summary(doc) -> dict``: extra lines for ``fsm status`` (iteration, progress, ...).
* ``recover(ctx, raw_text) -> Recovery``: rebuild a corrupt document (``fsm recover``).
* ``after_save(doc, ctx) -> None``: side files written after every save of the document.
* ``outcome(doc) -> fsm.model.outcome.Verdict``: for an instance in a final state, whether it
  reached the machine's goal and why; only a successful verdict makes a run ``completed`` (exit 0).
* ``preflight(doc, ctx) -> list[str]``: what a run needs and lacks (agents, programs), one line
  each; a non-empty list makes ``run`` refuse before anything changes.
* ``retry(doc, ctx, items) -> Reopening``: how an instance that ended without reaching its goal
  is reopened (``fsm retry``): the state it goes back to, the fields reset, and the items (issues,
  tasks: the machine's word) reopened; ``items`` are the ones named, empty for all that failed.
  Raise :class:`~fsm.base.errors.InputError` for a name that is no item of the instance and
  :class:`~fsm.base.errors.RefusedError` for one that cannot be retried.

A codec (``state.codec`` in the machine file) reads the FSM state from a document and says how
to write it back, for machines whose state is not one plain field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from fsm.base.errors import DefinitionError

if TYPE_CHECKING:  # annotations only: fsm ls imports this module and never needs pydantic
    from pydantic import BaseModel

    from fsm.model.context import Context
    from fsm.model.outcome import Verdict

__all__ = [
    "HOOK_NAMES",
    "Action",
    "Codec",
    "Guard",
    "GuardInfo",
    "Hooks",
    "Recovery",
    "Registry",
    "Reopening",
    "Update",
]

Update = Mapping[str, Any]
"""What an action returns: dotted paths (``"skill_state.develop.completed"``) to new values."""

Guard = Callable[[Any, "Context"], bool]
Action = Callable[[Any, "Context"], "Update | None"]

_F = TypeVar("_F", bound=Callable[..., Any])
_M = TypeVar("_M", bound="type[BaseModel]")


class Codec(Protocol):
    """Reads the FSM state out of a document and writes a new state into it."""

    def read(self, doc: Any) -> str:
        """Return the name of the FSM state ``doc`` is in."""
        ...

    def write(self, doc: Any, state: str) -> Update:
        """Return the update that puts ``doc`` into ``state``."""
        ...


@dataclass(frozen=True)
class GuardInfo:
    """A registered guard and what it is declared to be."""

    func: Guard
    budget: bool = False


@dataclass(frozen=True)
class Hooks:
    """The hooks a machine declares (``hooks:`` in its file), resolved at load, each typed.

    Documents are typed ``Any`` here: each machine's hooks take its own document model.
    """

    create: Callable[[dict[str, Any], Context], Any] | None = None
    """``(inputs, ctx) -> document model or dict``: a new instance's document."""
    on_error: Callable[[Any, Context, BaseException], Update | None] | None = None
    """``(doc, ctx, error) -> Update``: the bookkeeping written when a step fails."""
    summary: Callable[[Any], Mapping[str, object]] | None = None
    """``(doc) -> {label: text}``: extra lines of ``fsm status`` and of run progress."""
    recover: Callable[[Context, str | None], Recovery] | None = None
    """``(ctx, raw_text) -> Recovery``: rebuild a corrupt document (``fsm recover``)."""
    after_save: Callable[[Any, Context], None] | None = None
    """``(doc, ctx) -> None``: side files written after every save of the document."""
    outcome: Callable[[Any], Verdict] | None = None
    """``(doc) -> Verdict``: did an instance in a final state reach the machine's goal."""
    preflight: Callable[[Any, Context], Sequence[str]] | None = None
    """``(doc, ctx) -> [missing requirement, ...]``: what a run needs and lacks."""
    retry: Callable[[Any, Context, Sequence[str]], Reopening] | None = None
    """``(doc, ctx, items) -> Reopening``: how a failed instance is reopened (``fsm retry``)."""


HOOK_NAMES: tuple[str, ...] = tuple(Hooks.__dataclass_fields__)
"""The hooks a machine file may name."""


@dataclass(frozen=True)
class Recovery:
    """The outcome of a ``recover`` hook: the rebuilt document and what could not be recovered."""

    document: BaseModel
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Reopening:
    """What a ``retry`` hook returns: how a failed instance is reopened.

    ``state`` is the (non-final) FSM state it goes back to, ``update`` the fields reset (dotted
    paths to new values, as an action returns them; the engine writes the state and sets the
    control status to the active one itself), and ``items`` the names of what is retried, for
    the journal and the command's answer.
    """

    state: str
    update: Update
    items: list[str] = field(default_factory=list)


class Registry:
    """Names of one machine module, resolved once at load time."""

    def __init__(self) -> None:
        self.documents: dict[str, type[BaseModel]] = {}
        self.options_models: dict[str, type[BaseModel]] = {}
        self.inputs_models: dict[str, type[BaseModel]] = {}
        self.guards: dict[str, GuardInfo] = {}
        self.actions: dict[str, Action] = {}
        self.hooks: dict[str, Callable[..., Any]] = {}
        self.codecs: dict[str, Codec] = {}

    def document(self, model: _M) -> _M:
        """Register a pydantic model of the instance document under its class name."""
        return _add(self.documents, "document model", model.__name__, model)

    def options(self, model: _M) -> _M:
        """Register a pydantic model of the machine's options under its class name."""
        return _add(self.options_models, "options model", model.__name__, model)

    def inputs(self, model: _M) -> _M:
        """Register a pydantic model describing ``fsm new``'s creation inputs (its fields, with
        their docstrings, are what ``fsm options`` lists and what ``--set`` keys may name)."""
        return _add(self.inputs_models, "inputs model", model.__name__, model)

    @overload
    def guard(self, func: _F, /) -> _F: ...
    @overload
    def guard(self, /, *, name: str | None = None, budget: bool = False) -> Callable[[_F], _F]: ...
    def guard(
        self, func: _F | None = None, /, *, name: str | None = None, budget: bool = False
    ) -> _F | Callable[[_F], _F]:
        """Register a guard; ``budget=True`` declares that it bounds a loop."""

        def register(f: _F) -> _F:
            _add(self.guards, "guard", name or f.__name__, GuardInfo(f, budget))
            return f

        return register(func) if func is not None else register

    @overload
    def action(self, func: _F, /) -> _F: ...
    @overload
    def action(self, /, *, name: str | None = None) -> Callable[[_F], _F]: ...
    def action(
        self, func: _F | None = None, /, *, name: str | None = None
    ) -> _F | Callable[[_F], _F]:
        """Register an action under its function name (or ``name``)."""

        def register(f: _F) -> _F:
            return _add(self.actions, "action", name or f.__name__, f)

        return register(func) if func is not None else register

    @overload
    def hook(self, func: _F, /) -> _F: ...
    @overload
    def hook(self, /, *, name: str | None = None) -> Callable[[_F], _F]: ...
    def hook(
        self, func: _F | None = None, /, *, name: str | None = None
    ) -> _F | Callable[[_F], _F]:
        """Register a hook function (create, on_error, summary, recover, after_save, outcome,
        preflight, retry, or the handler of a machine command)."""

        def register(f: _F) -> _F:
            return _add(self.hooks, "hook", name or f.__name__, f)

        return register(func) if func is not None else register

    def codec(self, name: str, codec: Codec) -> Codec:
        """Register a state codec under ``name``."""
        return _add(self.codecs, "codec", name, codec)

    def names(self) -> Mapping[str, list[str]]:
        """Every registered name by kind, for "did you mean" suggestions."""
        return {
            "document": sorted(self.documents),
            "options": sorted(self.options_models),
            "inputs": sorted(self.inputs_models),
            "guard": sorted(self.guards),
            "action": sorted(self.actions),
            "hook": sorted(self.hooks),
            "codec": sorted(self.codecs),
        }


_V = TypeVar("_V")


def _add(table: dict[str, Any], kind: str, name: str, value: _V) -> _V:
    """Register ``value`` under ``name``; a second, different value for a taken name is an
    error (it would silently replace the first)."""
    known = table.get(name)
    if known is not None and known != value:
        raise DefinitionError("registry", [f"{kind} '{name}' is registered twice"])
    table[name] = value
    return value
