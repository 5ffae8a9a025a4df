"""Solutions: loading the bound one, dependency order, cycles, and agent answers."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from fsm_machines.issue_manager.solution import (
    Solution,
    SolutionError,
    find_cycle,
    load_solution,
    parse_agent_solution,
)
from hypothesis import given
from hypothesis import strategies as st


def _task(task_id: str, *deps: str) -> dict[str, Any]:
    return {"id": task_id, "title": task_id, "command": "true", "depends_on": list(deps)}


def _solution(*tasks: dict[str, Any], sol_id: str = "SOL-ISS-1-1") -> dict[str, Any]:
    return {"id": sol_id, "description": "d", "tasks": list(tasks)}


@pytest.mark.parametrize(
    ("tasks", "cycle"),
    [
        pytest.param([_task("T1", "T1")], "T1 -> T1", id="self-loop"),
        pytest.param([_task("T1", "T2"), _task("T2", "T1")], "T1 -> T2 -> T1", id="two"),
        pytest.param(
            [_task("T0"), _task("T1", "T0", "T3"), _task("T2", "T1"), _task("T3", "T2")],
            "T1 -> T3 -> T2 -> T1",
            id="three-behind-a-root",
        ),
    ],
)
def test_cyclic_dependencies_are_rejected_naming_the_cycle(
    tasks: list[dict[str, Any]], cycle: str
) -> None:
    """A solution whose task dependencies form a cycle is rejected; the message names it."""
    with pytest.raises(ValueError, match=f"circular dependency: {cycle}"):
        Solution.model_validate(_solution(*tasks))


@pytest.mark.parametrize(
    ("solution", "message"),
    [
        pytest.param(_solution(), "tasks", id="no-tasks"),
        pytest.param(
            _solution(_task("T1"), _task("T1")),
            "task ids appear more than once: T1",
            id="duplicate-task",
        ),
        pytest.param(
            _solution(_task("T1", "T9")),
            "task T1 depends on unknown task(s): T9",
            id="unknown-dependency",
        ),
    ],
)
def test_broken_solutions_are_rejected(solution: dict[str, Any], message: str) -> None:
    """A solution without tasks, with duplicate tasks or unknown dependencies is rejected."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Solution.model_validate(solution)


def test_tasks_run_in_dependency_order_then_file_order() -> None:
    """Tasks are ordered so every dependency comes first; ready tasks keep their file order."""
    solution = Solution.model_validate(
        _solution(_task("T3", "T2"), _task("T1"), _task("T2", "T1"), _task("T4"))
    )
    assert [t.id for t in solution.ordered_tasks()] == ["T1", "T2", "T3", "T4"]


def test_find_cycle_on_a_dag_is_none() -> None:
    """A diamond of dependencies is a DAG, not a cycle."""
    assert find_cycle({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}) is None


def _write(sample: Any, lines: list[str]) -> None:
    sample.solutions_dir.mkdir(parents=True, exist_ok=True)
    (sample.solutions_dir / "ISS-1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_bound_solution_is_chosen(sample: Any) -> None:
    """Of several solutions, the one with ``is_bound: true`` is used."""
    sample.add_solution("ISS-1", [_task("T1")], n=1)
    sample.add_solution("ISS-1", [_task("T2")], n=2, bound=True)
    solution = load_solution(sample.solutions_dir, "ISS-1")
    assert solution is not None
    assert solution.id == "SOL-ISS-1-2"


def test_first_solution_is_chosen_when_none_is_bound(sample: Any) -> None:
    """Without a bound solution, the first line is used."""
    sample.add_solution("ISS-1", [_task("T1")], n=1)
    sample.add_solution("ISS-1", [_task("T2")], n=2)
    solution = load_solution(sample.solutions_dir, "ISS-1")
    assert solution is not None
    assert solution.id == "SOL-ISS-1-1"


def test_missing_solution_file_is_none(sample: Any) -> None:
    """An issue without a solution file has no solution (planning then asks the agent)."""
    assert load_solution(sample.solutions_dir, "ISS-1") is None


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        pytest.param(["{not json"], "ISS-1.jsonl:1: not valid JSON", id="malformed"),
        pytest.param(["[1]"], "ISS-1.jsonl:1: expected a JSON object", id="not-object"),
        pytest.param([""], "holds no solution", id="empty"),
        pytest.param(
            [json.dumps(_solution(_task("T1"), sol_id="SOL-ISS-2-1"))],
            "is not of the form SOL-ISS-1-<n>",
            id="wrong-issue-id",
        ),
        pytest.param(
            [json.dumps(_solution(_task("T1")) | {"is_bound": True})] * 2,
            "several solutions are bound (lines 1, 2)",
            id="two-bound",
        ),
        pytest.param(
            [json.dumps(_solution(_task("T1", "T2"), _task("T2", "T1")))],
            "ISS-1.jsonl:1: circular dependency: T1 -> T2 -> T1",
            id="cycle",
        ),
    ],
)
def test_unusable_solution_files_are_errors(sample: Any, lines: list[str], message: str) -> None:
    """A solution file that cannot be used is an error naming the file and line."""
    _write(sample, lines)
    with pytest.raises(SolutionError) as caught:
        load_solution(sample.solutions_dir, "ISS-1")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "output",
    [
        pytest.param(json.dumps(_solution(_task("T1"))), id="bare-json"),
        pytest.param(
            "Plan:\n```json\n" + json.dumps(_solution(_task("T1"))) + "\n```\nDone.", id="fenced"
        ),
        pytest.param(
            "thinking...\n" + json.dumps({"solution": _solution(_task("T1"))}),
            id="wrapped-last-line",
        ),
        pytest.param(json.dumps({"description": "d", "tasks": [_task("T1")]}), id="no-id"),
    ],
)
def test_agent_answers_are_parsed(output: str) -> None:
    """The planning agent's JSON is found in plain, fenced or wrapped output; a missing id is
    given the issue's first solution id."""
    solution = parse_agent_solution(output, "ISS-1", "codex")
    assert (solution.id, [t.id for t in solution.tasks]) == ("SOL-ISS-1-1", ["T1"])


@pytest.mark.parametrize(
    ("output", "message"),
    [
        pytest.param("I could not do it.", "printed no JSON solution for ISS-1", id="prose"),
        pytest.param(
            json.dumps({"status": "failed", "error_message": "unclear issue"}),
            "could not plan ISS-1: unclear issue",
            id="failed-contract",
        ),
        pytest.param(
            json.dumps(_solution(_task("T1", "T1"))), "circular dependency: T1 -> T1", id="cycle"
        ),
    ],
)
def test_unusable_agent_answers_are_errors(output: str, message: str) -> None:
    """A planning answer without a usable solution is an error that says why."""
    with pytest.raises(SolutionError, match=message):
        parse_agent_solution(output, "ISS-1", "codex")


@st.composite
def _graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    names = [f"T{i}" for i in range(draw(st.integers(1, 7)))]
    return {n: draw(st.lists(st.sampled_from(names), unique=True, max_size=3)) for n in names}


@given(_graphs())
def test_a_graph_is_ordered_or_its_cycle_is_real(graph: dict[str, list[str]]) -> None:
    """Any dependency graph either yields a real cycle or an order with every dependency first."""
    cycle = find_cycle(graph)
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        assert all(b in graph[a] for a, b in itertools.pairwise(cycle))
        return
    tasks = [_task(name, *deps) for name, deps in graph.items()]
    order = [t.id for t in Solution.model_validate(_solution(*tasks)).ordered_tasks()]
    assert sorted(order) == sorted(graph)
    assert all(order.index(dep) < order.index(name) for name in graph for dep in graph[name])
