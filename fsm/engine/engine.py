"""The engine: steps, named events and runs, each step one transaction.

This is the only module that imports ``transitions``, which is the engine's kernel: it chooses
and takes each step's transition. Every declared transition is registered with it (see
:class:`Kernel`) under its event's trigger and, when automatic, under the trigger of automatic
transitions, in declared order, with its guards as conditions and its actions as its ``before``
callback. The engine triggers one, and ``transitions`` evaluates the candidates' guards in
order, takes the first transition whose guards all hold, runs its actions first (one that
raises cancels the move) and moves to its destination, which the engine checks against the
declared one. The kernel's conditions record each guard's result for the journal. Listing the
events a person may choose (:meth:`Engine.allowed_events`) evaluates guards without it: no
transition is taken there.

A step (:meth:`Engine.step`, :meth:`Engine.fire`):

1. re-reads the document; when the control status is not active, nothing runs;
2. has the kernel choose a transition: the named event's first enabled transition, or the first
   enabled automatic transition of the current state, in declared order, and take it: its
   actions run, each returning an update, and the destination state is written;
3. validates the result, merges what other writers changed meanwhile, writes it atomically and
   journals it;
4. on failure (a guard or an action raised, the result did not validate) writes only the error
   bookkeeping of the machine's ``on_error`` hook; the traceback goes to the journal and the
   instance log.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError
from transitions import Machine as _KernelMachine

from fsm.base.errors import (
    EventNotAllowedError,
    FsmError,
    GuardRejectedError,
    MissingRequirementError,
    UnsafePathError,
    UnwritableDocumentError,
    VersionMismatchError,
)
from fsm.base.update import apply_update, to_json_value
from fsm.engine.control import ControlPlane
from fsm.engine.instance import Instance, Loaded
from fsm.engine.migration import (
    MigrationPlan,
    apply_migration,
    compatibility,
    masked_options,
    plan_migration,
    refusal,
)
from fsm.engine.rules import DocumentRules
from fsm.model.context import Context
from fsm.model.definition import describe_validation
from fsm.model.identity import DEFINITION
from fsm.model.machine import FieldCodec, GuardRef, Machine, Transition, event_options
from fsm.model.outcome import RUN_ENDED_EVENTS, Choice, Chooser, RunOutcome, RunResult, StepResult
from fsm.model.records import (
    AGENT_RUNS,
    FIRED,
    OBSERVED,
    OPTIONS,
    ErrorRecord,
    GuardResult,
    TransitionRecord,
)
from fsm.process import orphans
from fsm.process.agent_runs import AgentRecorder
from fsm.store.heartbeat import Pulse, heartbeats_of
from fsm.store.protocol import Lease

__all__ = ["Engine", "Kernel"]

MAX_CONSECUTIVE_FAILURES = 100
"""A run gives up after this many failed steps in a row, whatever the machine's own limits."""


class _KernelModel:
    """The object whose ``state`` attribute the transitions kernel moves."""

    state: str


class Attempt(Protocol):
    """What the kernel's callbacks call back into during one trigger (the engine's step)."""

    def guard(self, transition: Transition, guard: GuardRef) -> bool:
        """Evaluate ``guard`` of ``transition`` (a condition of the kernel)."""
        ...

    def enter(self, transition: Transition) -> None:
        """Run the actions of ``transition``, which the kernel is taking (raise to cancel)."""
        ...


_AUTO = "auto:"
"""The trigger of the automatic transitions (an event's trigger is ``event:<name>``; names
cannot contain ``:``, so the two never collide)."""


