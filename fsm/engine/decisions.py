"""A replay of decisions: would a changed definition have taken the steps real journals took?

``fsm replay MACHINE --decisions --definition PATH`` feeds the *candidate* definition (a changed
machine file, its module included) the recorded steps of journals written under the *installed*
one. Each journal is followed record by record, the document rebuilt from the records' patches
(:class:`~fsm.model.rebuild.Rebuilder`); at each step (a ``transition`` or ``error`` record) the
candidate chooses a transition from the recorded state as the engine would (the fired event's
transitions when the record says it was fired, else the automatic ones, in declared order, the
first whose guards all hold), and its choice is compared with the recorded one (event and
destination, names mapped through the candidate's migrations when the journal is of an earlier
version). A guard's value is:

* the recorded one, when the recorded step evaluated that guard and the candidate's guard is
  unchanged (the same function, or one whose code, without docstrings, is the same);
* else evaluated on the rebuilt document with the workspace's options, the step's observations
  (:meth:`fsm.model.context.Context.observe`) served back, a clock frozen at the record's time, an
  executor that refuses to run anything and no workspace to read. A guard that fails there (it
  reads what it did not observe, the document could not be rebuilt, or it asks the executor)
  makes the step *undecidable*: reported as such, never as a divergence.

The first step a journal's candidate decides otherwise is its *divergence*: reported with the
state, both choices, each guard's value and where it came from, and the guards whose values
flipped; the journal is not followed further. :func:`forecast` asks the same question of every
unfinished instance now: which transition its next step takes under each definition.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base.clock import SimulatedClock
from fsm.base.errors import JournalRecordError
from fsm.engine.decision_report import (
    Decision,
    DecisionReport,
    Divergence,
    GuardValue,
    JournalDecisions,
    flipped,
)
from fsm.model.context import Context
from fsm.model.identity import DEFINITION, Identity, same_version
from fsm.model.migrations import Chain, chain_from
from fsm.model.rebuild import Rebuilder
from fsm.model.records import FIRED, OBSERVED, OPTIONS, ErrorRecord, Record, TransitionRecord

if TYPE_CHECKING:
    from pydantic import BaseModel

    from fsm.model.machine import GuardRef, Machine, Transition

__all__ = [
    "Decision",
    "DecisionReport",
    "Divergence",
    "GuardValue",
    "JournalDecisions",
    "Replayer",
    "Undecidable",
    "next_choice",
    "refusing",
]

_NOWHERE = Path("/nonexistent/fsm-decision-replay")
"""The workspace a replayed guard sees: nothing to read there."""


class Undecidable(Exception):
    """A step the candidate cannot decide from what the journal holds."""


class _RefusingExecutor:
    """The executor of a replayed guard: it runs nothing and answers nothing."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise Undecidable("a guard asked the executor (nothing runs in a replay)")

    shell = run = agent = has_agent = has_program = _refuse


