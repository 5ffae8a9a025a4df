"""The registry of the skill-tuning machine: document, options, codec, guards, actions, hooks.

``machine.yaml`` names everything registered here. The action bodies live in ``actions.py``;
this module binds them to their names and holds the guards and hooks, which are small.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from fsm.errors import DocumentInputError
from fsm.executor import agent_problem
from fsm.outcome import Verdict
from fsm.registry import Registry, Update

from . import actions, ending
from .bookkeeping import failed
from .codec import TuningCodec
from .diagnosis.rule import Area
from .initial import initial_document
from .model import TuningState
from .options import TuningContext, TuningInputs, TuningOptions
from .paths import shown
from .skill import OutsideWorkspaceError, TargetSkillError, resolve_target
from .verdict import fix_tally, issue_counts, verdict

__all__ = ["registry"]

registry = Registry()
registry.document(TuningState)
registry.options(TuningOptions)
registry.inputs(TuningInputs)
registry.codec("tuning_state", TuningCodec())


@registry.guard(budget=True)
def errors_exhausted(doc: TuningState, ctx: TuningContext) -> bool:
    """True when ``error_count`` has reached ``max_errors``: the run must abort."""
    return doc.error_count >= doc.max_errors


@registry.guard(budget=True)
def iterations_exhausted(doc: TuningState, ctx: TuningContext) -> bool:
    """True when ``iteration_count`` has reached ``max_iterations``: the run must complete."""
    return doc.iteration_count >= doc.max_iterations


@registry.guard(budget=True)
def iterations_left(doc: TuningState, ctx: TuningContext) -> bool:
    """True while ``iteration_count < max_iterations``: another round may start."""
    return doc.iteration_count < doc.max_iterations


@registry.guard
def gate_passed(doc: TuningState, ctx: TuningContext) -> bool:
    """True when the last verification put the skill through the quality gate."""
    return doc.quality_gate == "pass"


@registry.guard
def has_pending_fix(doc: TuningState, ctx: TuningContext) -> bool:
    """True when some proposed fix can be applied (mechanically or by the fix agent)."""
    return bool(doc.pending_fixes)


def _diagnose(area: Area) -> Callable[[TuningState, TuningContext], Update]:
    def run(doc: TuningState, ctx: TuningContext) -> Update:
        return actions.diagnose_area(area, doc, ctx)

    run.__doc__ = f"Run the {area} diagnosis on the target skill."
    return run


_ACTIONS: Mapping[str, Callable[[TuningState, TuningContext], Update]] = {
    "init": actions.init,
    "diagnose_context": _diagnose("context"),
    "diagnose_memory": _diagnose("memory"),
    "diagnose_dataflow": _diagnose("dataflow"),
    "diagnose_agent": _diagnose("agent"),
    "verify": actions.verify,
    "apply_fix": actions.apply_fix,
    "iterate": actions.iterate,
    "complete": ending.complete,
    "give_up": ending.give_up,
    "abort": ending.abort,
    "stop": ending.stop,
    "touch": actions.touch,
}
for _name, _action in _ACTIONS.items():
    registry.action(name=_name)(_action)


def _nested(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs with dotted keys (``target_skill.path``) expanded into nested mappings."""
    nested: dict[str, Any] = {}
    for key, value in inputs.items():
        *parents, leaf = key.split(".")
        node = nested
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise DocumentInputError(f"input {key!r} conflicts with the value of {part!r}")
            node = child
        if isinstance(value, Mapping) and isinstance(node.get(leaf), dict):
            node[leaf] = {**node[leaf], **_nested(value)}
        else:
            node[leaf] = value
    return nested


@registry.hook
def create(inputs: Mapping[str, Any], ctx: TuningContext) -> dict[str, Any]:
    """A new instance for the skill at ``target_skill.path``: the original skill's whole template
    with the inputs merged in; its work dir is the instance folder, its backups go to
    ``backups/``."""
    # The engine has refused every key the inputs model (TuningInputs) does not name.
    values = _nested(inputs)
    target = values.get("target_skill", {})
    path = target.get("path") if isinstance(target, dict) else None
    if path is not None and not isinstance(path, str):
        raise DocumentInputError(
            f"target_skill.path must be a folder path, got {path!r}; to name a folder {path}, "
            f"quote it: --set 'target_skill.path=\"{path}\"'"
        )
    try:
        resolve_target(ctx.workspace, path, ctx.options.allow_outside)
    except TargetSkillError as exc:
        raise DocumentInputError(str(exc)) from exc
    work = ctx.instance_dir
    values |= {
        "status": "pending",
        "updated_at": ctx.clock.iso(),
        "work_dir": shown(work, ctx),
        "backup_dir": shown(work / "backups", ctx),
    }
    try:
        document = initial_document(values)
    except ValidationError as exc:
        message = f"skill-tuning inputs do not make a document: {_one_line(exc)}"
        raise DocumentInputError(message) from exc
    if document["max_iterations"] < 1:
        # the model reads 0 in documents written elsewhere; a new run with no iteration would
        # end "completed" at once, without a diagnosis
        raise DocumentInputError(
            f"max_iterations must be at least 1, got {document['max_iterations']}"
        )
    return document


def _one_line(error: ValidationError) -> str:
    """Pydantic's problems as ``field: message; ...`` (its own text spans several lines)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'document'}: {problem['msg']}"
        for problem in error.errors()
    )


@registry.hook
def on_error(doc: TuningState, ctx: TuningContext, error: BaseException) -> Update:
    """Record the failure: an ``ErrorEntry`` (the last 5 kept), ``error_count + 1``."""
    event = ctx.transition.event if ctx.transition is not None else None
    return failed(doc, ctx, ctx.failed_action or event or "unknown", error)


@registry.hook
def summary(doc: TuningState) -> dict[str, str]:
    """Extra lines of ``fsm status``: the counts the tuning report shows, made by the same
    functions, so the two always agree."""
    return {
        "target": f"{doc.target_skill.name or '?'} ({doc.target_skill.path})",
        "iteration": f"{doc.iteration_count}/{doc.max_iterations}",
        "quality": f"{doc.quality_score:g}/100, gate {doc.quality_gate}",
        "issues": issue_counts(doc),
        "fixes": str(fix_tally(doc)),
        "errors": f"{doc.error_count}/{doc.max_errors}",
    }


@registry.hook
def outcome(doc: TuningState) -> Verdict:
    """Success only when the quality gate passed; the reason is the report's Outcome line."""
    success, reason = verdict(doc)
    return Verdict(success, reason)


@registry.hook
def preflight(doc: TuningState, ctx: TuningContext) -> list[str]:
    """What a run needs before it may start: the fix agent named by option ``fix_tool``, and,
    for a skill outside the workspace, option ``allow_outside`` naming its folder."""
    problems = []
    try:
        resolve_target(ctx.workspace, doc.target_skill.path, ctx.options.allow_outside)
    except OutsideWorkspaceError as exc:
        problems.append(str(exc))
    except TargetSkillError:
        pass  # a skill folder that went missing is an action failure, counted by max_errors
    tool = ctx.options.fix_tool
    why = None if tool is None else agent_problem(ctx.executor, tool)
    if why is None:
        return problems
    return [
        *problems,
        f"agent '{tool}' (option fix_tool) cannot run: {why}; or unset fix_tool to leave the "
        "fixes that need judgement to a person",
    ]