class Kernel:
    """The machine's graph in ``transitions``, which chooses and takes the transition of a step.

    Every declared transition is registered, in declared order, under its event's trigger and,
    when automatic, also under the trigger the automatic transitions share. Its guards are its
    conditions and its actions its ``before`` callback. :meth:`take` triggers one of them:
    ``transitions`` tries the current state's candidates in declared order, evaluating each one's
    conditions in order until one fails, and takes the first whose conditions all hold, calling
    its ``before`` first (an exception there, or in a condition, propagates and leaves the state
    unchanged).
    """

    def __init__(self, machine: Machine) -> None:
        self.model = _KernelModel()
        self._machine = _KernelMachine(
            model=self.model,
            states=list(machine.states),
            initial=machine.spec.initial,
            auto_transitions=False,
            send_event=True,
            ignore_invalid_triggers=False,
        )
        self._taken: Transition | None = None
        for transition in machine.transitions:
            conditions: list[str | Callable[..., bool | None]] = [
                _condition(transition, guard) for guard in transition.guards
            ]
            before = partial(self._before, transition)
            # "=" is transitions' own spelling of "the source state", as it is fsm's.
            dest = "=" if transition.dest is None else transition.dest
            triggers = [f"event:{transition.event}"] + ([_AUTO] if transition.auto else [])
            for trigger in triggers:
                self._machine.add_transition(
                    trigger,
                    source=list(transition.sources),
                    dest=dest,
                    conditions=conditions,
                    before=before,
                )
        # Triggers looked up once: a step triggers one directly.
        self._triggers: dict[str | None, Any] = {
            name.removeprefix("event:"): event
            for name, event in self._machine.events.items()
            if name != _AUTO
        }
        self._triggers[None] = self._machine.events.get(_AUTO)

    @property
    def state(self) -> str:
        """The state the kernel is in (where its last move ended)."""
        return self.model.state

    def accepts(self, state: str, event: str | None) -> bool:
        """True when ``state`` has a transition for ``event`` (None: an automatic one)."""
        trigger = self._triggers.get(event)
        return trigger is not None and state in trigger.transitions

    def take(self, state: str, event: str | None, attempt: Attempt) -> Transition | None:
        """From ``state``, take the first transition for ``event`` (None: the first automatic
        one) whose guards hold, in declared order; None when there is none (or ``state`` has
        none: see :meth:`accepts`). ``attempt`` evaluates the guards and runs the actions; what
        they raise propagates, and the kernel stays in ``state``. A move that does not end in
        the destination the machine declares is an internal error (FsmError).
        """
        model = self.model
        if getattr(model, "state", None) != state:
            self._machine.set_state(state, model=model)
        trigger = self._triggers.get(event)
        if trigger is None or state not in trigger.transitions:
            return None
        self._taken = None
        try:
            moved = trigger.trigger(model, attempt)
        finally:
            taken, self._taken = self._taken, None
        if not moved:
            return None
        if taken is None or model.state != taken.dest_from(state):
            # The graph given to transitions and the machine disagree: a bug of the engine.
            raise FsmError(
                f"internal error: the kernel moved from '{state}' to '{model.state}' through "
                f"{'no declared transition' if taken is None else f'transition {taken.index}'}"
            )
        return taken

    def _before(self, transition: Transition, event: Any) -> None:
        self._taken = transition
        attempt: Attempt = event.args[0]
        attempt.enter(transition)


def _condition(transition: Transition, guard: GuardRef) -> Callable[[Any], bool]:
    """A kernel condition: ``guard`` of ``transition``, evaluated by the trigger's attempt."""

    def condition(event: Any) -> bool:
        attempt: Attempt = event.args[0]
        return attempt.guard(transition, guard)

    return condition


