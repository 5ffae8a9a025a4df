"""Creating, initializing, listing and planning, called directly on a sample workspace."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fsm_machines.issue_manager import functions
from fsm_machines.issue_manager.issues_file import IssuesFileError
from fsm_machines.issue_manager.model import IssueManagerState

ACTIONS = functions.registry.actions
HOOKS = functions.registry.hooks
GUARDS = functions.registry.guards


def _task(task_id: str, command: str, *deps: str) -> dict[str, Any]:
    return {"id": task_id, "title": f"do {task_id}", "command": command, "depends_on": list(deps)}


def _listed(sample: Any, new_doc: Any, apply: Any, ctx: Any) -> IssueManagerState:
    doc = apply(new_doc(ctx), ACTIONS["initialize"](new_doc(ctx), ctx), phase="listing")
    return apply(doc, ACTIONS["list_issues"](doc, ctx))


# -- create ---------------------------------------------------------------------------------------


def test_create_fills_the_template(make_ctx: Any) -> None:
    """A new document is the seed's template with work_dir, times and the loop limits filled."""
    ctx = make_ctx()
    doc = HOOKS["create_instance"]({}, ctx)
    assert (doc.status, doc.phase, doc.issues, doc.queue) == ("pending", "init", {}, [])
    assert doc.work_dir == f".workflow/.scratchpad/{ctx.instance_id}"
    assert doc.created_at == doc.updated_at == "2026-01-01T00:00:00.000Z"
    assert (doc.context.max_rounds, doc.context.max_errors, doc.context.rounds) == (10, 3, 0)


def test_create_takes_dotted_inputs(make_ctx: Any) -> None:
    """Inputs given as ``--set context.max_rounds=2`` (nested) reach the document."""
    doc = HOOKS["create_instance"]({"context": {"max_rounds": 2}, "title": "backlog"}, make_ctx())
    assert doc.context.max_rounds == 2
    assert doc.context.total_issues == 0
    assert doc.model_dump()["title"] == "backlog"


@pytest.mark.parametrize("key", ["status", "phase", "work_dir", "created_at"])
def test_create_refuses_machine_owned_inputs(key: str) -> None:
    """Fields the machine sets cannot be given as inputs: the engine refuses them by the
    machine's inputs model before its create hook runs."""
    from fsm.base.errors import DocumentInputError
    from fsm.model.machine import load_machine
    from fsm.model.settings import check_input_keys
    from tests.machines.issue_manager.conftest import MACHINE_YAML

    with pytest.raises(DocumentInputError, match=f"'{key}' cannot be set: the machine sets it"):
        check_input_keys(load_machine(MACHINE_YAML), {key: "x"})


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        pytest.param({"context": 5}, "context must be an object", id="context-number"),
        pytest.param({"context": []}, "context must be an object", id="context-list"),
        pytest.param(
            {"context": {"max_round": 3}}, "unknown context key(s) max_round", id="context-typo"
        ),
    ],
)
def test_create_refuses_a_malformed_context(
    make_ctx: Any, inputs: dict[str, Any], message: str
) -> None:
    """context inputs must be an object of the known limits and counters, so a typo is an error
    and a wrong shape gets a message naming the field rather than a Python type error."""
    with pytest.raises(ValueError, match=re.escape(message)):
        HOOKS["create_instance"](inputs, make_ctx())


# -- init and list --------------------------------------------------------------------------------


def test_initialize_creates_the_work_folders(make_ctx: Any, new_doc: Any) -> None:
    """init creates snapshots/ and solutions/ and records action-init."""
    ctx = make_ctx()
    update = ACTIONS["initialize"](new_doc(ctx), ctx)
    assert (ctx.instance_dir / "snapshots").is_dir()
    assert (ctx.instance_dir / "solutions").is_dir()
    assert update["completed_actions"] == ["action-init"]


