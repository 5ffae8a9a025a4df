"""Stop and crash in the middle of the queue, from another process, then resume in-process.

``fsm run`` works in its own process on a backlog of slow tasks; ``fsm stop`` (another process)
or a kill ends it between or during queue items. Resumed and run again in this process, the
instance finishes the queue, and no completed item runs a second time.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import fsm_process

ISSUES = ("ISS-1", "ISS-2", "ISS-3", "ISS-4")


def _slow_backlog(sample: Any, seconds: float = 0.3) -> None:
    """Four issues whose single task notes its start in started.txt, sleeps, then records its
    issue in ran.txt."""
    for issue in ISSUES:
        sample.add_issue(issue)
        command = f"echo {issue} >> started.txt && sleep {seconds} && echo {issue} >> ran.txt"
        sample.add_solution(issue, [{"id": "T1", "title": "slow", "command": command}])


def _queue(im: Any) -> list[str]:
    try:
        return [q["status"] for q in im.state()["queue"]]
    except (OSError, ValueError):
        return []  # not created yet, or read while being replaced


def _wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _ran(sample: Any, name: str = "ran.txt") -> list[str]:
    path = sample.root / name
    return path.read_text().split() if path.exists() else []


def test_stop_from_another_process_mid_queue_then_resume(sample: Any, launch: Any) -> None:
    """fsm stop while fsm run executes the queue ends the run after the current item (exit 5,
    status stopped, the rest pending); resume and run finish it without re-running an item."""
    _slow_backlog(sample)
    im = launch(system_clock=True)
    machine = str(im.instance.machine.path)
    run = fsm_process(sample.root, "run", machine, im.instance.id)
    try:
        _wait_for(lambda: "completed" in _queue(im))
        stop = fsm_process(sample.root, "stop", machine, im.instance.id, "--reason", "lunch")
        _, stop_err = stop.communicate(timeout=30)
        assert stop.returncode == 0, stop_err
    finally:
        _, run_err = run.communicate(timeout=60)
    assert run.returncode == 5, run_err
    assert "Traceback" not in run_err

    stopped = im.state()
    queue = [q["status"] for q in stopped["queue"]]
    done = queue.count("completed")
    assert stopped["status"] == "stopped"
    assert 1 <= done < len(ISSUES)
    assert queue == ["completed"] * done + ["pending"] * (len(ISSUES) - done)
    assert _ran(sample) == list(ISSUES[:done])
    assert sample.statuses() == dict.fromkeys(ISSUES[:done], "completed") | dict.fromkeys(
        ISSUES[done:], "planned"
    )
    stop_record = [r for r in im.journal() if r["kind"] == "control"][-1]
    assert (stop_record["event"], stop_record["reason"]) == ("stop", "lunch")

    im.control("resume")
    result = im.run()

    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert [s.event for s in result.steps] == ["execute"] * (len(ISSUES) - done) + [
        "list",
        "complete",
    ]
    assert _ran(sample) == list(ISSUES)
    assert im.listing("snapshots") == [f"snapshot-before-execute-{n}.json" for n in (1, 2, 3, 4)]
    assert im.read("execution-results.json")["completed"] == len(ISSUES)
    assert im.audit() == []


def test_killed_run_resumes_with_the_interrupted_item(sample: Any, launch: Any) -> None:
    """fsm run killed during an item saved nothing of it: the next run starts with that item
    (its task had not finished, so it runs again) and never re-runs the completed one."""
    _slow_backlog(sample, seconds=0.6)
    im = launch(system_clock=True)
    machine = str(im.instance.machine.path)
    run = fsm_process(sample.root, "run", machine, im.instance.id)
    try:
        _wait_for(lambda: "ISS-2" in _ran(sample, "started.txt"))
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=30)
    killed = im.state()
    assert killed["status"] == "running"
    assert [q["status"] for q in killed["queue"]] == ["completed", "pending", "pending", "pending"]
    record = json.loads((im.work_dir / "solutions" / "ISS-2-execution.json").read_text())
    assert (record["status"], record["execution_result"]["tasks"]) == ("executing", [])
    _wait_for(lambda: "ISS-2" in _ran(sample))  # the killed run's task still finishes

    result = im.run()

    assert (result.outcome, result.exit_code) == ("completed", 0)
    assert [s.event for s in result.steps] == [*["execute"] * 3, "list", "complete"]
    assert _ran(sample) == ["ISS-1", "ISS-2", "ISS-2", "ISS-3", "ISS-4"]
    assert [q["status"] for q in im.state()["queue"]] == ["completed"] * 4
    assert im.audit() == []