class _Attempt:
    """One step's trigger of the kernel: evaluates guards (each result recorded for the journal)
    and runs the actions of the transition taken, leaving the resulting document."""

    __slots__ = (
        "codec_reads_document",
        "contexts",
        "data",
        "evaluated",
        "loaded",
        "pulse",
        "rules",
        "started",
        "transition",
    )

    def __init__(
        self,
        loaded: Loaded,
        contexts: Callable[[Transition, str], Context],
        rules: DocumentRules,
        *,
        codec_reads_document: bool,
        pulse: Pulse | None = None,
    ) -> None:
        self.loaded = loaded
        self.pulse = pulse
        """The heartbeat of the run under way, told of each action it starts."""
        self.contexts = contexts
        """The context a transition's guards and actions see, from a source state."""
        self.rules = rules
        self.codec_reads_document = codec_reads_document
        """Whether the machine's codec reads the document to write the state: it then gets the
        validated result of the actions."""
        self.evaluated: list[GuardResult] = []
        self.transition: Transition | None = None
        """The transition whose guard or actions ran last (the one a failure is charged to)."""
        self.started: float | None = None
        self.data: dict[str, Any] = {}

    def guard(self, transition: Transition, guard: GuardRef) -> bool:
        self.transition = transition
        tctx = self.contexts(transition, self.loaded.state)
        try:
            result = guard.holds(self.loaded.doc, tctx)
        except Exception as exc:
            self.evaluated.append(
                {"transition": transition.index, "guard": guard.label, "result": None}
            )
            raise _ActionsFailed(f"guard {guard.name}", exc) from exc
        self.evaluated.append(
            {"transition": transition.index, "guard": guard.label, "result": result}
        )
        return result

    def enter(self, transition: Transition) -> None:
        self.transition = transition
        if not transition.guards:
            self.evaluated.append({"transition": transition.index, "guard": None, "result": True})
        self.started = time.monotonic()
        current = self.loaded
        tctx = self.contexts(transition, current.state)
        dest = transition.dest_from(current.state)
        data, doc = current.data, current.doc
        last = len(transition.actions) - 1
        unchecked = False
        pulse = self.pulse
        for position, (name, action) in enumerate(transition.actions):
            if pulse is not None:
                pulse.doing(name, current.state)
            try:
                update = action(doc, tctx)
                if update:
                    data = apply_update(data, update)
                    # The next action (or a codec that reads the document) needs it now;
                    # otherwise it is validated once, with the state written (below).
                    unchecked = position == last and not self.codec_reads_document
                    if not unchecked:
                        doc = self.rules.validate(data)
            except Exception as exc:
                raise _ActionsFailed(name, exc) from exc
        self.data = self._entered(data, doc, dest, transition if unchecked else None)

    def _entered(
        self, data: dict[str, Any], doc: BaseModel, dest: str, unchecked: Transition | None
    ) -> dict[str, Any]:
        """``data`` with ``dest`` (and the control status it sets) written into it, validated.

        ``unchecked`` is the transition whose last action's update is not validated yet: when
        the result does not validate, the failure is that action's if its update alone already
        broke the document (as validating after every action tells), else the validation's.
        """
        rules = self.rules
        write = rules.entering(doc, dest)
        result = apply_update(data, write) if write else data
        try:
            rules.validate(result)
        except ValidationError as exc:
            if unchecked is not None:
                try:
                    rules.validate(data)
                except ValidationError as own:
                    raise _ActionsFailed(unchecked.actions[-1][0], own) from own
            raise _ActionsFailed(None, exc) from exc
        return result


class _ActionsFailed(Exception):
    """Carries the failure of an action or of validation out of the kernel."""

    def __init__(self, action: str | None, error: BaseException) -> None:
        super().__init__(str(error))
        self.action = action
        self.error = error


