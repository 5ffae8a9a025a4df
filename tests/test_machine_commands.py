"""``fsm command``: a machine's own commands (ccw-loop's add_task), and ``fsm fire --reason``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import COUNTER, Cli

C = str(COUNTER)


def test_add_task_appends_to_the_dashboard_file_and_journals_it(cli: Cli, tmp_path: Path) -> None:
    assert cli("new", "ccw-loop", "--id", "L1", "--set", "description=Fix it").code == 0
    tasks = tmp_path / ".workflow" / ".loop" / "L1" / "tasks.jsonl"
    tasks.parent.mkdir(parents=True)
    # the dashboard rewrites the file without a trailing newline
    tasks.write_text(json.dumps({"task_id": "task-1", "description": "first", "order": 4}))
    added = cli(
        "command",
        "ccw-loop",
        "L1",
        "add_task",
        "--set",
        "description=Add 1.0 support",
        "--reason",
        "from the issue",
        "--actor",
        "alice",
    )
    assert added.code == 0, added.err
    lines = tasks.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["task_id"] == "task-1"
    task = json.loads(lines[1])
    assert task["description"] == "Add 1.0 support" and task["order"] == 5
    history = cli("history", "ccw-loop", "L1")
    assert "command    add_task" in history.out and "by alice (from the issue)" in history.out
    assert cli("replay", "ccw-loop", "L1").code == 0


def test_command_refusals_change_nothing(cli: Cli, tmp_path: Path) -> None:
    assert cli("new", "ccw-loop", "--id", "L1", "--set", "description=Fix it").code == 0
    bad = cli("command", "ccw-loop", "L1", "add_task", "--set", "mode=sing")
    assert bad.code == 2 and "description: Field required" in bad.err
    unknown = cli("command", "ccw-loop", "L1", "add-task")
    assert unknown.code == 2 and "its commands: add_task" in unknown.err
    none = cli("command", C, "L1", "add_task")
    assert none.code == 2
    assert not (tmp_path / ".workflow" / ".loop" / "L1").exists()
    assert cli("stop", "ccw-loop", "L1").code == 0
    ended = cli("command", "ccw-loop", "L1", "add_task", "--set", "description=x")
    assert ended.code == 3 and "ended in final state" in ended.err


def test_fire_journals_its_reason_and_actor(cli: Cli) -> None:
    assert cli("new", C, "--id", "c1", "--set", "limit=3").code == 0
    assert cli("start", C, "c1").code == 0
    fired = cli("fire", C, "c1", "count", "--reason", "one by hand", "--actor", "bob")
    assert fired.code == 0, fired.err
    assert "by bob (one by hand)" in cli("history", C, "c1").out.splitlines()[-1]


def test_a_command_naming_an_unknown_handler_is_a_definition_problem(
    cli: Cli, tmp_path: Path
) -> None:
    text = COUNTER.read_text().replace(
        "external_fields:",
        "commands:\n  tidy: {description: Tidy up., handler: tidyup}\nexternal_fields:",
    )
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "machine.yaml").write_text(text)
    (tmp_path / "m" / "functions.py").write_text((COUNTER.parent / "functions.py").read_text())
    checked = cli("check", str(tmp_path / "m" / "machine.yaml"))
    assert checked.code != 0 and "commands.tidy.handler" in checked.out + checked.err
    assert "unknown hook 'tidyup'" in checked.out + checked.err
