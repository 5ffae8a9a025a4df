"""`fsm retry`: a failed instance reopened by its machine's ``retry`` hook, journaled, then run
to its goal; refused (exit 3, nothing changed) where the machine or the instance does not allow
it."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import COUNTER, ENGINE_MACHINES, Cli

J = str(ENGINE_MACHINES / "judged" / "machine.yaml")


def _flaky(folder: Path) -> str:
    """A program that fails until ``fixed`` exists in its folder (a cause a person can fix)."""
    path = folder / "flaky.sh"
    path.write_text(f'#!/bin/sh\ntest -e "{folder}/fixed"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _ok(folder: Path) -> str:
    path = folder / "ok.sh"
    path.write_text("#!/bin/sh\necho ran >> ran.txt\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _failed_build(cli: Cli, folder: Path, names: tuple[str, ...] = ("a", "b", "c")) -> None:
    """Build b1 with parts ``names``: ``b`` and ``c`` fail until ``fixed`` exists."""
    programs = {"a": _ok(folder), "b": _flaky(folder), "c": _flaky(folder)}
    parts = [{"name": n, "program": programs[n]} for n in names]
    (folder / "inputs.json").write_text(json.dumps({"parts": parts}))
    assert cli("new", J, "--id", "b1", "--input", str(folder / "inputs.json")).code == 0
    ran = cli("run", J, "b1")
    assert ran.code == 4, ran.out + ran.err


def _document(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "builds" / "b1.json").read_text())
    return data


def _files(folder: Path) -> dict[str, bytes]:
    """The document and the journal, as bytes (what a refused retry must leave alone)."""
    meta = folder / "builds" / "b1.fsm"
    found = {"doc": (folder / "builds" / "b1.json").read_bytes()}
    for path in sorted(meta.glob("journal*")):
        found[path.name] = path.read_bytes()
    assert "journal.ndjson" in found
    return found


def test_retry_reopens_the_failed_items_and_the_run_reaches_the_goal(
    cli: Cli, tmp_path: Path
) -> None:
    """After the cause is fixed, retry reopens every failed part; run rebuilds only those and
    completes (exit 0); the journal has one retry record naming them, and replays."""
    _failed_build(cli, tmp_path)
    (tmp_path / "fixed").touch()

    retried = cli("retry", J, "b1", "--reason", "fixed the flaky parts")

    assert retried.code == 0, retried.err
    assert retried.out.strip() == (
        f"b1: reopened b, c (state 'todo', status running); 'fsm run {J} b1' runs them"
    )
    doc = _document(tmp_path)
    assert (doc["phase"], doc["status"]) == ("todo", "running")
    assert [p["built"] for p in doc["parts"]] == [True, None, None]
    ran = cli("run", J, "b1")
    assert ran.code == 0, ran.out + ran.err
    assert ran.out.strip().endswith("completed in state 'done' after 3 steps: all 3 parts built")
    assert (tmp_path / "ran.txt").read_text() == "ran\n"  # part a was not built again
    history = cli("history", J, "b1", "--json").out.splitlines()
    [record] = [json.loads(line) for line in history if json.loads(line)["kind"] == "retry"]
    assert {k: record[k] for k in ("event", "source", "dest", "status_from", "status_to")} == {
        "event": "retry",
        "source": "done",
        "dest": "todo",
        "status_from": "done",
        "status_to": "running",
    }
    assert (record["items"], record["reason"], record["actor"]) == (
        ["b", "c"],
        "fixed the flaky parts",
        "cli",
    )
    shown = cli("history", J, "b1").out
    assert "retry      retry        done -> todo status done -> running reopened b, c" in shown
    assert cli("replay", J, "b1").code == 0


def test_retry_of_named_items_reopens_only_those(cli: Cli, tmp_path: Path) -> None:
    """Naming a failed part reopens it alone; the other failed part stays failed, so the run
    ends failed again naming it."""
    _failed_build(cli, tmp_path)
    (tmp_path / "fixed").touch()

    assert cli("retry", J, "b1", "b").code == 0

    assert [p["built"] for p in _document(tmp_path)["parts"]] == [True, None, False]
    ran = cli("run", J, "b1")
    assert ran.code == 4
    assert ran.out.strip().endswith("1 of 3 parts failed: c")


@pytest.mark.parametrize(
    ("setup", "argv", "code", "message"),
    [
        pytest.param(
            "counter",
            ("retry", str(COUNTER), "c1"),
            3,
            "fsm: error: machine 'counter' cannot retry an instance (it has no 'retry' hook): "
            "create a new instance instead",
            id="machine-without-hook",
        ),
        pytest.param(
            "created",
            ("retry", J, "b1"),
            3,
            "fsm: error: cannot retry instance 'b1': it has not ended (state 'todo', status "
            "created); retry is for an instance that ended failed ('fsm run' continues this one)",
            id="not-ended",
        ),
        pytest.param(
            "succeeded",
            ("retry", J, "b1"),
            3,
            "fsm: error: cannot retry instance 'b1': it ended in 'done' reaching its goal (all 1 "
            "parts built): nothing failed",
            id="ended-successfully",
        ),
        pytest.param(
            "failed",
            ("retry", J, "b1", "a"),
            3,
            "fsm: error: part a did not fail",
            id="item-that-did-not-fail",
        ),
        pytest.param(
            "failed",
            ("retry", J, "b1", "zz"),
            2,
            "fsm: error: no part zz in this build",
            id="unknown-item",
        ),
    ],
)
def test_retry_is_refused_with_nothing_changed(
    cli: Cli, tmp_path: Path, setup: str, argv: tuple[str, ...], code: int, message: str
) -> None:
    """A retry the machine or the instance does not allow is one error line with its exit
    code, and the document and journal are left byte for byte as they were."""
    if setup == "counter":
        assert cli("new", str(COUNTER), "--id", "c1").code == 0
        before = (tmp_path / ".counters" / "c1.json").read_bytes()
    else:
        if setup == "failed":
            _failed_build(cli, tmp_path)
        else:
            parts = [{"name": "a", "program": _ok(tmp_path)}]
            (tmp_path / "inputs.json").write_text(json.dumps({"parts": parts}))
            assert cli("new", J, "--id", "b1", "--input", str(tmp_path / "inputs.json")).code == 0
            if setup == "succeeded":
                assert cli("run", J, "b1").code == 0
        before_files = _files(tmp_path)

    refused = cli(*argv)

    assert (refused.code, refused.err.strip(), refused.out) == (code, message, "")
    if setup == "counter":
        assert (tmp_path / ".counters" / "c1.json").read_bytes() == before
    else:
        assert _files(tmp_path) == before_files


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ("resume", J, "b1"),
            "fsm: error: cannot resume instance 'b1': it has ended in final state 'done'; "
            "'fsm retry judged b1' reopens it",
            id="resume",
        ),
        pytest.param(
            ("fire", J, "b1", "build"),
            "fsm: error: instance 'b1' is in final state 'done': no events are accepted; "
            "'fsm retry judged b1' reopens it",
            id="fire",
        ),
    ],
)
def test_commands_refused_on_a_failed_instance_point_to_retry(
    cli: Cli, tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    """resume and fire still refuse an instance that ended failed (exit 3), and say which
    command reopens it when its machine can retry."""
    _failed_build(cli, tmp_path)

    refused = cli(*argv)

    assert (refused.code, refused.err.strip()) == (3, message)
