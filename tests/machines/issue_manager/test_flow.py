"""The flow beyond the issue's scenarios, on the real engine: limits, pause, crash.

Each test creates an instance in a sample workspace and drives it with ``Engine.run`` and the
control plane, as ``fsm run``, ``fsm pause`` and ``fsm resume`` do.
"""

from __future__ import annotations

from typing import Any

from fsm_machines.issue_manager.functions import registry


def _counting(task_id: str, *deps: str) -> dict[str, Any]:
    """A task that appends its id to ran.txt, so a test can count how often it ran."""
    return {
        "id": task_id,
        "title": task_id,
        "command": f"echo {task_id} >> ran.txt",
        "depends_on": list(deps),
    }


def _ran(sample: Any) -> list[str]:
    path = sample.root / "ran.txt"
    return path.read_text().split() if path.exists() else []


def test_pause_between_items_holds_the_queue_until_resume(sample: Any, launch: Any) -> None:
    """Paused after the first item, run takes no step (exit 5); resumed, the rest runs once."""
    for issue in ("ISS-1", "ISS-2", "ISS-3"):
        sample.add_issue(issue)
        sample.add_solution(issue, [_counting(issue)])
    im = launch()
    assert [s.event for s in im.run(max_steps=5).steps][-1] == "execute"
    im.control("pause")

    held = im.run()

    assert (held.outcome, held.status, held.exit_code, held.steps) == ("paused", "paused", 5, [])
    assert [q["status"] for q in im.state()["queue"]] == ["completed", "pending", "pending"]
    im.control("resume")
    result = im.run()
    assert [s.event for s in result.steps] == ["execute", "execute", "list", "complete"]
    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert _ran(sample) == ["ISS-1", "ISS-2", "ISS-3"]
    controls = [(r["event"], r["status_to"]) for r in im.journal() if r["kind"] == "control"]
    assert controls == [("start", "running"), ("pause", "paused"), ("resume", "running")]
    assert im.audit() == []


def test_a_crash_after_the_tasks_ran_does_not_run_them_again(sample: Any, launch: Any) -> None:
    """If a step's result was never saved, its item runs again but skips the completed tasks."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("a"), _counting("b", "a")])
    im = launch()
    im.run(max_steps=2)
    loaded = im.instance.load()
    registry.actions["execute_next_item"](loaded.doc, im.instance.context())  # then "crashed"
    assert im.state()["queue"][0]["status"] == "pending"

    result = im.run()

    assert [s.event for s in result.steps] == ["execute", "list", "complete"]
    assert _ran(sample) == ["a", "b"]
    assert im.statuses() == {"ISS-1": "completed"}
    record = im.read("solutions/ISS-1-execution.json")
    assert [t["id"] for t in record["execution_result"]["tasks"]] == ["a", "b"]
    assert im.audit() == []


def test_malformed_line_between_rounds_pauses_at_the_limit_and_keeps_the_work(
    sample: Any, launch: Any
) -> None:
    """A bad line appended mid-run: the write-back keeps it, the list step fails until the
    document's max_errors pause the instance; fixed and resumed, the run completes."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    im = launch(context={"max_errors": 2})
    im.run(max_steps=2)
    sample.append_line("not json")

    result = im.run()

    assert [(s.event, s.outcome) for s in result.steps] == [
        ("execute", "applied"),
        ("list", "failed"),
        ("list", "failed"),
    ]
    assert (result.outcome, result.status, result.exit_code) == ("paused", "paused", 5)
    first, bad = sample.issues_path.read_text().splitlines()
    assert ('"status":"completed"' in first, bad) == (True, "not json")
    state = im.state()
    assert (state["phase"], state["issues"]["ISS-1"]["status"]) == ("executing", "completed")
    assert [e["action"] for e in state["errors"]] == ["action-list", "action-list"]
    assert state["context"]["consecutive_errors"] == 2
    lines = sample.issues_path.read_text().splitlines()
    sample.issues_path.write_text(lines[0] + "\n")
    im.control("resume")
    result = im.run()
    assert [s.event for s in result.steps] == ["list", "complete"]
    assert (result.outcome, im.state()["context"]["consecutive_errors"]) == ("completed", 0)
    assert "not json" not in sample.issues_path.read_text()
    assert "not valid JSON" in im.report()
    assert im.audit() == []


def test_round_limit_ends_the_run_even_while_issues_arrive(sample: Any, launch: Any) -> None:
    """With max_rounds list passes done, the machine completes instead of listing again, and
    its reason says that later issues were not read."""
    sample.add_issue("ISS-1")
    sample.add_solution("ISS-1", [_counting("one")])
    im = launch(context={"max_rounds": 1})
    im.run(max_steps=3)
    sample.add_issue("ISS-2")

    result = im.run()

    assert [s.event for s in result.steps] == ["complete"]
    assert result.message == (
        "1 of 1 issues done (round limit 1 reached: issues added to the file after the last "
        "listing were not read)"
    )
    assert list(im.state()["issues"]) == ["ISS-1"]
    assert sample.statuses() == {"ISS-1": "completed", "ISS-2": "registered"}
    assert "- Rounds: 1" in im.report()
    assert im.audit() == []
