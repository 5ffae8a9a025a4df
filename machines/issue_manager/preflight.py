"""What a run will need, checked before it starts: the issues file, agents and bash.

``fsm run`` asks this before it starts or continues an instance; each line is one missing
requirement with how to provide it, and any line makes the run refuse with nothing changed.
The check looks at the work still ahead, as far as it is known before planning:

* the issues file must exist (every round reads it; a malformed line is the list step's error,
  recorded in the document with the file and line);
* the planning agent (option ``plan_tool``) is needed when an issue still to plan has no
  solution file (issues of the file count while the round limit lets the machine list again),
  unless ``plan_tool`` is ``"none"`` (such issues are then reported unplanned);
* the execution agent (option ``execute_tool``) is needed when a known solution of an issue still
  to run has a task without a command, and bash when one has a command.

Solutions a planning agent has yet to write are unknown here: a task of theirs that cannot run
fails its issue at run time, with the same message.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from fsm.executor import agent_problem

from .ids import unsafe_id_problem
from .issues_file import (
    IssueRecord,
    IssuesFileError,
    missing_file_message,
    read_issues,
)
from .model import IssueManagerState
from .options import IssueManagerContext
from .planning import NO_PLANNER
from .records import read_plan
from .solution import Solution, SolutionError, load_solution

__all__ = ["missing_requirements"]

_LISTED = frozenset({"registered", "planned"})
_NAMED = 5
"""How many issues a line names before it says "and N more"."""


def missing_requirements(doc: IssueManagerState, ctx: IssueManagerContext) -> list[str]:
    """One line per requirement of the run that is missing, saying how to provide it."""
    options = ctx.options
    problems: list[str] = []
    path = ctx.workspace / options.issues_file
    records: list[IssueRecord] = []
    if not path.exists():
        problems.append(missing_file_message(path))
    else:
        # A malformed line is the list step's error, recorded with the file and line.
        with suppress(IssuesFileError):
            records = read_issues(path)
    to_plan = [
        i.id for i in doc.issues.values() if i.status in ("registered", "planning") and not i.error
    ]
    will_list = doc.phase == "init" or doc.context.rounds < doc.context.max_rounds
    if will_list:
        to_plan += [r.id for r in records if r.status in _LISTED and r.id not in doc.issues]
    solutions_dir = ctx.workspace / options.solutions_dir
    unplanned: list[str] = []
    solutions: list[tuple[str, Solution]] = []
    for issue_id in to_plan:
        if unsafe_id_problem(issue_id) is not None:
            continue  # fails at listing, needing nothing
        try:
            solution = load_solution(solutions_dir, issue_id)
        except SolutionError:
            continue  # fails at planning, needing nothing
        if solution is None:
            unplanned.append(issue_id)
        else:
            solutions.append((issue_id, solution))
    solutions += _queued_solutions(doc, ctx.instance_dir)

    plan_problem = (
        agent_problem(ctx.executor, options.plan_tool)
        if unplanned and options.plan_tool != NO_PLANNER
        else None
    )
    if plan_problem is not None:
        folder = _relative(solutions_dir, ctx.workspace)
        need = f"to plan {_named(unplanned)} (no solution file in {folder})"
        problems.append(
            _agent_line(
                options.plan_tool, "plan_tool", need, plan_problem, "write the solution files"
            )
        )
    by_agent = [i for i, s in solutions if any(not t.command for t in s.tasks)]
    execute_problem = agent_problem(ctx.executor, options.execute_tool) if by_agent else None
    if execute_problem is not None:
        need = f"to run the tasks without a command of {_named(by_agent)}"
        problems.append(_agent_line(options.execute_tool, "execute_tool", need, execute_problem))
    by_bash = [i for i, s in solutions if any(t.command for t in s.tasks)]
    if by_bash and not ctx.executor.has_program("bash"):
        problems.append(
            f"program 'bash' is not available: the task commands of {_named(by_bash)} run "
            "through bash; install bash or put it on PATH"
        )
    return problems


def _queued_solutions(doc: IssueManagerState, work_dir: Path) -> list[tuple[str, Solution]]:
    """The planned solutions of the unfinished queue items (an unreadable one fails its item)."""
    found: list[tuple[str, Solution]] = []
    for item in doc.queue:
        if item.status not in ("pending", "executing"):
            continue
        try:
            found.append((item.issue_id, read_plan(work_dir, item.issue_id)))
        except (OSError, ValueError):
            continue
    return found


def _agent_line(tool: str, option: str, need: str, why: str, alternative: str = "") -> str:
    """The line for an agent the run needs (``need``) and cannot run (``why``)."""
    ways = [f"set {option} to another agent"]
    if alternative:
        ways.append(alternative)
    other = " or ".join(ways)
    return f"agent '{tool}' (option {option}), needed {need}, cannot run: {why}; or {other}"


def _named(issue_ids: Iterable[str]) -> str:
    ids = list(issue_ids)
    shown = ", ".join(ids[:_NAMED])
    return shown + (f" and {len(ids) - _NAMED} more" if len(ids) > _NAMED else "")


def _relative(path: Path, workspace: Path) -> str:
    try:
        return str(path.relative_to(workspace))
    except ValueError:
        return str(path)
