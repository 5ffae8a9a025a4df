"""Stop and crash in the middle of the queue, from another process, then resume in-process.

``fsm run`` works in its own process on a backlog of tasks; ``fsm stop`` (another process) or a
kill ends it between or during queue items. Resumed and run again in this process, the instance
finishes the queue, and no completed item runs a second time.

Nothing here depends on how fast a process starts. Each task notes its start in ``started.txt``
and then waits for its gate file (``gates/<issue>``), which the test creates when it wants the
task to finish; the test itself waits for files the tasks and commands write, with a deadline
that only ends a hung run.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import fsm_process

ISSUES = ("ISS-1", "ISS-2", "ISS-3", "ISS-4")
DEADLINE = 60.0
"""Seconds before a wait gives up: long enough for any load, it only ends a hung run."""


def _gated_backlog(sample: Any) -> None:
    """Four issues whose single task notes its start in started.txt, waits for its gate file,
    then records its issue in ran.txt."""
    (sample.root / "gates").mkdir()
    for issue in ISSUES:
        sample.add_issue(issue)
        command = (
            f"echo {issue} >> started.txt && "
            f"until [ -e gates/{issue} ]; do sleep 0.01; done && echo {issue} >> ran.txt"
        )
        sample.add_solution(issue, [{"id": "T1", "title": "gated", "command": command}])


def _open_gate(sample: Any, *issues: str) -> None:
    for issue in issues:
        (sample.root / "gates" / issue).touch()


def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not seen within {DEADLINE:.0f}s"
        time.sleep(0.01)


def _lines(sample: Any, name: str) -> list[str]:
    path = sample.root / name
    return path.read_text().split() if path.exists() else []


def test_stop_from_another_process_mid_queue_then_resume(sample: Any, launch: Any) -> None:
    """fsm stop while fsm run executes the second item ends the run after that item (exit 5,
    status stopped, the rest pending); resume and run finish it without re-running an item."""
    _gated_backlog(sample)
    im = launch({"task_timeout": DEADLINE}, system_clock=True)
    machine = str(im.instance.machine.path)
    _open_gate(sample, "ISS-1")
    run = fsm_process(sample.root, "run", machine, im.instance.id)
    try:
        _wait_for(lambda: "ISS-2" in _lines(sample, "started.txt"), "ISS-2 started")
        stop = fsm_process(sample.root, "stop", machine, im.instance.id, "--reason", "lunch")
        _, stop_err = stop.communicate(timeout=DEADLINE)
        assert stop.returncode == 0, stop_err
    finally:
        # Only now may ISS-2 finish; the later gates open too, so a lost stop ends the run
        # (and this test) at once instead of hanging.
        _open_gate(sample, *ISSUES)
        _, run_err = run.communicate(timeout=DEADLINE)
    assert run.returncode == 5, run_err
    assert "Traceback" not in run_err

    stopped = im.data
    assert stopped["status"] == "stopped"
    assert [q["status"] for q in stopped["queue"]] == ["completed"] * 2 + ["pending"] * 2
    assert _lines(sample, "ran.txt") == ["ISS-1", "ISS-2"]
    assert sample.statuses() == {
        "ISS-1": "completed",
        "ISS-2": "completed",
        "ISS-3": "planned",
        "ISS-4": "planned",
    }
    stop_record = [r for r in im.journal() if r["kind"] == "control"][-1]
    assert (stop_record["event"], stop_record["reason"]) == ("stop", "lunch")

    im.control("resume")
    result = im.run()

    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "4 of 4 issues done",
    )
    assert [s.event for s in result.steps] == ["execute", "execute", "list", "complete"]
    assert _lines(sample, "ran.txt") == list(ISSUES)
    assert im.listing("snapshots") == [f"snapshot-before-execute-{n}.json" for n in (1, 2, 3, 4)]
    assert im.read("execution-results.json")["completed"] == len(ISSUES)
    assert im.audit() == []


def test_killed_run_resumes_with_the_interrupted_item(sample: Any, launch: Any) -> None:
    """fsm run killed during an item saved nothing of it: the next run starts with that item
    (its task had not finished, so it runs again) and never re-runs the completed one."""
    _gated_backlog(sample)
    im = launch({"task_timeout": DEADLINE}, system_clock=True)
    machine = str(im.instance.machine.path)
    _open_gate(sample, "ISS-1")
    run = fsm_process(sample.root, "run", machine, im.instance.id)
    try:
        _wait_for(lambda: "ISS-2" in _lines(sample, "started.txt"), "ISS-2 started")
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=DEADLINE)
    killed = im.data
    assert killed["status"] == "running"
    assert [q["status"] for q in killed["queue"]] == ["completed", "pending", "pending", "pending"]
    record = json.loads((im.work_dir / "solutions" / "ISS-2-execution.json").read_text())
    assert (record["status"], record["execution_result"]["tasks"]) == ("executing", [])
    _open_gate(sample, *ISSUES)
    # The killed run's task is in its own process group, so it outlives the run and finishes.
    _wait_for(lambda: "ISS-2" in _lines(sample, "ran.txt"), "the orphaned ISS-2 task finished")

    result = im.run()

    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert [s.event for s in result.steps] == [*["execute"] * 3, "list", "complete"]
    assert _lines(sample, "ran.txt") == ["ISS-1", "ISS-2", "ISS-2", "ISS-3", "ISS-4"]
    assert [q["status"] for q in im.data["queue"]] == ["completed"] * 4
    assert im.audit() == []