class Replayer:
    """Replays journals recorded under ``installed`` against ``candidate`` (see the module
    docstring); ``options``: the options replayed guards see."""

    def __init__(self, installed: Machine, candidate: Machine, options: BaseModel) -> None:
        self.installed = installed
        self.candidate = candidate
        self.options = options
        self._unchanged = {
            name
            for name, info in candidate.registry.guards.items()
            if (old := installed.registry.guards.get(name)) is not None
            and _same_function(old.func, info.func)
        }
        self._observed: dict[str, Any] = {}
        self._options_now: BaseModel = options
        self._fired_only: dict[tuple[str, str], bool] = {}
        self._tried: dict[tuple[str, str | None], list[Transition]] = {}

    def _recorded_options(self, recorded: Any) -> None:
        """Evaluate guards from now on with the options the run recorded (those of the
        workspace when they no longer fit the candidate's options model)."""
        try:
            self._options_now = self.candidate.options_model.model_validate(recorded)
        except Exception:
            self._options_now = self.options

    def _serve(self, name: str, read: Callable[[], Any]) -> Any:
        if name not in self._observed:
            raise Undecidable(f"the step observed no '{name}'")
        return self._observed[name]

    def replay(self, name: str, entries: Iterable[tuple[int, Any]]) -> JournalDecisions:
        """Replay one journal's entries (``(line, record)``, as a journal's ``entries()``)."""
        found = JournalDecisions(name)
        self._options_now = self.options
        rebuilder = Rebuilder(_no_render, _no_match)
        candidate = self.candidate
        chain: Chain | None = None
        graph_same = True
        for line, record in entries:
            if record is None or isinstance(record, JournalRecordError):
                continue
            kind = type(record)
            extra = record.extra
            if extra and OPTIONS in extra:  # the run's options, from its first step on
                self._recorded_options(extra[OPTIONS])
            if kind is TransitionRecord or kind is ErrorRecord:
                found.steps += 1
                try:
                    divergence = self._step(record, line, found.steps, rebuilder, chain, graph_same)
                except Undecidable as exc:
                    found.undecidable.append((line, str(exc)))
                else:
                    if divergence is not None:
                        found.divergence = divergence
                        return found
                    found.same += 1
            if extra and DEFINITION in extra:
                identity = Identity.from_json(extra[DEFINITION])
                if identity is not None:
                    graph_same = identity.graph == candidate.identity.graph
                    chain = None
                    if not same_version(identity.version, candidate.spec.version):
                        chain = chain_from(candidate.spec, identity.version)
            rebuilder.follow(line, record)
        return found

    def _step(
        self,
        record: Any,
        line: int,
        number: int,
        rebuilder: Rebuilder,
        chain: Chain | None,
        graph_same: bool,
    ) -> Divergence | None:
        state = _renamed(chain, record.source)
        candidate = self.candidate
        if state not in candidate.states:
            raise Undecidable(f"state '{record.source}' is not one of the candidate's")
        extra = record.extra
        event = chain.events.get(record.event, record.event) if chain else record.event
        fired = bool(extra.get(FIRED)) if extra else False
        if not fired:
            # A journal from before steps said they were fired: an event with no automatic
            # transition from the state can only have been.
            fired = self._only_fired(state, event)
        self._observed = extra.get(OBSERVED) or {} if extra else {}
        recorded = _recorded_values(record.guards)
        found = self._choose(state, event if fired else None, recorded, record, rebuilder)
        chosen, values = found[0], tuple(GuardValue(*value) for value in found[1])
        if kind_is_error(record):
            same = chosen is not None and chosen.event == event
            if same and graph_same:
                same = chosen is not None and chosen.index == record.transition
            recorded_dest = None
        else:
            recorded_dest = _renamed(chain, record.dest)
            same = chosen is not None and (chosen.event, chosen.dest_from(state)) == (
                event,
                recorded_dest,
            )
        if same:
            return None
        evaluated = tuple(
            GuardValue(g["guard"] or "(none)", g["result"], "recorded") for g in record.guards
        )
        own = tuple(
            v
            for v, g in zip(evaluated, record.guards, strict=True)
            if g["transition"] == record.transition
        )
        taken = Decision(event, recorded_dest or "(failed)", own)
        mine = values[-len(chosen.guards) :] if chosen is not None and chosen.guards else ()
        decided = Decision(
            chosen.event if chosen else None, chosen.dest_from(state) if chosen else None, mine
        )
        return Divergence(number, line, state, taken, decided, flipped(evaluated, values))

    def _only_fired(self, state: str, event: str) -> bool:
        key = (state, event)
        found = self._fired_only.get(key)
        if found is None:
            transitions = self.candidate.transitions_from(state, event)
            found = self._fired_only[key] = bool(transitions) and not any(
                t.auto for t in transitions
            )
        return found

    def _candidates(self, state: str, event: str | None) -> list[Transition]:
        """The transitions a step from ``state`` tries, in order (the event's, or the automatic
        ones)."""
        key = (state, event)
        found = self._tried.get(key)
        if found is None:
            found = self._tried[key] = [
                t
                for t in self.candidate.transitions_from(state, event)
                if event is not None or t.auto
            ]
        return found

    def _choose(
        self,
        state: str,
        event: str | None,
        recorded: dict[str, bool],
        record: Any,
        rebuilder: Rebuilder,
    ) -> tuple[Transition | None, list[tuple[str, bool, str]]]:
        values: list[tuple[str, bool, str]] = []
        doc: list[Any] = []  # validated once, when a guard must be evaluated
        unchanged = self._unchanged
        for transition in self._candidates(state, event):
            holds_all = True
            for guard in transition.guards:
                raw = recorded.get(guard.name) if guard.name in unchanged else None
                if raw is None:
                    raw = self._evaluate(guard, transition, state, record, rebuilder, doc)
                    source = "evaluated"
                else:
                    source = "recorded"
                holds = raw != guard.negated
                values.append((guard.label, holds, source))
                if not holds:
                    holds_all = False
                    break
            if holds_all:
                return transition, values
        return None, values

    def _evaluate(
        self,
        guard: GuardRef,
        transition: Transition,
        state: str,
        record: Any,
        rebuilder: Rebuilder,
        doc: list[Any],
    ) -> bool:
        if not rebuilder.known:
            raise Undecidable(
                f"guard {guard.name} must be evaluated, but the document is unknown "
                f"({rebuilder.reason})"
            )
        if not doc:
            try:
                doc.append(self.candidate.document_model.model_validate(rebuilder.document))
            except Exception as exc:
                raise Undecidable(
                    f"the rebuilt document does not validate with the candidate: {exc}"
                ) from exc
        ctx = self._context(record).for_transition(
            transition.event, state, transition.dest_from(state)
        )
        try:
            return bool(guard.info.func(doc[0], ctx))
        except Undecidable:
            raise
        except Exception as exc:
            raise Undecidable(
                f"guard {guard.name} failed when evaluated: {type(exc).__name__}: {exc}"
            ) from exc

    def _context(self, record: Record) -> Context:
        when = datetime.fromisoformat(record.time.replace("Z", "+00:00")) if record.time else None
        return Context(
            machine=self.candidate.name,
            instance_id="replay",
            workspace=_NOWHERE,
            instance_dir=_NOWHERE,
            meta_dir=_NOWHERE,
            options=self._options_now,
            clock=SimulatedClock(when),
            log=_QuietLog(),
            executor=_RefusingExecutor(),
            observer=self._serve,
        )