class Engine:
    """Drives one instance: step, fire, run."""

    def __init__(
        self,
        instance: Instance,
        *,
        interactive: bool = False,
        reconfigure: bool = False,
        lease: Lease | None = None,
        kernel: Kernel | None = None,
    ) -> None:
        self.instance = instance
        self._given_lease = lease
        """A lease the caller took already (a worker's claim): the run uses it instead of
        taking one, and releases it when it ends."""
        self.machine = instance.machine
        self.interactive = interactive
        self.reconfigure = reconfigure
        """The options as they are now replace those the instance pinned (see
        :class:`~fsm.model.context.Context`)."""
        self.kernel = kernel if kernel is not None else Kernel(self.machine)
        """The machine's kernel: a caller that drives many instances of one machine in turn,
        in one thread (a worker), hands each engine the same one."""
        self.control = ControlPlane(instance)
        self._lock_held = False
        self.pulse: Pulse | None = None
        """The heartbeat of the run under way (:mod:`fsm.store.heartbeat`): told of each action."""
        # The context of this engine's steps and, per (transition, source), the copy its guards
        # and actions see: what they hold is fixed for the instance, so they are built once.
        self._ctx: Context | None = None
        self._tctx: dict[tuple[int, str], Context] = {}
        # The agent runs of the step under way, written into its journal record.
        self._agents: AgentRecorder | None = None
        # Why a person fired the event of the step under way (fire's reason), journaled with it.
        self._reason: str | None = None
        # A codec of the machine's own may read the document to write the state: it gets the
        # validated result of the actions. The field codec only writes the state.
        self._codec_reads_document = not isinstance(self.machine.codec, FieldCodec)
        self._definition_checked = False
        self._observed: dict[str, Any] = {}
        """What the step under way observed (:meth:`fsm.model.context.Context.observe`)."""
        self._fired = False
        """Whether the step under way was fired by name."""
        self._new_graph: dict[str, Any] = {}
        """What the run's first step record adds: the options it runs with and the identity of
        the definition it runs under."""

    def context(self) -> Context:
        """The context of this engine's guards, actions and hooks (built once)."""
        if self._ctx is None:
            ctx = self.instance.context(interactive=self.interactive, reconfigure=self.reconfigure)
            self._agents = AgentRecorder(ctx.executor, ctx.log)
            self._ctx = replace(ctx, executor=self._agents, observer=self._observe)
        return self._ctx

    def _record_extra(self) -> dict[str, Any]:
        """The ``extra`` of the step's record: the agent runs of the step, when it ran any, the
        reason it was fired for, when one was given, what it observed, whether it was fired,
        and (the run's first step) the definition and options it ran with."""
        runs = self._agents.runs if self._agents is not None else []
        extra: dict[str, Any] = {AGENT_RUNS: list(runs)} if runs else {}
        if self._reason is not None:
            extra["reason"] = self._reason
        if self._observed:
            extra[OBSERVED] = self._observed
        if self._fired:
            extra[FIRED] = True
        if self._new_graph:
            extra.update(self._new_graph)
            self._new_graph = {}
        return extra

    def _observe(self, name: str, read: Callable[[], Any]) -> Any:
        """Read through ``read`` and keep the step's first value of ``name`` for its record."""
        value = to_json_value(read())
        self._observed.setdefault(name, value)
        return value

    def _transition_context(self, transition: Transition, source: str) -> Context:
        key = (transition.index, source)
        tctx = self._tctx.get(key)
        if tctx is None:
            dest = transition.dest_from(source)
            tctx = self._tctx[key] = self.context().for_transition(transition.event, source, dest)
        return tctx

    def step(self, *, actor: str = "engine") -> StepResult:
        """Take the first enabled automatic transition of the current state.

        Unlike :meth:`run`, a step does not start a created instance: it reports ``blocked``
        until the instance is started (``fsm start`` or :class:`~fsm.engine.control.ControlPlane`).
        """
        with self._run_lock():
            self._under_installed_definition(actor)
            return self._step(None, actor)

    def fire(self, event: str, *, actor: str = "cli", reason: str | None = None) -> StepResult:
        """Take the first enabled transition for ``event``; refuse when there is none. The
        ``reason`` (why a person fired it) is journaled with the step, as a control command's
        is."""
        with self._run_lock():
            self._under_installed_definition(actor)
            self._reason = reason
            try:
                return self._step(event, actor)
            finally:
                self._reason = None

    def migrate(self, *, dry_run: bool = False, actor: str = "migrate") -> MigrationPlan | None:
        """Migrate the instance to the installed definition when it runs under an earlier
        version with a declared migration (:mod:`fsm.engine.migration`); return what was (or,
        with ``dry_run``, would be) done, None when nothing needs to be. Raises
        VersionMismatchError when it cannot be run or migrated."""
        with self._run_lock():
            found = compatibility(self.instance)
            refused = refusal(self.instance, found)
            if refused:
                raise VersionMismatchError(refused)
            if found.kind != "migrate":
                return None
            plan = plan_migration(self.instance, found)
            if not dry_run:
                apply_migration(self.instance, plan, actor=actor)
            return plan

    def _under_installed_definition(self, actor: str) -> None:
        """Refuse an instance the installed definition cannot run, migrate one it can run by
        migrating (see :mod:`fsm.engine.migration`); the run's first step record names the
        definition it ran under. Once per engine."""
        if self._definition_checked or not self.instance.exists():
            return
        # The run's first step record names the definition and the options it runs with: the
        # next run finds what it runs under a few records back, not at the journal's start.
        self._new_graph = {
            OPTIONS: masked_options(self.instance.options),
            DEFINITION: self.machine.identity.to_json(),
        }
        found = compatibility(self.instance)
        refused = refusal(self.instance, found)
        if refused:
            self.instance.log.info("run_refused", reason=refused)
            raise VersionMismatchError(refused)
        if found.kind == "migrate":
            plan = plan_migration(self.instance, found)
            apply_migration(self.instance, plan, actor=actor)
            self.instance.log.warning("migrated_before_run", migration=plan.text(self.machine.name))
        self._definition_checked = True

    @contextlib.contextmanager
    def _run_lock(self) -> Iterator[None]:
        """Hold the instance's run lease (refused with LockHeldError when another run has it);
        every write of the run is fenced by it.

        Holding it, first clean up after a run that died outright: kill the commands it left
        behind (:mod:`fsm.process.orphans`), so that two agents never work on the same files, and
        make its journal and document agree (:meth:`fsm.engine.transaction.Transaction.repair`). At
        the end, take in a write another program made meanwhile. Meanwhile the machine's own writes
        through :mod:`fsm.helpers` are confined to the workspace.
        """
        if self._lock_held:
            yield
            return
        instance = self.instance
        lease, self._given_lease = self._given_lease, None
        if lease is None:
            lease = instance.store.lease(instance.id)
        # A lease the store learns is lost (its holder stopped renewing it in time) can no
        # longer commit: the commands its steps run are killed, whose work would be wasted and
        # would meet the work of the run that takes the instance over.
        running = instance.running_folder

        def lost() -> None:
            orphans.reap(running)

        lease.watch(lost)
        instance.transaction.fence = lease
        self._lock_held = True
        session = contextlib.ExitStack()
        try:
            exists = instance.exists()
            if exists:
                session.enter_context(instance.session())
            with instance.confined():
                for command in orphans.reap(instance.running_folder):
                    instance.log.warning(
                        "orphaned_command_killed",
                        pgid=command.get("pgid"),
                        program=command.get("program"),
                    )
                if exists:
                    instance.repair()
                yield
        finally:
            self._lock_held = False
            try:
                instance.settle()
            except FsmError as exc:
                instance.log.error("settle_failed", error=str(exc))
            finally:
                session.close()
                instance.transaction.fence = None
                lease.release()

    def missing_requirements(self, loaded: Loaded | None = None) -> list[str]:
        """What the machine's ``preflight`` hook says a run of this instance needs and lacks
        (agents, programs), one line each; empty when nothing is missing or there is no hook."""
        hook = self.machine.hooks.preflight
        if hook is None:
            return []
        current = loaded or self.instance.load()
        try:
            missing = hook(current.doc, self.context())
        except Exception as exc:
            raise FsmError(
                f"the preflight check of '{self.instance.id}' failed: {type(exc).__name__}: {exc}"
            ) from exc
        return [str(line) for line in missing or ()]

    def check_requirements(self, loaded: Loaded | None = None) -> None:
        """Raise MissingRequirementError when :meth:`missing_requirements` finds anything."""
        missing = self.missing_requirements(loaded)
        if missing:
            self.instance.log.info("run_refused", missing=missing)
            raise MissingRequirementError(f"instance '{self.instance.id}'", missing)

    def allowed_events(self, loaded: Loaded | None = None) -> list[Choice]:
        """Events of the current state whose guards hold now."""
        current = loaded or self.instance.load()
        options = event_options(self.machine, current.state, current.doc, self.context())
        return [Choice(o.event, o.description) for o in options if o.enabled]

    def run(
        self,
        *,
        max_steps: int | None = None,
        chooser: Chooser | None = None,
        actor: str = "run",
        on_step: Callable[[StepResult], None] | None = None,
    ) -> RunResult:
        """Step until a final state, a pause or stop, waiting for input, or ``max_steps``.

        Before it starts or drives an instance, the run asks the machine's ``preflight`` hook
        what it needs and lacks, and refuses (MissingRequirementError, nothing changed) rather
        than do part of the work. A run that reaches a final state is ``completed`` only when
        the machine's verdict (:meth:`~fsm.model.machine.Machine.verdict`) says its goal was
        reached; the verdict's reason is the result's ``message``. ``on_step`` is called with each
        step taken (progress display).
        """
        with self._run_lock():
            self._under_installed_definition(actor)
            loaded = self.instance.load()
            will_work = self.control.is_active(loaded) or self.control.needs_start(loaded)
            if will_work and not self.machine.is_final(loaded.state):
                self.check_requirements(loaded)
            loaded = self.control.start_if_needed(loaded, actor=actor)
            self.instance.log.info("run_started", state=loaded.state, status=loaded.status)
            store = self.instance.store
            pulse = Pulse(heartbeats_of(store), self.instance.id, actor, loaded.state)
            with pulse.running():
                self.pulse = pulse
                try:
                    result = self._run_steps(max_steps, chooser, actor, on_step)
                finally:
                    self.pulse = None
        self.instance.log.info(
            RUN_ENDED_EVENTS[result.outcome],
            state=result.state,
            status=result.status,
            steps=len(result.steps),
            reason=result.message,
        )
        return result

    def _run_steps(
        self,
        max_steps: int | None,
        chooser: Chooser | None,
        actor: str,
        on_step: Callable[[StepResult], None] | None,
    ) -> RunResult:
        steps: list[StepResult] = []
        failures = 0
        while True:
            loaded = self.instance.load()
            ended = self._ended(loaded, steps, max_steps)
            if ended is not None:
                return ended
            result = self._step(None, actor, loaded=loaded)
            if self.pulse is not None:
                self.pulse.doing(None, result.state)
            if result.outcome == "waiting" and chooser is not None:
                choices = self.allowed_events()
                event = chooser(result.state, choices) if choices else None
                if event is not None:
                    result = self._step(event, "person")
            if result.outcome == "waiting":
                return RunResult(
                    "waiting",
                    result.state,
                    result.status,
                    steps,
                    f"no automatic transition is enabled in state '{result.state}'",
                )
            steps.append(result)
            if on_step is not None:
                on_step(result)
            failures = failures + 1 if result.outcome == "failed" else 0
            if failures and self.machine.hooks.on_error is None:
                return RunResult("error", result.state, result.status, steps, result.error or "")
            if result.uncounted:
                # Going on would repeat a failure no limit of the machine counts.
                return RunResult("error", result.state, result.status, steps, result.error or "")
            if failures >= MAX_CONSECUTIVE_FAILURES:
                return RunResult(
                    "error",
                    result.state,
                    result.status,
                    steps,
                    f"gave up after {failures} consecutive failed steps: {result.error}",
                )

    def _ended(
        self, loaded: Loaded, steps: list[StepResult], max_steps: int | None
    ) -> RunResult | None:
        state, status = loaded.state, loaded.status
        verdict = self.machine.verdict(state, loaded.doc)
        if verdict is not None:
            outcome: RunOutcome = "completed" if verdict.success else "failed"
            return RunResult(outcome, state, status, steps, verdict.reason)
        if not self.control.is_active(loaded):
            outcome = "paused" if self.control.is_paused(loaded) else "stopped"
            message = f"instance is {status}{self._how_to_continue(loaded)}"
            error = self.instance.journal.last_error()
            if error is not None:
                message += f"; last error: {error.action}: {error.error}"
            return RunResult(outcome, state, status, steps, message)
        if max_steps is not None and len(steps) >= max_steps:
            return RunResult(
                "limit", state, status, steps, f"reached the step limit of {max_steps}"
            )
        return None

    def _how_to_continue(self, loaded: Loaded) -> str:
        """`` (resume it to continue)`` for a paused instance, `` (start it, or run it again, to
        continue)`` for one set back to where a run starts it, else nothing."""
        if self.control.needs_start(loaded):
            return " (start it, or run it again, to continue)"
        allowed = self.control.allowed(loaded)
        for command in ("resume", "start"):
            if command in allowed:
                return f" ({command} it to continue)"
        return ""

    def _step(self, event: str | None, actor: str, loaded: Loaded | None = None) -> StepResult:
        instance = self.instance
        current = loaded or instance.load()
        state, status = current.state, current.status
        if self.machine.is_final(state):
            if event is not None:
                from fsm.engine.retry import retry_advice

                raise EventNotAllowedError(
                    f"instance '{instance.id}' is in final state '{state}': no events are "
                    f"accepted{retry_advice(instance, current)}"
                )
            return StepResult("final", state, status)
        if not self.control.is_active(current):
            instance.log.info("step_blocked", state=state, status=status)
            if event is not None:
                raise EventNotAllowedError(
                    f"instance '{instance.id}' is {status}: events are not accepted "
                    "until it is running"
                )
            return StepResult("blocked", state, status)
        ctx = self.context()
        if self._agents is not None:
            self._agents.clear()
        self._observed = {}
        self._fired = event is not None
        if event is not None and not self.kernel.accepts(state, event):
            allowed = ", ".join(self.machine.events_from(state)) or "none"
            raise EventNotAllowedError(
                f"event '{event}' is not allowed in state '{state}' (allowed: {allowed})"
            )
        attempt = _Attempt(
            current,
            self._transition_context,
            self.instance.rules,
            codec_reads_document=self._codec_reads_document,
            pulse=self.pulse,
        )
        try:
            chosen = self.kernel.take(state, event, attempt)
        except _ActionsFailed as failure:
            assert attempt.transition is not None  # only a guard or an action raises it
            started = time.monotonic() if attempt.started is None else attempt.started
            return self._failed(
                current, attempt.transition, ctx, failure, attempt.evaluated, actor, started
            )
        evaluated = attempt.evaluated
        if chosen is None:
            instance.log.info("guard_rejected", state=state, trigger=event, guards=evaluated)
            if event is not None:
                shown = ", ".join(f"{e['guard']}={e['result']}" for e in evaluated)
                raise GuardRejectedError(
                    f"event '{event}' refused in state '{state}' by its guards ({shown})"
                )
            return StepResult("waiting", state, status)
        return self._commit(current, chosen, ctx, attempt, actor)

    def _commit(
        self, current: Loaded, transition: Transition, ctx: Context, attempt: _Attempt, actor: str
    ) -> StepResult:
        """Commit the step the kernel took through ``transition`` (``attempt`` ran it)."""
        instance = self.instance
        source = current.state
        dest = transition.dest_from(source)
        evaluated = attempt.evaluated
        started = time.monotonic() if attempt.started is None else attempt.started
        record = TransitionRecord(
            event=transition.event,
            transition=transition.index,
            source=source,
            dest=dest,
            guards=evaluated,
            actions=[name for name, _ in transition.actions],
            actor=actor,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            extra=self._record_extra(),
        )
        try:
            saved = instance.commit(attempt.data, record, base=current)
        except UnwritableDocumentError as exc:
            unwritable = _ActionsFailed(None, exc)
            return self._failed(current, transition, ctx, unwritable, evaluated, actor, started)
        instance.log.info(
            "transition_applied",
            trigger=transition.event,
            source=source,
            dest=saved.state,
            duration_ms=record.duration_ms,
        )
        return StepResult(
            "applied", saved.state, saved.status, transition.event, source, saved.state
        )

    def _failed(
        self,
        current: Loaded,
        transition: Transition,
        ctx: Context,
        failure: _ActionsFailed,
        evaluated: list[GuardResult],
        actor: str,
        started: float,
    ) -> StepResult:
        instance = self.instance
        error = failure.error
        if isinstance(error, ValidationError):
            message = f"the step's result does not validate: {describe_validation(error)}"
        elif isinstance(error, FsmError):
            message = str(error)
        else:
            message = f"{type(error).__name__}: {error}"
        where = failure.action or "validation"
        trace = "".join(traceback.format_exception(error))
        instance.log.step_failed(
            "action_failed",
            traceback=trace,
            trigger=transition.event,
            state=current.state,
            action=where,
            error=message,
        )
        record = ErrorRecord(
            event=transition.event,
            transition=transition.index,
            source=current.state,
            dest=current.state,
            guards=evaluated,
            action=where,
            error=message,
            traceback=trace,
            actor=actor,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            extra=self._record_extra(),
        )
        hook = self.machine.hooks.on_error
        saved = current
        uncounted: Exception | None = None
        if hook is not None:
            tctx = replace(
                ctx.for_transition(transition.event, current.state, current.state),
                failed_action=where,
            )
            try:
                update = hook(current.doc, tctx, error)
                data = apply_update(current.data, update or {})
                saved = instance.commit(data, record, base=current)
            except Exception as exc:
                instance.log.error(
                    "error_bookkeeping_failed", traceback=traceback.format_exc(), error=str(exc)
                )
                saved = instance.journal_failure(record, base=current)
                uncounted = exc
        else:
            saved = instance.journal_failure(record, base=current)
        if isinstance(error, UnsafePathError):
            # The workspace refuses (a folder that is a link out of it): no retry can succeed,
            # so the failure, journaled, ends the command as a store error (exit 6) instead of
            # counting towards the machine's error limits.
            raise error
        return StepResult(
            "failed",
            saved.state,
            saved.status,
            transition.event,
            current.state,
            current.state,
            error=f"{where} failed: {message}" + _uncounted(uncounted),
            uncounted=uncounted is not None,
        )


def _uncounted(exc: Exception | None) -> str:
    """What a reason adds when the error bookkeeping failed too (the run then stops)."""
    if exc is None:
        return ""
    said = str(exc) if isinstance(exc, FsmError) else f"{type(exc).__name__}: {exc}"
    return f"; its error bookkeeping (on_error) failed too, so the run stops: {said}"
