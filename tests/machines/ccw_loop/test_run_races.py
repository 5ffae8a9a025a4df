"""``fsm run`` against what other processes do to a loop: a stop or pause landing between the
run's read and its start, a loop set back to ``created`` while it runs, and a run killed outright
while its fix agent works (the next run reaps the agent's whole tree and validates its edit).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop.model import LoopState

from fsm.cli import main
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.process.executor import AgentCommand
from tests.conftest import fsm_process
from tests.guarantees.waiting import DEADLINE, is_running, wait_until
from tests.machines.ccw_loop.conftest import LOOP_ID, MACHINE_YAML
from tests.machines.ccw_loop.test_outcomes import AGENT, CHECK

STOPPED = {"status": "failed", "failure_reason": "Manually stopped by user"}


def _dashboard_writes(master: Path, **changes: Any) -> None:
    """What the dashboard does on a button press: read, change, rewrite in place."""
    loop = json.loads(master.read_text())
    loop.update(changes, updated_at="2026-01-01T00:05:00.000Z")
    with master.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(loop, indent=2))


@pytest.mark.parametrize(
    ("who", "exit_code", "said"),
    [
        ("dashboard-stop", 4, "failed in state 'failed' after 0 steps: Manually stopped by user"),
        ("fsm-stop", 4, "failed in state 'failed' after 0 steps: Manually stopped by user"),
        ("dashboard-pause", 5, "paused in state 'created' after 0 steps: instance is paused"),
    ],
    ids=["dashboard-stop", "fsm-stop", "dashboard-pause"],
)
def test_control_landing_between_the_runs_read_and_its_start(
    loop_ws: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    who: str,
    exit_code: int,
    said: str,
) -> None:
    """A stop (or pause) that lands after ``fsm run`` read the created loop and before it
    started it ends the run as the loop now is: exit 4 with the stop's reason (5 for a pause),
    never exit 3 "cannot start"."""
    loop_ws.write_project()
    loop_ws.write_config()
    loop_ws.write_tasks([CHECK])
    loop_ws.new_loop()
    master = loop_ws.state_dir / f"{LOOP_ID}.json"
    check = Engine.check_requirements

    def stop_lands_meanwhile(engine: Engine, loaded: Any = None) -> None:
        check(engine, loaded)
        if who == "fsm-stop":
            ControlPlane(engine.instance).apply("stop", actor="other-terminal")
        elif who == "dashboard-stop":
            _dashboard_writes(master, **STOPPED, completed_at="2026-01-01T00:05:00.000Z")
        else:
            _dashboard_writes(master, status="paused")

    monkeypatch.setattr(Engine, "check_requirements", stop_lands_meanwhile)
    code = main(["-C", str(loop_ws.root), "run", "-q", str(MACHINE_YAML), LOOP_ID])
    out, err = capsys.readouterr()
    assert code == exit_code, err
    assert said in out
    assert "cannot start" not in out + err
    raw = json.loads(master.read_text())
    assert raw["status"] == ("paused" if who == "dashboard-pause" else "failed")


def test_loop_set_back_to_created_is_told_to_start_not_resume(loop_ws: Any, started: Any) -> None:
    """A loop the dashboard sets back to created while it runs stops the run, which says how to
    go on (start it, or run it again), not "resume" (which a created loop refuses)."""
    loop_ws.write_project()
    loop_ws.write_tasks([CHECK])
    loop = started()
    master = loop_ws.state_dir / f"{LOOP_ID}.json"

    def set_back(_: Any) -> None:
        _dashboard_writes(master, status="created")

    result = Engine(loop.instance).run(on_step=set_back)
    assert (result.outcome, result.exit_code, result.status) == ("stopped", 5, "created")
    assert result.message == "instance is created (start it, or run it again, to continue)"
    assert "resume" not in ControlPlane(loop.instance).allowed(loop.instance.load())
    assert loop.run().outcome == "completed"  # and a new run does start it


def test_run_killed_while_the_fix_agent_works_is_reaped_and_validated(
    loop_ws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fsm run`` killed outright (SIGKILL) while its fix agent works: the agent and the setsid
    child it started keep running, its edit is in no document. The next ``fsm run`` kills them
    both first, then validates the edit instead of asking for another fix, and completes."""
    loop_ws.write_project(bug=True)
    loop_ws.bin_dir.mkdir()
    script = loop_ws.bin_dir / "slow_agent.py"
    script.write_text(AGENT)
    child_file = loop_ws.bin_dir / "child.pid"
    monkeypatch.setenv("CHILD_PID_FILE", str(child_file))
    loop_ws.write_config(codex=AgentCommand((sys.executable, str(script), "{prompt}")))
    loop_ws.write_tasks([CHECK])
    loop_ws.new_loop()
    first = fsm_process(loop_ws.root, "run", "-q", str(MACHINE_YAML), LOOP_ID)
    wait_until(lambda: child_file.is_file() and child_file.read_text(), "the agent's child up")
    child = int(child_file.read_text())
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=DEADLINE)
    assert is_running(child)
    running = loop_ws.state_dir / f"{LOOP_ID}.fsm" / "running"
    agent = int(next(running.glob("*.json")).stem)
    second = fsm_process(loop_ws.root, "run", "-q", str(MACHINE_YAML), LOOP_ID)
    out, err = second.communicate(timeout=DEADLINE * 2)
    assert second.returncode == 0, err
    assert "completed in state 'completed'" in out
    assert not is_running(agent) and not is_running(child)
    doc = LoopState.model_validate_json((loop_ws.state_dir / f"{LOOP_ID}.json").read_text())
    assert doc.skill_state is not None
    fix = doc.skill_state.develop.tasks[-1]
    assert (fix.id, fix.status, fix.files_changed) == ("fix-H1", "failed", ["calc.py"])
    assert doc.skill_state.completed_actions[-2:] == ["VALIDATE", "COMPLETE"]
    events = [record["event"] for record in _journal(loop_ws)]
    assert events[events.index("debug") + 1 :] == ["validate", "complete"]


def _journal(loop_ws: Any) -> list[dict[str, Any]]:
    """The journal's transition records."""
    return [r for r in loop_ws.open().instance.journal.read().records if r["kind"] == "transition"]
