"""``LoopOptions``: how a workspace runs its loops (``[machine.ccw-loop]`` in fsm.toml, or ``-o``).

Limits that belong to one loop (``max_iterations``) live in the document, because the dashboard
edits them; what belongs to the workspace (how to run its tests, which agent fixes bugs, where
the state files are) lives here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.context import Context

__all__ = ["LoopContext", "LoopOptions"]

Seconds = Annotated[float, Field(gt=0)]


class LoopOptions(BaseModel):
    """Options of the ccw-loop machine; unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    test_command: str = Field(default="python -m pytest", min_length=1)
    """Run in the workspace by validate, exactly as written. pytest is asked for a JUnit report
    through ``PYTEST_ADDOPTS``; for other runners write ``{junit}`` where the JUnit XML report
    path goes (and ``{coverage}`` for a Cobertura XML or coverage.py JSON coverage report), or
    let their summary lines be read (unittest's)."""
    mode: Literal["auto", "interactive"] = "auto"
    """auto follows the phase rules; interactive stops at a menu after every action (so does
    every loop initialised by ``fsm run --interactive``)."""
    max_errors: int = Field(default=3, ge=1)
    """Consecutive failed actions after which the loop ends ``failed``. Written into the loop's
    ``skill_state.max_errors`` when it is initialised; from then on the document's value counts,
    so the limit survives restarts and later changes of the option."""
    fix_tool: Literal["codex", "claude", "gemini", "qwen", "none"] = "codex"
    """The agent that implements fix tasks and tasks that name no tool. ``none``: no fix agent, so
    a loop whose tasks are all bash commands needs no agent CLI; a failing test (unless debug finds
    it flaky) then ends the loop failed for you to fix, and a task that names no tool cannot run.
    The default stays codex (CCW's loop's): a loop is there to get failing tests fixed, and a
    missing codex is refused before the run starts, naming this option and ``none``."""
    state_dir: str = Field(default=".workflow/.loop", min_length=1)
    """Where master files, task lists and progress folders live (``.loop`` is the Claude layout)."""
    task_list: str | None = Field(default=None, min_length=1)
    """A task list (the dashboard's line format), relative to the workspace, for loops that have
    no task list of their own: a repository can keep its standing tasks in one file."""
    task_timeout: Seconds = 600.0
    """Seconds one develop task (a bash command or an agent run) may take."""
    test_timeout: Seconds = 300.0
    """Seconds one test run may take (the original skill's five minutes)."""
    max_hypotheses: int = Field(default=5, ge=1)
    """Failing tests turned into hypotheses (and re-run alone) per debug round."""
    allow_test_changes: bool = False
    """Whether fix agents may change the tests. By default a fix is judged on the tests as they
    were before the first fix (the test files are restored for its validation when it changed
    them, see :mod:`~fsm_machines.ccw_loop.baseline`); true: on the tests as the fix left them.
    Either way no test that ran before may disappear, be skipped or xfailed, and the failing
    ones must pass under their own ids. A task of the task list allows it for itself with
    ``"allow_test_changes": true``."""
    max_fix_attempts: int = Field(default=3, ge=1)
    """Fix tasks made for one failing test before the loop gives up on it and ends failed.
    Written into ``skill_state.max_fix_attempts`` at init, like ``max_errors``."""


LoopContext = Context[LoopOptions]
"""The context the machine's guards, actions and hooks get: ``ctx.options`` is a LoopOptions."""
