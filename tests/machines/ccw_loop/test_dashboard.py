"""Sharing the master file with the CCW dashboard (SPEC 4.1), with ``fsm run`` as its own process.

The dashboard reads the master file on every request and, when a person presses a button or edits
the loop, rewrites it in place: ``open(path, "w")``, no rename, no lock, 2-space JSON. These tests
play the dashboard against a running ``fsm run`` while it is inside a long action.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop.model import LoopState

from fsm.process.executor import AgentCommand
from fsm.view.inspect import replay
from tests.conftest import fsm_process
from tests.machines.ccw_loop.conftest import FILE_SYNC, LOOP_ID, MACHINE_YAML

NOW = "2026-01-01T00:05:00.000Z"
ADD_MUL = {
    "task_id": "task-1768000000000-0a1b2c3d",
    "description": "Add mul to calc",
    "tool": "bash",
    "mode": "write",
    "prompt_template": "Add mul",
    "order": 0,
    "created_at": "2026-01-01T00:00:00.000Z",
    "updated_at": "2026-01-01T00:00:00.000Z",
    "command": "printf '\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py",
    "on_error": "continue",
}


def _fix_add_agent(folder: Path) -> AgentCommand:
    """A real program for an agent in fsm.toml: a prompt about test_add repairs the bug."""
    folder.mkdir(exist_ok=True)
    script = folder / "fix_add.py"
    script.write_text(
        "import pathlib, sys\n"
        "if 'test_add' in sys.argv[1]:\n"
        "    calc = pathlib.Path('calc.py')\n"
        "    calc.write_text(calc.read_text().replace('a - b', 'a + b'))\n"
    )
    return AgentCommand((sys.executable, str(script), "{prompt}"))


def _long_task(marker: Path) -> dict[str, Any]:
    """A bash task that says it has started (``marker``) and then takes a second."""
    return {**ADD_MUL, "task_id": "task-long", "command": f"touch {marker} && sleep 1"}


def _fsm_run(root: Path) -> subprocess.Popen[str]:
    """``fsm -C root run <machine.yaml> LOOP_ID`` (the machine by path: it is not registered)."""
    return fsm_process(root, "--log-level", "warning", "run", str(MACHINE_YAML), LOOP_ID)


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"fsm run ended early: {process.communicate()}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def _dashboard_writes(master: Path, **changes: Any) -> None:
    """What the dashboard does on a button press: read, change, rewrite in place."""
    loop = json.loads(master.read_text())
    loop.update(changes, updated_at=NOW)
    with master.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(loop, indent=2))


def test_dashboard_created_loop_runs_to_completed(loop_ws: Any) -> None:
    """fsm run drives a dashboard-written created file and its task list through a real bug fix
    to completed; every File Sync file is written and the dashboard's extra fields survive."""
    loop_ws.write_project(bug=True)
    loop_ws.write_config(codex=_fix_add_agent(loop_ws.bin_dir))
    loop_ws.write_tasks([ADD_MUL])
    loop_ws.new_loop(tags=["calc"], priority="high", notes="", board={"column": 2})
    process = _fsm_run(loop_ws.root)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "completed in state 'completed' after 7 steps" in out
    raw = json.loads((loop_ws.state_dir / f"{LOOP_ID}.json").read_text())
    doc = LoopState.model_validate(raw)
    assert doc.status == "completed"
    assert doc.skill_state is not None and doc.skill_state.validate_.passed
    assert (raw["tags"], raw["priority"], raw["notes"], raw["board"]) == (
        ["calc"],
        "high",
        "",
        {"column": 2},
    )
    assert loop_ws.missing_progress(*FILE_SYNC) == []
    assert replay(loop_ws.open().instance).problems == []


