"""Reading the loop's task list in the dashboard's line format."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fsm_machines.ccw_loop.tasks import read_task_list

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


def test_both_layouts_make_one_list(loop_ws: Any) -> None:
    """The documented {id}.tasks.jsonl comes first, then the tasks of the dashboard's file (where
    its add-task button appends) that the first does not hold."""
    loop_ws.write_tasks([line("flat", 0), line("both", 1)], layout="flat")
    loop_ws.write_tasks([line("both", 0), line("dash", 1)], layout="dashboard")
    listed = read_task_list(loop_ws.state_dir, LOOP, NOW)
    assert [t.id for t in listed.tasks] == ["flat", "both", "dash"]


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


NOT_TASKS = [
    ("not-json", "{oops", "not valid JSON"),
    ("not-object", "[1, 2]", "not a JSON object"),
]


@pytest.mark.parametrize(
    ("bad", "problem"), [b[1:] for b in NOT_TASKS], ids=[b[0] for b in NOT_TASKS]
)
def test_lines_that_are_no_task_are_skipped_and_reported(
    loop_ws: Any, bad: str, problem: str
) -> None:
    """A line that is not a JSON object is skipped with a reason; the other tasks stay."""
    path = loop_ws.write_tasks([line("good", 0)])
    path.write_text(path.read_text() + bad + "\n")
    listed = read_task_list(loop_ws.state_dir, LOOP, NOW)
    assert [t.id for t in listed.tasks] == ["good"]
    assert len(listed.problems) == 1
    assert problem in listed.problems[0]


BROKEN_TASKS = [
    ("no-description", {"task_id": "x", "tool": "bash"}, "x", "has no description"),
    ("unknown-tool", line("x", 0, tool="ccw"), "x", "unknown tool 'ccw'"),
    ("unknown-mode", line("x", 0, mode="dream"), "x", "unknown mode"),
    ("unknown-on-error", line("x", 0, on_error="explode"), "x", "unknown on_error"),
    ("path-id", line("../../../tmp/x", 0), "invalid-task-", "'../../../tmp/x' is not safe"),
    ("slash-id", line("a/b", 0), "invalid-task-", "'a/b' is not safe"),
    ("dot-id", line(".hidden", 0), "invalid-task-", "'.hidden' is not safe"),
    ("dash-id", line("-rf", 0), "invalid-task-", "'-rf' is not safe"),
    ("newline-id", line("a\n### Iteration 9", 0), "invalid-task-", "'a\\n### Iteration 9'"),
]


@pytest.mark.parametrize(
    ("record", "task_id", "problem"),
    [b[1:] for b in BROKEN_TASKS],
    ids=[b[0] for b in BROKEN_TASKS],
)
def test_tasks_that_cannot_run_are_failed_tasks(
    loop_ws: Any, record: dict[str, Any], task_id: str, problem: str
) -> None:
    """A task entry that cannot run (no description, unknown tool, mode or on_error, an id
    unsafe as a name) stays in the list as a failed task saying why, so the loop cannot complete
    without it; an unsafe id never becomes the task's id."""
    path = loop_ws.write_tasks([line("good", 0)])
    path.write_text(path.read_text() + json.dumps(record) + "\n")
    listed = read_task_list(loop_ws.state_dir, LOOP, NOW)
    good, broken = listed.tasks
    assert (good.id, good.status) == ("good", "pending")
    assert broken.id.startswith(task_id) and broken.status == "failed"
    assert problem in broken.extra("error")
    assert broken.extra("error").startswith("cannot run: ")
    assert [p for p in listed.problems if problem in p]
    assert read_task_list(loop_ws.state_dir, LOOP, NOW).tasks[1].id == broken.id


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