def kind_is_error(record: Any) -> bool:
    return type(record) is ErrorRecord


def _renamed(chain: Chain | None, state: str) -> str:
    if chain is None:
        return state
    found = chain.states.get(state, state)
    return state if found is None else found


def _recorded_values(guards: Iterable[Any]) -> dict[str, bool]:
    """Each recorded guard's own value (before any ``not``), by name."""
    values: dict[str, bool] = {}
    for entry in guards:
        label, result = entry.get("guard"), entry.get("result")
        if label is None or result is None:
            continue
        if label.startswith("not "):
            values.setdefault(label[4:], not result)
        else:
            values.setdefault(label, bool(result))
    return values


def _same_function(one: Callable[..., Any], other: Callable[..., Any]) -> bool:
    return one is other or (
        _code_digest(one) is not None and _code_digest(one) == _code_digest(other)
    )


@functools.cache
def _code_digest(func: Callable[..., Any]) -> str | None:
    """The function's syntax tree without its docstring (None: its source cannot be read)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.decorator_list = []
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


class _QuietLog:
    """The log of a replayed guard: it says nothing."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return _nothing

    def bind(self, **values: Any) -> _QuietLog:
        return self


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _no_render(document: Any) -> bytes:
    return b""


def _no_match(document: Any, core_hash: str) -> bool:
    """Decisions are replayed on the rebuilt document without checking it against the record's
    hashes (fsm replay does that)."""
    return False


def next_choice(machine: Machine, state: str, doc: Any, ctx: Context) -> str:
    """The automatic transition ``machine`` would take now from ``state`` (``event -> dest``,
    or ``waits``), its guards evaluated on ``doc`` with ``ctx``; Undecidable when one fails."""
    for transition in machine.transitions_from(state):
        if not transition.auto:
            continue
        tctx = ctx.for_transition(transition.event, state, transition.dest_from(state))
        try:
            if all(guard.holds(doc, tctx) for guard in transition.guards):
                return f"{transition.event} -> {transition.dest_from(state)}"
        except Undecidable:
            raise
        except Exception as exc:
            raise Undecidable(f"{type(exc).__name__}: {exc}") from exc
    return "waits"


def refusing(ctx: Context) -> Context:
    """``ctx`` with an executor that runs nothing (a forecast asks, it does not act)."""
    from dataclasses import replace

    return replace(ctx, executor=_RefusingExecutor())
