"""What a loop achieved (the ``outcome`` hook) and what it needs before it runs (``preflight``).

A loop succeeded only when its document says so truthfully: status ``completed``, every task of
its task list done, and a validation passed after the last change. A document whose status says
``completed`` without that (the dashboard's ``PATCH /status`` can write any status) is reported
as a failure naming what is missing. The reason of a success is as specific as that of a failure:
``all 2 tasks done, 1 fix attempt; validation passed: 10 tests passed``.

The preflight lists every program and agent the loop will need that this workspace cannot run,
one line each, saying how to configure it: the agents of the pending tasks (those of the document
and those still in the task-list file), ``fix_tool`` (every loop may need a fix), bash for bash
tasks, and the program of ``test_command``. With ``fix_tool`` none no agent is needed for fixes,
and a pending task that names no tool (it would run on ``fix_tool``) is a problem of its own.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from fsm.executor import agent_problem

from .baseline import changes_note
from .hypotheses import flaky_note
from .model import AGENT_TOOLS, DevelopTask, LoopState, SkillState
from .options import LoopContext
from .pinning import configuration_changes, pinned
from .rules import is_fix, is_initialized, last_work, next_work
from .tasks import (
    description_task,
    fallback_task_list,
    new_tasks,
    read_task_list,
)

__all__ = [
    "loop_outcome",
    "missing_requirements",
    "program_of",
    "success_reason",
    "validation_counts",
]

_SHELL_WORDS = frozenset(
    {
        "!",
        "(",
        ".",
        ":",
        "[",
        "[[",
        "{",
        "cd",
        "command",
        "eval",
        "exec",
        "export",
        "for",
        "if",
        "set",
        "source",
        "test",
        "time",
        "until",
        "while",
    }
)
"""First words that bash runs itself: the program they start cannot be told in advance."""

_DESCRIPTION = "the loop's description"


def loop_outcome(doc: LoopState) -> tuple[bool, str]:
    """Whether the ended loop ``doc`` reached its goal, and the one-line reason."""
    state = doc.skill_state
    if doc.status == "completed":
        problem = _completion_problem(state)
        if problem is None and state is not None:
            return True, success_reason(state)
        return False, f"status says completed, but {problem}"
    if doc.status == "user_exit":
        return False, f"exited from the menu: {_progress(state)}"
    if doc.status == "failed":
        return False, doc.failure_reason or f"failed without a failure_reason: {_progress(state)}"
    return False, f"the loop has not ended (status {doc.status})"


def success_reason(state: SkillState) -> str:
    """``all 3 tasks done, 1 fix attempt; validation passed: 12 tests passed``."""
    tasks = [t for t in state.develop.tasks if not is_fix(t)]
    fixes = [t for t in state.develop.tasks if is_fix(t)]
    done = f"all {len(tasks)} tasks done" if len(tasks) != 1 else "the task done"
    if fixes:
        done += f", {len(fixes)} fix attempt{'s' if len(fixes) != 1 else ''}"
    notes = [note for note in (flaky_note(state), changes_note(state)) if note]
    restored = (state.validate_.model_extra or {}).get("tests_restored")
    if restored and not changes_note(state):
        shown = ", ".join(str(name) for name in restored[:3])
        notes.append(
            f"validated against the tests as they were before the first fix ({shown} differ: "
            'a task with "allow_test_changes": true may change them)'
        )
    flaky = "".join(f"; {note}" for note in notes)
    counts = validation_counts(state)
    if counts is None:
        return f"{done}; validation passed{flaky}"
    passed, _, skipped = counts
    tests = f"{passed} test{'s' if passed != 1 else ''} passed"
    skipped_text = f", {skipped} skipped" if skipped else ""
    return f"{done}; validation passed: {tests}{skipped_text}{flaky}"


def validation_counts(state: SkillState) -> tuple[int, int, int] | None:
    """Passed, failed and skipped tests of the last validation: its recorded counts (every part
    of the command), else its rows; None when it recorded neither."""
    counts = (state.validate_.model_extra or {}).get("counts")
    if isinstance(counts, dict):
        passed, failed, skipped = (counts.get(key) for key in ("passed", "failed", "skipped"))
        if isinstance(passed, int) and isinstance(failed, int) and isinstance(skipped, int):
            return passed, failed, skipped
    rows = state.validate_.test_results
    if not rows:
        return None
    return (
        sum(r.status == "passed" for r in rows),
        sum(r.status == "failed" for r in rows),
        sum(r.status == "skipped" for r in rows),
    )


def _completion_problem(state: SkillState | None) -> str | None:
    """Why a ``completed`` document is not a success (None when it is one)."""
    if state is None or not is_initialized(state):
        return "the loop never ran"
    upcoming = next_work(state, max_attempts=1_000_000)
    if upcoming.work == "complete":
        return None
    if upcoming.work in ("abort", "abandon"):
        return upcoming.reason[0].lower() + upcoming.reason[1:]
    if upcoming.work == "develop":
        return f"task {upcoming.task} was never developed"
    if last_work(state) == "validate":
        return "the last validation did not pass"
    return "the last changes were never validated"


def _progress(state: SkillState | None) -> str:
    if state is None:
        return "nothing was done"
    tasks = [t for t in state.develop.tasks if not is_fix(t)]
    done = sum(t.status == "completed" for t in tasks)
    verdict = (
        "passed" if state.validate_.passed and last_work(state) == "validate" else "not passed"
    )
    return f"{done} of {len(tasks)} tasks done, validation {verdict}"


def program_of(command: str) -> str | None:
    """The program ``test_command`` starts, as bash would find it (None when bash itself decides,
    e.g. ``cd sub && pytest``). Raises ValueError when the command cannot be split into words."""
    words = shlex.split(command)
    while words and "=" in words[0] and not words[0].startswith("="):
        words.pop(0)  # NAME=value before the program only sets the environment
    if not words or words[0] in _SHELL_WORDS:
        return None
    # bash expands ~ and $VARS; a relative path is one from the workspace, where tests run
    return os.path.expandvars(os.path.expanduser(words[0]))


def missing_requirements(doc: LoopState, ctx: LoopContext) -> list[str]:
    """One line for each agent or program the loop needs that is not available, and one for a
    configuration changed since the loop started (unless the run adopts it)."""
    problems: list[str] = []
    changes = configuration_changes(doc, ctx)
    if changes and not ctx.reconfigure:
        problems.append(
            f"the configuration changed since the loop started: {'; '.join(changes)} (fsm.toml "
            "or -o): restore it, or run with --reconfigure to adopt it"
        )
    ctx = pinned(doc, ctx)
    opts = ctx.options
    uses: dict[str, list[str]] = {}
    if opts.fix_tool != "none":
        uses[opts.fix_tool] = ["option fix_tool, which implements fix tasks"]
    bash_tasks: list[str] = []
    for task, source in _tasks_to_run(doc, ctx):
        if task.status == "failed":
            problems.append(f"task {task.id} in {source} {task.extra('error')}: correct its line")
            continue
        tool: str = task.tool or opts.fix_tool
        if tool == "none":
            problems.append(_no_tool_problem(task, source, ctx))
            continue
        if tool != "bash":
            uses.setdefault(tool, []).append(f"task {task.id}")
            continue
        command = task.extra("command")
        if not isinstance(command, str) or not command.strip():
            problems.append(
                f'task {task.id} (tool bash) has no command: add "command" to its line in {source}'
            )
        bash_tasks.append(task.id)
    for tool, users in uses.items():
        why = agent_problem(ctx.executor, tool)
        if why is None:
            continue
        if tool == opts.fix_tool:
            others = ", ".join(t for t in AGENT_TOOLS if t != opts.fix_tool)
            why += (
                f"; or choose another agent with -o fix_tool=NAME ({others}), or run without a "
                "fix agent with -o fix_tool=none (when every task is a bash command; a failing "
                "test then ends the loop for you to fix)"
            )
        problems.append(f"agent '{tool}' ({'; '.join(users)}) cannot run: {why}")
    if bash_tasks and not ctx.executor.has_program("bash"):
        problems.append(
            f"program 'bash' (tasks {', '.join(bash_tasks)}, tool bash) is not available: "
            "install bash or put it on PATH"
        )
    problems += _test_command_problems(opts.test_command, ctx.executor.has_program)
    return problems


def _no_tool_problem(task: DevelopTask, source: str, ctx: LoopContext) -> str:
    """The line for a task that would run on ``fix_tool`` while fix_tool is none."""
    if source == _DESCRIPTION:
        own = _name(ctx.instance_dir / f"{ctx.instance_id}.tasks.jsonl", ctx)
        return (
            f"the loop has no task list, so its description is its one task ({task.id}), for "
            "fix_tool, and fix_tool is none: give the loop a task list (option task_list, or "
            f"{own}) or set fix_tool"
        )
    return (
        f"task {task.id} in {source} names no tool and fix_tool is none: give the task a tool "
        '("tool": "bash" with a "command", or an agent) or set fix_tool'
    )


def _test_command_problems(command: str, has_program: Callable[[str], bool]) -> list[str]:
    how = "set test_command in [machine.ccw-loop] of fsm.toml or give -o test_command=..."
    try:
        program = program_of(command)
    except ValueError as exc:
        return [f"test_command {command!r} cannot be split into words ({exc}): {how}"]
    if program is None or has_program(program):
        return []
    return [
        f"program '{program}' of test_command {command!r} is not available: install it, "
        f"put it on PATH, or {how}"
    ]


def _tasks_to_run(doc: LoopState, ctx: LoopContext) -> list[tuple[DevelopTask, str]]:
    """Pending tasks of the document and tasks still in the task-list file, with where each
    comes from (tasks of an uninitialised loop are those init would load)."""
    now = ctx.clock.iso()
    fallback = fallback_task_list(ctx)
    state = doc.skill_state
    if state is None or not is_initialized(state):
        listed = read_task_list(ctx.instance_dir, ctx.instance_id, now, fallback=fallback)
        if not listed.tasks:
            description = doc.description.strip() or doc.title
            return [(description_task(description, now), _DESCRIPTION)]
        return [(t, _name(listed.source, ctx)) for t in listed.tasks]
    found = [(t, "the document") for t in state.develop.tasks if t.status == "pending"]
    known = [t.id for t in state.develop.tasks]
    listed = new_tasks(ctx.instance_dir, ctx.instance_id, now, known, fallback=fallback)
    return found + [(t, _name(listed.source, ctx)) for t in listed.tasks]


def _name(path: Path | None, ctx: LoopContext) -> str:
    if path is None:
        return "the task list"
    try:
        return path.relative_to(ctx.workspace).as_posix()
    except ValueError:
        return str(path)
