"""A ccw-loop fix by an agent speaking codex's JSON events (``codex exec --json``): the step's
journal record keeps the agent's final message, the files it changed and its token usage, and
``fsm status``, ``fsm history`` and their JSON show them; a run the events call failed is a
failed fix whose reason is the agent's own error."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop.model import AGENT_TOOLS

CALC = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_div():\n    from calc import div\n\n    assert div(6, 3) == 2\n"
)
TASKS = '{"task_id": "check", "description": "Byte-compile calc.py", "tool": "bash", ' + (
    '"command": "python -m py_compile calc.py"}\n'
)
CONFIG = """\
[machine.ccw-loop]
test_command = "python -m pytest -q"
task_list = "tasks.jsonl"
fix_tool = "codex"

[agent.codex]
command = ["python", "codex_stand_in.py", "{prompt}"]
output = "codex-json"
"""
STAND_IN = """\
import json, os, sys

def emit(event):
    print(json.dumps(event), flush=True)

emit({"type": "thread.started", "thread_id": "0000-stand-in"})
emit({"type": "turn.started"})
if os.path.exists("refuse"):
    emit({"type": "error", "message": "Reconnecting... 1/5"})
    emit({"type": "turn.failed", "error": {"message": "the model refused: quota exceeded"}})
    sys.exit(1)
with open("calc.py", "a") as handle:
    handle.write("\\n\\ndef div(a, b):\\n    return a / b\\n")
emit({"type": "item.completed", "item": {"id": "item_0", "type": "file_change",
      "changes": [{"path": "calc.py", "kind": "update"}], "status": "completed"}})
emit({"type": "item.completed", "item": {"id": "item_1", "type": "agent_message",
      "text": "Added div to calc.py; test_div passes."}})
emit({"type": "turn.completed",
      "usage": {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 345}})
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose test_div fails, fsm.toml naming the stand-in codex, no agent CLI on
    PATH."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    kept = [f for f in folders if not any(shutil.which(t, path=f) for t in AGENT_TOOLS)]
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), *kept]))
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "test_calc.py").write_text(TESTS)
    (tmp_path / "tasks.jsonl").write_text(TASKS)
    (tmp_path / "fsm.toml").write_text(CONFIG)
    (tmp_path / "codex_stand_in.py").write_text(STAND_IN)
    return tmp_path


def _loop(cli: Any, *options: str) -> tuple[str, Any]:
    created = cli("new", "ccw-loop", "--set", "title=Add div")
    assert created.code == 0, created.err
    loop_id = created.out.strip()
    return loop_id, cli(*options, "run", "ccw-loop", loop_id)


def _agent_runs(cli: Any, loop_id: str) -> list[dict[str, Any]]:
    history = cli("history", "ccw-loop", loop_id, "--json")
    assert history.code == 0, history.err
    records = [json.loads(line) for line in history.out.splitlines()]
    return [run for record in records for run in record.get("agents", [])]


def test_the_fix_step_records_the_agents_final_message_files_and_usage(
    cli: Any, project: Path
) -> None:
    """The fix runs once and the loop completes; its step's record holds the final message,
    the file changed and the token usage read from the events, and status and history show
    them in one line."""
    loop_id, ran = _loop(cli)
    assert ran.code == 0, ran.err
    (run,) = _agent_runs(cli, loop_id)
    assert {k: v for k, v in run.items() if k not in {"duration_ms"}} == {
        "tool": "codex",
        "mode": "write",
        "command": "python codex_stand_in.py {prompt}",
        "exit_code": 0,
        "ok": True,
        "output": "codex-json",
        "final_message": "Added div to calc.py; test_div passes.",
        "files_changed": ["calc.py"],
        "exit_reason": "completed",
        "usage": {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 345},
    }
    line = (
        "agent codex (write) completed; changed calc.py; 1200 tokens in (200 cached), 345 out; "
        '"Added div to calc.py; test_div passes."'
    )
    status = cli("status", "ccw-loop", loop_id)
    assert f"  agent:   {line} (at " in status.out
    status_json = json.loads(cli("status", "ccw-loop", loop_id, "--json").out)
    assert status_json["last_agent"]["final_message"] == "Added div to calc.py; test_div passes."
    history = cli("history", "ccw-loop", loop_id)
    assert sum(f"[{line}]" in row for row in history.out.splitlines()) == 1


def test_a_run_the_events_call_failed_is_a_failed_fix_naming_the_agents_error(
    cli: Any, project: Path
) -> None:
    """The agent's turn fails: the fix attempt is a failed task whose reason is the agent's
    own error message, recorded in the journal with ok false, and the loop ends failed."""
    (project / "refuse").write_text("")
    loop_id, ran = _loop(cli, "-o", "max_fix_attempts=1")
    assert ran.code == 4, ran.err
    runs = _agent_runs(cli, loop_id)
    assert runs and all(r["ok"] is False for r in runs)
    assert {r["exit_reason"] for r in runs} == {"the model refused: quota exceeded"}
    assert runs[0]["reason"] == (
        "exited 1: python codex_stand_in.py {prompt} (the model refused: quota exceeded)"
    )
    document = json.loads(
        (project / ".workflow" / ".loop" / f"{loop_id}.json").read_text(encoding="utf-8")
    )
    errors = [t.get("error", "") for t in document["skill_state"]["develop"]["tasks"]]
    assert any("(the model refused: quota exceeded)" in e for e in errors)
