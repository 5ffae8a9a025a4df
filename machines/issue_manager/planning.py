"""Planning one issue: find its solution in the solutions folder, or ask the planning agent.

The outcome is a solution, or an error that says what to do about it (add a solution file,
configure the agent, fix the cycle); the caller marks such an issue ``failed``. With
``plan_tool = "none"`` no agent is asked: an issue without a solution file is ``unplanned``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fsm.executor import agent_problem

from .files import write_text_atomic
from .ids import unsafe_id_problem
from .model import IssueState
from .options import IssueManagerContext, IssueManagerOptions
from .redaction import describe_agent_run
from .solution import (
    Solution,
    SolutionError,
    load_solution,
    parse_agent_solution,
)

__all__ = ["NO_PLANNER", "PlanOutcome", "plan_issue", "planning_prompt"]

NO_PLANNER = "none"
"""The ``plan_tool`` that plans nothing: only issues with a solution file run."""


@dataclass(frozen=True)
class PlanOutcome:
    """A solution and where it came from (``file`` or ``agent``), or why there is none
    (``unplanned``: none was asked for, as ``plan_tool`` is ``"none"``)."""

    solution: Solution | None
    source: str
    error: str | None = None
    unplanned: bool = False


def plan_issue(
    issue: IssueState, ctx: IssueManagerContext, options: IssueManagerOptions
) -> PlanOutcome:
    """Plan ``issue``: its bound solution from the solutions folder, else one from the agent."""
    unsafe = unsafe_id_problem(issue.id)
    if unsafe is not None:
        return PlanOutcome(None, "file", unsafe)
    solutions_dir = ctx.workspace / options.solutions_dir
    try:
        solution = load_solution(solutions_dir, issue.id)
    except SolutionError as exc:
        return PlanOutcome(None, "file", str(exc))
    if solution is not None:
        return PlanOutcome(solution, "file")
    solution_file = solutions_dir / f"{issue.id}.jsonl"
    tool = options.plan_tool
    if tool == NO_PLANNER:
        return PlanOutcome(
            None,
            "none",
            f"no solution file {_shown(solution_file, ctx.workspace)} and plan_tool is "
            "'none' (write the solution file, or set plan_tool to a planning agent)",
            unplanned=True,
        )
    if not ctx.executor.has_agent(tool):
        return PlanOutcome(
            None,
            "agent",
            f"no solution file {_shown(solution_file, ctx.workspace)} and no planning agent: "
            f"agent '{tool}' cannot run ({agent_problem(ctx.executor, tool) or 'not found'}; "
            "or write the solution file)",
        )
    prompt = planning_prompt(issue)
    result = ctx.executor.agent(
        tool, prompt, mode="analysis", cwd=ctx.workspace, timeout=options.plan_timeout
    )
    if not result.ok:
        described = describe_agent_run(tool, result)
        if described.startswith(f"agent '{tool}' "):
            return PlanOutcome(None, "agent", f"planning {described}")
        return PlanOutcome(None, "agent", f"planning agent '{tool}' failed: {described}")
    try:
        solution = parse_agent_solution(result.stdout, issue.id, tool)
    except SolutionError as exc:
        return PlanOutcome(None, "agent", str(exc))
    _bind(solution_file, solution)
    return PlanOutcome(solution, "agent")


def planning_prompt(issue: IssueState) -> str:
    """The request to the planning agent: the issue, and the exact JSON shape to answer in."""
    example = {
        "id": f"SOL-{issue.id}-1",
        "description": "how the issue is resolved",
        "tasks": [
            {
                "id": "T1",
                "title": "what this task does",
                "command": "optional shell command that performs or checks the task",
                "prompt": "instructions for the execution agent when there is no command",
                "depends_on": [],
                "acceptance": {"criteria": ["a measurable criterion"]},
            }
        ],
    }
    lines = [
        f"Plan a solution for issue {issue.id}: {issue.title}",
        "",
        issue.description or "(no description)",
        "",
        "Do not change any file. Answer with one JSON object only, of this shape:",
        json.dumps(example, indent=2),
        "Task dependencies (depends_on) must name tasks of this solution and form no cycle.",
    ]
    return "\n".join(lines)


def _bind(solution_file: Path, solution: Solution) -> None:
    """Record the agent's solution as the issue's bound solution (as ``ccw issue bind`` does)."""
    bound = solution.model_dump(mode="json", exclude_unset=True) | {"is_bound": True}
    write_text_atomic(solution_file, json.dumps(bound, ensure_ascii=False) + "\n")


def _shown(path: Path, workspace: Path) -> str:
    try:
        return str(path.relative_to(workspace))
    except ValueError:
        return str(path)
