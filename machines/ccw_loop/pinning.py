"""The loop's configuration is pinned: what it validates with is what it started with.

A loop that validates a fix with another test command than the one its failing tests were found
with proves nothing, and a fix agent can edit fsm.toml (add ``--deselect`` of the failing test to
``test_command``). So init writes :data:`PINNED`, the options that decide how the work is done
and judged (the test command and its timeout, the fix agent, the task timeout, the number of
hypotheses, whether fixes may change the tests), into ``skill_state.config``, beside the limits
``max_errors`` and ``max_fix_attempts`` it already keeps; from then on the actions use the pinned
values, whatever fsm.toml or ``-o`` say now.

A configuration that differs when the loop is run again is reported by the preflight, one line
naming each change, and the run is refused (exit 2, nothing changed) until the person either
restores it or runs ``fsm run --reconfigure``, which adopts the options as they are now and pins
them in the document by the next action. A loop without ``config`` (written before pinning, or
by CCW's own skills) pins the options of its next action. ``fsm step`` and ``fsm fire`` run no
preflight: they use the pinned values, so a changed fsm.toml is never adopted silently there
either.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fsm.registry import Update

from .model import LoopState
from .options import LoopContext, LoopOptions

__all__ = [
    "PINNED",
    "configuration_changes",
    "pinned",
    "pinned_config",
    "repinned",
    "with_pinned",
]

PINNED: tuple[str, ...] = (
    "test_command",
    "test_timeout",
    "fix_tool",
    "task_timeout",
    "max_hypotheses",
    "allow_test_changes",
)
"""Options kept in ``skill_state.config`` (the limits have fields of their own)."""
_LIMITS = ("max_errors", "max_fix_attempts")


def pinned_config(options: LoopOptions) -> dict[str, Any]:
    """``skill_state.config`` for ``options``."""
    return {name: getattr(options, name) for name in PINNED}


def _stored(doc: LoopState) -> dict[str, Any] | None:
    state = doc.skill_state
    config = (state.model_extra or {}).get("config") if state is not None else None
    return config if isinstance(config, dict) else None


def pinned(doc: LoopState, ctx: LoopContext) -> LoopContext:
    """``ctx`` with the options the loop pinned (``ctx`` itself when it pinned none, or when
    the run adopts the options as they are now)."""
    config = _stored(doc)
    if config is None or ctx.reconfigure:
        return ctx
    kept = {name: config[name] for name in PINNED if name in config}
    try:
        options = LoopOptions.model_validate({**ctx.options.model_dump(), **kept})
    except ValueError:
        return ctx  # a hand-edited config that no longer validates: the options as they are
    return replace(ctx, options=options)


def configuration_changes(doc: LoopState, ctx: LoopContext) -> list[str]:
    """``test_command 'A' is now 'B'``, one for each pinned option the workspace changed."""
    config = _stored(doc)
    state = doc.skill_state
    if config is None or state is None:
        return []
    changes = [
        f"{name} {config[name]!r} is now {getattr(ctx.options, name)!r}"
        for name in PINNED
        if name in config and config[name] != getattr(ctx.options, name)
    ]
    for name in _LIMITS:
        kept = getattr(state, name)
        if kept is not None and kept != getattr(ctx.options, name):
            changes.append(f"{name} {kept!r} is now {getattr(ctx.options, name)!r}")
    return changes


def repinned(doc: LoopState, ctx: LoopContext) -> dict[str, Any]:
    """The update that pins the options as they are now: when the run adopts them
    (``--reconfigure``) and they changed, or when the loop pinned none yet; else empty."""
    state = doc.skill_state
    if state is None:
        return {}
    config = _stored(doc)
    if config is not None and not (ctx.reconfigure and configuration_changes(doc, ctx)):
        return {}
    config = pinned_config(ctx.options)
    if ctx.reconfigure:
        config["reconfigured_at"] = ctx.clock.iso()
    update: dict[str, Any] = {"skill_state.config": config}
    if ctx.reconfigure:
        for name in _LIMITS:
            update[f"skill_state.{name}"] = getattr(ctx.options, name)
    ctx.log.info("configuration_pinned", config=update["skill_state.config"])
    return update


def with_pinned(action: Callable[[LoopState, LoopContext], Update]) -> Callable[..., Update]:
    """``action`` run with the pinned options, its update pinning them when due
    (:func:`repinned`)."""

    @functools.wraps(action)
    def run(doc: LoopState, ctx: LoopContext) -> Update:
        return {**action(doc, pinned(doc, ctx)), **repinned(doc, ctx)}

    return run
