"""The journal stays true when the CCW dashboard writes: its writes go through ``JSON.parse`` and
``JSON.stringify`` (``0.0`` becomes ``0``) and set ``updated_at``, on every field the seeds call
the API's. After each write, `fsm replay` and `fsm history --changes` exit 0 and every version
of the journal rebuilds (time travel): exactly, or, for a version another program wrote, to its
fields. The dashboard is emulated exactly (:mod:`tests.machines.ccw_loop.node_json`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm.cli import main
from fsm.model.patch import split
from fsm.model.rebuild import Rebuilder
from fsm.model.records import record_changes
from fsm.view.inspect import replay
from tests.machines.ccw_loop import node_json
from tests.machines.ccw_loop.conftest import LOOP_ID, MACHINE_YAML, Loop
from tests.machines.ccw_loop.test_dashboard import ADD_MUL

TASK = ADD_MUL
PRESS = f"{sys.executable} {Path(node_json.__file__)} .workflow/.loop/{LOOP_ID}.json"
"""A bash task's command that presses a dashboard button (its name follows) while it runs."""


def _master(loop_ws: Any) -> Path:
    path: Path = loop_ws.state_dir / f"{LOOP_ID}.json"
    return path


def _true(loop: Loop, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fsm replay` and `fsm history --changes` exit 0; every version rebuilds, exactly or, when
    another program wrote it, to the fields fsm owns; no record says a number changed to a
    number equal to it."""
    report = replay(loop.instance)
    assert report.problems == [], report.problems
    for argv in (["replay"], ["history", "--changes"]):
        capsys.readouterr()
        command = [argv[0], str(MACHINE_YAML), LOOP_ID, *argv[1:]]
        code = main(["-C", str(root), "--log-level", "warning", *command])
        captured = capsys.readouterr()
        assert code == 0, captured.err
    rules = loop.instance.rules
    rebuilder = Rebuilder(lambda data: rules.render(data, LOOP_ID), rules.core_matches)
    for number, record in enumerate(loop.instance.journal.records(), start=1):
        before = rebuilder.snapshot()
        for op in record_changes(record) or []:
            if op["op"] == "replace" and before is not None:
                old = _at(before, op["path"])
                assert not _one_number(old, op["value"]), (number, op, old)
        rebuilder.follow(number, record)
        verdict = rebuilder.check(record).verdict
        expected = {"foreign", "exact"} if record.actor == "external" else {"exact"}
        assert verdict in expected, (number, record.kind, record.event, verdict)


def _at(document: Any, pointer: str) -> Any:
    for token in split(pointer):
        document = document[int(token)] if isinstance(document, list) else document.get(token)
    return document


def _one_number(old: Any, new: Any) -> bool:
    numbers = (int, float)
    return type(old) in numbers and type(new) in numbers and old == new


def test_a_dashboard_pause_between_steps_and_its_resume(
    loop_ws: Any, started: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Paused by the dashboard after a step (its rewrite turns fsm's 0.0 into 0), then resumed
    by it: the journal is true after each write, and the loop completes."""
    loop_ws.write_config()
    loop_ws.write_tasks([TASK])
    loop = started()
    loop.run(max_steps=2)
    before = json.loads(_master(loop_ws).read_text())
    node_json.dashboard_writes(_master(loop_ws), **node_json.BUTTONS["pause"])
    assert json.loads(_master(loop_ws).read_text()) != before
    _true(loop, loop_ws.root, capsys)
    paused = loop.run()
    assert (paused.outcome, paused.steps) == ("paused", [])
    node_json.dashboard_writes(_master(loop_ws), **node_json.BUTTONS["resume"])
    _true(loop, loop_ws.root, capsys)
    assert loop.run().outcome == "completed"
    _true(loop, loop_ws.root, capsys)


def test_a_dashboard_pause_during_a_step_then_resume(
    loop_ws: Any, started: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dashboard pauses while a task runs (a step's merge), then resumes: the journal
    records its change with the step, and stays true to the end."""
    loop_ws.write_config()
    loop_ws.write_tasks([{**TASK, "command": f"{PRESS} pause"}, {**TASK, "order": 1}])
    loop = started()
    loop.run()
    assert loop.status == "paused"
    _true(loop, loop_ws.root, capsys)
    node_json.dashboard_writes(_master(loop_ws), **node_json.BUTTONS["resume"])
    _true(loop, loop_ws.root, capsys)
    assert loop.run().outcome == "completed"
    _true(loop, loop_ws.root, capsys)


def test_dashboard_edits_of_its_own_fields_while_paused(
    loop_ws: Any, started: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every field the seeds call the API's is the dashboard's to write while the loop is
    paused (a PUT, then fields it owns rewritten): the journal stays true, and the next step
    carries the dashboard's values on."""
    loop_ws.write_config()
    loop_ws.write_tasks([TASK])
    loop = started()
    loop.run(max_steps=2)
    master = _master(loop_ws)
    node_json.dashboard_writes(master, **node_json.BUTTONS["pause"])
    _true(loop, loop_ws.root, capsys)
    edits = {"title": "Renamed", "description": "Edited", "max_iterations": 12, "notes": "x"}
    node_json.dashboard_writes(master, **edits)
    _true(loop, loop_ws.root, capsys)
    node_json.dashboard_writes(master, current_iteration=5, created_at="2025-12-31T00:00:00Z")
    _true(loop, loop_ws.root, capsys)
    node_json.dashboard_writes(master, **node_json.BUTTONS["resume"])
    loop = loop_ws.open()  # a new run, as `fsm run` after the dashboard's resume: it knows
    # nothing of the versions before, and journals the dashboard's edits it finds
    assert loop.run().outcome == "completed"
    _true(loop, loop_ws.root, capsys)
    externals = [r for r in loop.records() if r.actor == "external"]
    assert externals and externals[-1].status == "running"
    final = json.loads(master.read_text())
    assert {key: final[key] for key in edits} == edits
    assert final["created_at"] == "2025-12-31T00:00:00Z"


def test_resaves_of_a_completed_loop(
    loop_ws: Any, started: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A completed loop saved again by the dashboard (a PUT of its title, and of nothing) keeps
    a true journal."""
    loop_ws.write_config()
    loop_ws.write_tasks([TASK])
    loop = started()
    assert loop.run().outcome == "completed"
    node_json.dashboard_writes(_master(loop_ws))
    _true(loop, loop_ws.root, capsys)
    node_json.dashboard_writes(_master(loop_ws), title="Done and renamed")
    _true(loop, loop_ws.root, capsys)
    assert loop.run().outcome == "completed"
    _true(loop, loop_ws.root, capsys)


def test_fsm_writes_numbers_as_the_dashboard_does(loop_ws: Any, started: Any) -> None:
    """A version fsm wrote and the dashboard's rewrite of it spell every number alike: the
    rewrite changes nothing but the fields it set."""
    loop_ws.write_config()
    loop_ws.write_tasks([TASK])
    loop = started()
    loop.run(max_steps=3)
    text = _master(loop_ws).read_text()
    assert text.rstrip("\n") == node_json.stringify(json.loads(text))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_emulation_writes_what_node_writes() -> None:
    """The emulated JSON.parse/JSON.stringify round trip gives node's bytes."""
    document = {
        "pass_rate": 0.0,
        "coverage": 85.0,
        "ratio": 0.25,
        "big": 1e16,
        "huge": 1e21,
        "small": 1.5e-3,
        "negative": -0.0,
        "text": 'é \u2028 \x1b tab\t "quoted" \\',
        "nested": [{"a": 1.0, "b": [2.0, 3.5]}, [], {}],
        "none": None,
        "flag": True,
    }
    text = json.dumps(document, indent=2, ensure_ascii=False)
    script = (
        "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>"
        "process.stdout.write(JSON.stringify(JSON.parse(s),null,2)))"
    )
    done = subprocess.run(
        ["node", "-e", script], input=text.encode(), capture_output=True, check=True
    )
    assert done.stdout.decode() == node_json.stringify(json.loads(text))
