"""Solutions: the tasks that resolve one issue, their dependency order, and where they come from.

A solution file ``{solutions_dir}/{issue_id}.jsonl`` holds one solution a line; the one with
``is_bound: true`` is used, else the first. A planning agent may produce one instead, as JSON on
its standard output. Either way the solution is checked before it is accepted: an id of the form
``SOL-{issue_id}-{n}``, at least one task, unique task ids, dependencies that name tasks of the
same solution and form a DAG (a cycle is rejected, and the message names it:
``circular dependency: T1 -> T2 -> T1``). Solution and task ids, like issue ids, must be safe as
file names (:mod:`.ids`); the issue id is checked before its solution file is opened.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .ids import UnsafeIdError, checked_id

__all__ = [
    "Acceptance",
    "Solution",
    "SolutionError",
    "SolutionTask",
    "find_cycle",
    "load_solution",
    "parse_agent_solution",
]


class SolutionError(ValueError):
    """A solution that cannot be used; the message says where and why."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Acceptance(_Open):
    """How to tell the task is done."""

    criteria: list[str] = Field(default_factory=list)


class SolutionTask(_Open):
    """One task: a shell ``command``, or else a ``prompt`` for the execution agent."""

    id: str = Field(min_length=1)
    title: str = ""
    command: str | None = None
    prompt: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    acceptance: Acceptance | None = None

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return checked_id(value, "task id")


class Solution(_Open):
    """A plan for one issue; validation guarantees its tasks can be run in dependency order."""

    id: str = Field(min_length=1)
    description: str = ""
    tasks: list[SolutionTask] = Field(min_length=1)
    is_bound: bool = False

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        return checked_id(value, "solution id")

    @model_validator(mode="after")
    def _check_dependencies(self) -> Self:
        ids = [task.id for task in self.tasks]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"task ids appear more than once: {', '.join(duplicates)}")
        known = set(ids)
        for task in self.tasks:
            unknown = [dep for dep in task.depends_on if dep not in known]
            if unknown:
                raise ValueError(f"task {task.id} depends on unknown task(s): {', '.join(unknown)}")
        cycle = find_cycle({task.id: task.depends_on for task in self.tasks})
        if cycle:
            raise ValueError(f"circular dependency: {' -> '.join(cycle)}")
        return self

    def ordered_tasks(self) -> list[SolutionTask]:
        """Tasks in dependency order; among tasks that are ready, file order decides."""
        done: set[str] = set()
        remaining = list(self.tasks)
        ordered: list[SolutionTask] = []
        while remaining:
            ready = next(t for t in remaining if all(d in done for d in t.depends_on))
            ordered.append(ready)
            done.add(ready.id)
            remaining.remove(ready)
        return ordered


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A dependency cycle in ``graph`` as ``[a, b, ..., a]``, or None when it is a DAG."""
    visiting: list[str] = []
    finished: set[str] = set()

    def visit(node: str) -> list[str] | None:
        if node in finished:
            return None
        if node in visiting:
            return [*visiting[visiting.index(node) :], node]
        visiting.append(node)
        for dep in graph.get(node, []):
            cycle = visit(dep)
            if cycle:
                return cycle
        visiting.pop()
        finished.add(node)
        return None

    for start in graph:
        found = visit(start)
        if found:
            return found
    return None


def load_solution(solutions_dir: Path, issue_id: str) -> Solution | None:
    """The bound (else first) solution of ``issue_id``; None when it has no solution file."""
    try:
        path = solutions_dir / f"{checked_id(issue_id)}.jsonl"
    except UnsafeIdError as exc:
        raise SolutionError(str(exc)) from exc
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SolutionError(f"{path}: cannot read the solution file: {exc}") from exc
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SolutionError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(data, dict):
            raise SolutionError(f"{path}:{number}: expected a JSON object")
        entries.append((number, data))
    if not entries:
        raise SolutionError(f"{path}: the solution file holds no solution")
    bound = [(n, d) for n, d in entries if d.get("is_bound") is True]
    if len(bound) > 1:
        lines = ", ".join(str(n) for n, _ in bound)
        raise SolutionError(f"{path}: several solutions are bound (lines {lines}); bind one")
    number, data = bound[0] if bound else entries[0]
    return _validated(data, issue_id, f"{path}:{number}")


def parse_agent_solution(output: str, issue_id: str, tool: str) -> Solution:
    """The solution a planning agent printed (a JSON object, possibly in a fenced block)."""
    data = _last_json_object(output)
    if data is None:
        raise SolutionError(f"planning agent '{tool}' printed no JSON solution for {issue_id}")
    if isinstance(data.get("solution"), dict):
        data = data["solution"]
    elif data.get("status") == "failed":
        reason = data.get("error_message") or data.get("error") or "no reason given"
        raise SolutionError(f"planning agent '{tool}' could not plan {issue_id}: {reason}")
    data = {**data}
    data.setdefault("id", f"SOL-{issue_id}-1")
    return _validated(data, issue_id, f"solution from planning agent '{tool}'")


def _validated(data: dict[str, Any], issue_id: str, where: str) -> Solution:
    try:
        solution = Solution.model_validate(data)
    except ValidationError as exc:
        raise SolutionError(f"{where}: {_describe(exc)}") from exc
    if not re.fullmatch(rf"SOL-{re.escape(issue_id)}-[0-9]+", solution.id):
        raise SolutionError(
            f"{where}: solution id {solution.id!r} is not of the form SOL-{issue_id}-<n>"
        )
    return solution


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {message}" if loc else message)
    return "; ".join(parts)


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object an agent printed: all of stdout, the last fenced block, or a last line."""
    candidates = [text.strip()]
    candidates += reversed(_FENCE.findall(text))
    candidates += [line for line in reversed(text.splitlines()) if line.lstrip().startswith("{")]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return None
