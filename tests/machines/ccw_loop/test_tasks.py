"""Reading the loop's task list in the dashboard's line format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from machines.ccw_loop.tasks import read_task_list

NOW = "2026-01-01T00:00:00.000Z"
LOOP = "loop-v2-20260101T000000-0a1b2c3d"


def line(task_id: str, order: int, **extra: Any) -> dict[str, Any]:
    """A dashboard task line."""
    return {
        "task_id": task_id,
        "description": f"do {task_id}",
        "tool": "bash",
        "mode": "write",
        "prompt_template": "",
        "order": order,
        "command": "true",
        "on_error": "continue",
        "created_at": NOW,
        **extra,
    }


@pytest.mark.parametrize("layout", ["dashboard", "flat"])
def test_both_layouts_are_read(loop_ws: Any, layout: str) -> None:
    """{id}/tasks.jsonl (dashboard) and {id}.tasks.jsonl (seed) are both task lists."""
    loop_ws.write_tasks([line("a", 0)], layout=layout)
    listed = read_task_list(loop_ws.state_dir, LOOP, NOW)
    assert [t.id for t in listed.tasks] == ["a"]
    assert listed.problems == []


def test_seed_name_wins_when_both_exist(loop_ws: Any) -> None:
    """The documented {id}.tasks.jsonl is read first."""
    loop_ws.write_tasks([line("flat", 0)], layout="flat")
    loop_ws.write_tasks([line("dash", 0)], layout="dashboard")
    assert [t.id for t in read_task_list(loop_ws.state_dir, LOOP, NOW).tasks] == ["flat"]


def test_tasks_are_sorted_by_order_and_keep_their_fields(loop_ws: Any) -> None:
    """Tasks come in order; command, on_error and prompt live on as task fields."""
    loop_ws.write_tasks(
        [line("b", 1), line("a", 0, tool="gemini", mode="review", prompt_template="p")]
    )
    tasks = read_task_list(loop_ws.state_dir, LOOP, NOW).tasks
    assert [t.id for t in tasks] == ["a", "b"]
    assert (tasks[0].tool, tasks[0].mode, tasks[0].extra("prompt_template")) == (
        "gemini",
        "analysis",
        "p",
    )
    assert (tasks[1].extra("command"), tasks[1].extra("on_error")) == ("true", "continue")
    assert all(t.status == "pending" for t in tasks)


def test_glued_records_are_split(loop_ws: Any) -> None:
    """Two records on one line (an append after the dashboard's rewrite) are both kept."""
    path = loop_ws.write_tasks([])
    path.write_text(json.dumps(line("a", 0)) + json.dumps(line("b", 1)) + "\n")
    assert [t.id for t in read_task_list(loop_ws.state_dir, LOOP, NOW).tasks] == ["a", "b"]


BAD_LINES = [
    ("not-json", "{oops", "not valid JSON"),
    ("not-object", "[1, 2]", "not a JSON object"),
    ("no-description", json.dumps({"task_id": "x", "tool": "bash"}), "has no description"),
    ("unknown-tool", json.dumps(line("x", 0, tool="ccw")), "unknown tool"),
    ("unknown-mode", json.dumps(line("x", 0, mode="dream")), "unknown mode"),
    ("unknown-on-error", json.dumps(line("x", 0, on_error="explode")), "unknown on_error"),
]


@pytest.mark.parametrize(
    ("bad", "problem"), [b[1:] for b in BAD_LINES], ids=[b[0] for b in BAD_LINES]
)
def test_bad_lines_are_skipped_and_reported(loop_ws: Any, bad: str, problem: str) -> None:
    """A line that is not a usable task is skipped with a reason; the other tasks stay."""
    path = loop_ws.write_tasks([line("good", 0)])
    path.write_text(path.read_text() + bad + "\n")
    listed = read_task_list(loop_ws.state_dir, LOOP, NOW)
    assert [t.id for t in listed.tasks] == ["good"]
    assert len(listed.problems) == 1
    assert problem in listed.problems[0]


def test_no_task_list_gives_description_task(loop_ws: Any, started: Any) -> None:
    """Without a task list, init makes one agent task from the description."""
    driver = started()
    driver.fire("init")
    tasks = driver.doc.skill_state.develop.tasks
    assert [(t.id, t.description, t.tool) for t in tasks] == [
        ("task-001", "Make the calculator tests pass", None)
    ]


def test_init_writes_the_seed_shape(loop_ws: Any, started: Any) -> None:
    """After init, skill_state has the seed's initial shape and skipped lines are errors."""
    path = loop_ws.write_tasks([line("a", 0)])
    path.write_text(path.read_text() + "{oops\n")
    driver = started()
    driver.fire("init")
    state = driver.raw["skill_state"]
    assert (state["current_action"], state["last_action"], state["completed_actions"]) == (
        "init",
        None,
        [],
    )
    assert state["develop"]["total"] == 1
    assert state["debug"]["hypotheses"] == [] and state["validate"]["passed"] is False
    assert [e["action"] for e in state["errors"]] == ["INIT"]
    assert driver.raw["current_iteration"] == 0
    assert "- [ ] a (bash/write): do a" in loop_ws.progress("develop.md").read_text()


@pytest.mark.parametrize(
    ("own_list", "standing_list", "expected", "problems"),
    [
        (None, ["s1", "s2"], ["s1", "s2"], []),
        (["own"], ["s1"], ["own"], []),
        (None, None, ["task-001"], ["task_list"]),
    ],
    ids=["standing-list-used", "own-list-wins", "missing-standing-list-reported"],
)
def test_standing_task_list_of_the_workspace(
    loop_ws: Any,
    started: Any,
    own_list: list[str] | None,
    standing_list: list[str] | None,
    expected: list[str],
    problems: list[str],
) -> None:
    """The task_list option names a task list for loops without one of their own; a configured
    list that is missing is an INIT error entry, and the description becomes the task."""
    if own_list is not None:
        loop_ws.write_tasks([line(name, n) for n, name in enumerate(own_list)])
    if standing_list is not None:
        (loop_ws.root / "standing.jsonl").write_text(
            "".join(json.dumps(line(name, n)) + "\n" for n, name in enumerate(standing_list))
        )
    loop = started(task_list="standing.jsonl")
    loop.fire("init")
    state = loop.doc.skill_state
    assert [t.id for t in state.develop.tasks] == expected
    assert [e.message.split(" ")[0] for e in state.errors] == problems