def test_list_registers_new_issues_and_selects_them(
    sample: Any, make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """Registered and planned issues of the file are added; registered ones go to planning."""
    sample.add_issue("ISS-1", "One", description="first")
    sample.add_issue("ISS-2", "Two", status="planned")
    sample.add_issue("ISS-3", "Three", status="completed")
    ctx = make_ctx()
    doc = _listed(sample, new_doc, apply, ctx)
    assert {i: (s.status, s.title) for i, s in doc.issues.items()} == {
        "ISS-1": ("planning", "One"),
        "ISS-2": ("planning", "Two"),
    }
    assert doc.issues["ISS-1"].description == "first"
    assert (doc.context.total_issues, doc.context.rounds) == (2, 1)
    assert doc.completed_actions == ["action-init", "action-list"]


def test_list_does_not_reselect_an_issue_whose_planning_failed(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """An issue whose planning failed stays failed in the next round: it would fail again."""
    sample.add_issue("ISS-1")
    ctx = make_ctx(plan_tool="no-such-agent")
    doc = planned(ctx)
    again = apply(doc, ACTIONS["list_issues"](doc, ctx))
    assert again.issues["ISS-1"].status == "failed"
    assert not GUARDS["has_planning_issue"].func(again, ctx)


def test_list_does_not_reselect_a_registered_issue_with_an_error(
    sample: Any, make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """A document of an older version (planning failure left registered with an error) is not
    planned again either."""
    sample.add_issue("ISS-1")
    ctx = make_ctx()
    old = {"id": "ISS-1", "status": "registered", "error": "planning agent failed"}
    doc = apply(new_doc(ctx), {"issues": {"ISS-1": old}})
    again = apply(doc, ACTIONS["list_issues"](doc, ctx))
    assert again.issues["ISS-1"].status == "registered"
    assert not GUARDS["has_planning_issue"].func(again, ctx)


@pytest.mark.parametrize(
    "issue_id",
    [
        pytest.param("../../../../tmp/x", id="parent-folders"),
        pytest.param("/tmp/abs", id="absolute"),
        pytest.param("a/b", id="slash"),
        pytest.param(".hidden", id="leading-dot"),
        pytest.param("a\\b", id="backslash"),
        pytest.param("bad\x1b[31m", id="escape-sequence"),
    ],
)
def test_list_fails_an_issue_whose_id_is_unsafe_as_a_file_name(
    sample: Any, make_ctx: Any, new_doc: Any, apply: Any, issue_id: str
) -> None:
    """An id that is not safe as a file name is registered failed, with the reason and an
    errors entry naming it (control characters escaped); it is never selected for planning."""
    sample.add_issue(issue_id)
    sample.add_issue("ISS-2")
    ctx = make_ctx()
    doc = _listed(sample, new_doc, apply, ctx)
    issue = doc.issues[issue_id]
    assert issue.status == "failed"
    assert issue.error is not None
    assert issue.error.startswith("unsafe issue id '")
    assert "\x1b" not in issue.error
    assert doc.issues["ISS-2"].status == "planning"
    (entry,) = doc.errors
    assert (entry.action, entry.issue_id, entry.message) == (  # type: ignore[union-attr]
        "action-list",
        issue_id,
        issue.error,
    )
    assert (doc.context.total_issues, doc.context.failed_count) == (2, 1)


def test_list_with_a_malformed_line_fails_and_loses_nothing(
    sample: Any, make_ctx: Any, new_doc: Any, apply: Any
) -> None:
    """A malformed issues line is an error naming file and line; the file is left as it was."""
    sample.add_issue("ISS-1")
    sample.append_line('{"id": "ISS-2", "title": "half')
    before = sample.issues_path.read_bytes()
    ctx = make_ctx()
    doc = new_doc(ctx)
    with pytest.raises(IssuesFileError, match=r"issues\.jsonl:2: not valid JSON"):
        ACTIONS["list_issues"](doc, ctx)
    assert sample.issues_path.read_bytes() == before


# -- plan -----------------------------------------------------------------------------------------


def test_plan_binds_the_solution_file_and_queues_it(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """A planned issue gets its solution id and time, an S-n queue item, and a plan copy."""
    sample.add_issue("ISS-1")
    sample.add_issue("ISS-2")
    sample.add_solution("ISS-1", [_task("T1", "true")])
    sample.add_solution("ISS-2", [_task("T1", "true")], n=1)
    sample.add_solution("ISS-2", [_task("T1", "true")], n=2, bound=True)
    ctx = make_ctx()
    doc = planned(ctx)
    assert {i: (s.status, s.solution_id) for i, s in doc.issues.items()} == {
        "ISS-1": ("planned", "SOL-ISS-1-1"),
        "ISS-2": ("planned", "SOL-ISS-2-2"),
    }
    assert doc.issues["ISS-1"].planned_at is not None
    assert [(q.item_id, q.issue_id, q.solution_id, q.status) for q in doc.queue] == [
        ("S-1", "ISS-1", "SOL-ISS-1-1", "pending"),
        ("S-2", "ISS-2", "SOL-ISS-2-2", "pending"),
    ]
    plan = json.loads((ctx.instance_dir / "solutions" / "ISS-2-plan.json").read_text())
    assert (plan["source"], plan["solution"]["id"]) == ("file", "SOL-ISS-2-2")
    assert sample.statuses() == {"ISS-1": "planned", "ISS-2": "planned"}
    assert doc.completed_actions.count("action-plan") == 2


def test_plan_rejects_a_cyclic_solution_naming_the_cycle(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """A cyclic solution fails the issue's planning with the cycle in its error; the issues file
    keeps it registered (a new instance tries again once the file is fixed)."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_task("A", "true", "B"), _task("B", "true", "A")])
    doc = planned(make_ctx())
    issue = doc.issues["ISS-1"]
    assert issue.status == "failed"
    assert issue.error is not None
    assert "circular dependency: A -> B -> A" in issue.error
    assert doc.queue == []
    assert sample.statuses() == {"ISS-1": "registered"}


def test_plan_without_solution_and_without_agent_says_so(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """No solution file and no planning agent: the issue fails planning with a clear error,
    which errors records under action-plan."""
    sample.add_issue("ISS-1")
    doc = planned(make_ctx(plan_tool="stand-in-planner"))
    issue = doc.issues["ISS-1"]
    assert (issue.status, issue.solution_id, doc.queue) == ("failed", None, [])
    assert issue.error == (
        "no solution file .workflow/issues/solutions/ISS-1.jsonl and no planning agent: "
        "agent 'stand-in-planner' cannot run (fsm.toml has no [agent.stand-in-planner] table and "
        "'stand-in-planner' is not an agent CLI fsm knows (claude, codex, gemini, qwen): add "
        "[agent.stand-in-planner] command = [...] to fsm.toml; or write the solution file)"
    )
    assert [(e.action, e.issue_id) for e in doc.errors] == [("action-plan", "ISS-1")]  # type: ignore[union-attr]
    assert doc.errors[0].message == f"ISS-1 planning failed: {issue.error}"  # type: ignore[union-attr]


def test_plan_asks_the_planning_agent_when_there_is_no_solution_file(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """The planning agent's JSON becomes the bound solution, saved to the solutions folder."""
    sample.add_issue("ISS-1", "Fix login", description="500 on empty password")
    sample.planning_agent("planner", [_task("T1", "true")])
    ctx = make_ctx(plan_tool="planner")
    doc = planned(ctx)
    assert (doc.issues["ISS-1"].status, doc.issues["ISS-1"].solution_id) == (
        "planned",
        "SOL-ISS-1-1",
    )
    (prompt,) = sample.prompts("planner")
    assert "issue ISS-1: Fix login" in prompt
    assert "500 on empty password" in prompt
    bound = json.loads((sample.solutions_dir / "ISS-1.jsonl").read_text())
    assert (bound["id"], bound["is_bound"]) == ("SOL-ISS-1-1", True)


def test_plan_reports_a_failing_planning_agent(
    sample: Any, make_ctx: Any, planned: Any, apply: Any
) -> None:
    """A planning agent that exits non-zero fails the issue with its exit and last line in error."""
    sample.add_issue("ISS-1")
    sample.script_agent("planner", "sys.stderr.write('quota exceeded\\n')\nsys.exit(3)\n")
    doc = planned(make_ctx(plan_tool="planner"))
    error = doc.issues["ISS-1"].error or ""
    assert doc.issues["ISS-1"].status == "failed"
    assert error.startswith("planning agent 'planner' exited 3: ")
    assert error.endswith(" (quota exceeded)")