@pytest.mark.parametrize(
    ("button", "changes", "exit_code"),
    [
        ("pause", {"status": "paused"}, 5),
        (
            "stop",
            {
                "status": "failed",
                "failure_reason": "Manually stopped by user",
                "completed_at": NOW,
            },
            4,
        ),
    ],
    ids=["pause", "stop"],
)
def test_button_pressed_during_a_long_action_wins(
    loop_ws: Any, tmp_path: Path, button: str, changes: dict[str, Any], exit_code: int
) -> None:
    """Pause or stop written by the dashboard while an action runs is kept, the step's result
    too, and fsm run ends as it would after fsm pause or fsm stop."""
    marker = tmp_path / "task-started"
    loop_ws.write_project()
    loop_ws.write_config()
    loop_ws.write_tasks([_long_task(marker), {**ADD_MUL, "order": 1}])
    loop_ws.new_loop()
    master = loop_ws.state_dir / f"{LOOP_ID}.json"
    process = _fsm_run(loop_ws.root)
    _wait_for(marker, process)
    _dashboard_writes(master, **changes)
    _, err = process.communicate(timeout=60)
    assert process.returncode == exit_code, err
    raw = json.loads(master.read_text())
    assert {key: raw[key] for key in changes} == changes
    doc = LoopState.model_validate(raw)
    assert doc.skill_state is not None
    assert [t.status for t in doc.skill_state.develop.tasks] == ["completed", "pending"]
    assert doc.current_iteration == 1
    loop = loop_ws.open()
    last = loop.instance.journal.read().records[-1]
    assert (last["event"], last["merged"], last["status"]) == ("develop", True, changes["status"])
    assert replay(loop.instance).problems == []
    if button == "pause":
        _dashboard_writes(master, status="running")  # the dashboard's resume
        assert loop.run().outcome == "completed"


def test_dashboard_edits_during_a_step_are_kept(loop_ws: Any, tmp_path: Path) -> None:
    """Title, description and max_iterations edited (and a field added) while an action runs
    survive the step's write, and the loop goes on to completed with them."""
    marker = tmp_path / "task-started"
    loop_ws.write_project()
    loop_ws.write_config()
    loop_ws.write_tasks([_long_task(marker)])
    loop_ws.new_loop()
    master = loop_ws.state_dir / f"{LOOP_ID}.json"
    process = _fsm_run(loop_ws.root)
    _wait_for(marker, process)
    edits = {"title": "Renamed", "description": "Edited", "max_iterations": 7, "reviewer": "ana"}
    _dashboard_writes(master, **edits)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    raw = json.loads(master.read_text())
    assert {key: raw[key] for key in edits} == edits
    assert raw["status"] == "completed"
    assert "# Loop summary: Renamed" in loop_ws.progress("summary.md").read_text()


HALF_WRITER = """\
import json, sys
from pathlib import Path

master, go, whole = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
loop = json.loads(master.read_text())
loop["title"] = "Edited while half-written"
text = json.dumps(loop, indent=2)
whole.write_text(text)
with master.open("w") as handle:
    handle.write(text[: len(text) // 2])
go.write_text("go")
"""

COMPLETER = """\
import sys, time
from pathlib import Path

master, go, whole = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
time.sleep(0.1)
master.write_text(whole.read_text())
"""


def test_half_written_master_file_is_reread(loop_ws: Any, tmp_path: Path) -> None:
    """A master file caught half-written (truncated JSON for ~100 ms) is read again until it is
    whole, not called corrupt, and the dashboard's edit in it is kept. The task writes the first
    half; the dashboard (a process of its own, as the real one is, not one the task left behind,
    which fsm would end with the task) writes the whole file 100 ms later."""
    writer = tmp_path / "half_writer.py"
    writer.write_text(HALF_WRITER)
    completer_script = tmp_path / "completer.py"
    completer_script.write_text(COMPLETER)
    master = loop_ws.state_dir / f"{LOOP_ID}.json"
    go, whole = tmp_path / "go", tmp_path / "whole.json"
    command = f"{sys.executable} {writer} {master} {go} {whole}"
    loop_ws.write_project()
    loop_ws.write_tasks([{**ADD_MUL, "command": command}])
    loop_ws.new_loop()
    completer = subprocess.Popen(
        [sys.executable, str(completer_script), str(master), str(go), str(whole)]
    )
    try:
        loop = loop_ws.open()
        result = loop.run()
    finally:
        completer.wait(timeout=60)
    assert result.outcome == "completed", result.message
    assert [s.outcome for s in result.steps] == ["applied"] * 4
    assert loop.doc.title == "Edited while half-written"
    develop = next(r for r in loop.instance.journal.read().records if r["event"] == "develop")
    assert develop["merged"] is True
    loop.assert_consistent()
