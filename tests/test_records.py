"""Typed journal records: every kind round-trips, old journals still read, unknown kinds and keys
survive, and records that do not fit (or come from a newer fsm) are reported by line."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fsm.base.errors import JournalMismatchError, JournalRecordError
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import load_machine
from fsm.model.records import (
    FORMAT,
    ControlRecord,
    CreateRecord,
    ErrorRecord,
    MergeRecord,
    Record,
    RecoverRecord,
    RepairRecord,
    RetryRecord,
    TransitionRecord,
    UnknownRecord,
    parse_record,
)
from fsm.store.journal import Journal
from fsm.testing import Driver
from fsm.view.diagram import overlay_from_journal
from fsm.view.inspect import check_replay, replay, status
from tests.conftest import COUNTER, Cli

OLD = Path(__file__).parent / "journal_v1"
"""A counter whose journal was written, by hand, in the shapes fsm wrote before records had a
format: every kind, some without the fields added later (``machine`` in ``create``,
``core_hash``, the stamp of a failed step)."""

STAMP = {"time": "2026-01-02T03:04:05.000Z", "actor": "run", "duration_ms": 0.5}
DOC = {"state": "b", "status": "running", "doc_hash": "sha256:1", "core_hash": "sha256:2"}

EVERY_KIND: list[Record] = [
    CreateRecord(machine="counter", dest="a", **STAMP),  # type: ignore[arg-type]
    TransitionRecord(
        event="go",
        transition=2,
        source="a",
        dest="b",
        guards=[{"transition": 2, "guard": "ready", "result": True}],
        actions=["work"],
    ),
    ErrorRecord(
        event="go",
        transition=2,
        source="a",
        dest="a",
        guards=[{"transition": 2, "guard": None, "result": None}],
        action="work",
        error="RuntimeError: no",
        traceback="Traceback ...",
        merged=True,
    ),
    ControlRecord(
        event="pause", source="b", dest="b", status_from="running", status_to="paused", reason="x"
    ),
    MergeRecord(source="b", dest="b", actor="external", reason="re-applied", merged=True),
    RepairRecord(source="b", dest="b", actor="fsm", reason="removed a torn line"),
    RecoverRecord(machine="counter", dest="b", notes=["rebuilt"], moved_aside="x.corrupt"),
    RetryRecord(
        source="failed",
        dest="b",
        status_from="failed",
        status_to="running",
        items=["ISS-1", "ISS-2"],
        reason="fixed",
    ),
]


@pytest.fixture
def old(tmp_path: Path) -> Instance:
    """The old journal's instance, copied into a workspace of the test."""
    shutil.copytree(OLD / ".counters", tmp_path / ".counters")
    return Workspace(tmp_path).instance(load_machine(COUNTER), "old")


def lines_of(journal: Journal) -> list[dict[str, Any]]:
    return [json.loads(line) for line in journal.path.read_text().splitlines()]


@pytest.mark.parametrize("record", EVERY_KIND, ids=lambda r: r.kind)
def test_every_kind_round_trips_through_a_journal_line(record: Record, tmp_path: Path) -> None:
    """A record written (unstamped and stamped) reads back equal, in the current format."""
    journal = Journal(tmp_path / "journal.ndjson")
    before = dataclasses.asdict(record)
    stamped = record.stamped(time="t", state="b", status=None, doc_hash="h", core_hash="c")
    journal.write(record)
    journal.write(stamped)
    read = journal.records()
    assert read == [record, stamped]
    assert [r.format for r in read] == [FORMAT, FORMAT]
    assert lines_of(journal)[1]["doc_hash"] == "h"
    assert dataclasses.asdict(record) == before  # a stamped copy leaves the record as it was
    merged = stamped.as_merged()
    assert (merged.merged, merged.doc_hash, type(merged)) == (True, "h", type(record))
    assert merged == dataclasses.replace(stamped, merged=True)


def test_a_record_lists_keep_their_values_when_parsed() -> None:
    """What a writer put in lists (guards, actions, notes) is what a reader gets."""
    step = parse_record(json.loads(json.dumps(EVERY_KIND[1].to_json())), 1)
    assert isinstance(step, TransitionRecord)
    assert list(step.actions) == ["work"]
    assert [g["guard"] for g in step.guards] == ["ready"]


def test_records_without_a_format_are_format_1_and_keep_their_shape(old: Instance) -> None:
    """Every line of the old journal reads as its kind, format 1, with missing later fields
    None; written back, each line keeps its values (plus its format, and fields it lacked as
    null)."""
    records = old.journal.records()
    kinds = [r.kind for r in records]
    assert kinds == [
        "create", "control", "transition", "error", "control", "control",
        "transition", "merge", "repair", "recover", "transition", "transition",
    ]  # fmt: skip
    assert {r.format for r in records} == {1}
    create = records[0]
    assert isinstance(create, CreateRecord) and create.machine is None
    assert create.core_hash is None
    error = records[3]
    assert isinstance(error, ErrorRecord) and (error.state, error.doc_hash) == (None, None)
    assert error.guards[0]["result"] is None
    for record, line in zip(records, lines_of(old.journal), strict=True):
        written = record.to_json()
        assert {key: written[key] for key in line} == line
        assert written["format"] == 1
        assert {written[key] for key in written.keys() - line.keys() - {"format"}} <= {None}


def test_replay_reads_an_old_journal(old: Instance) -> None:
    """`fsm replay` follows the old journal's chain (merged steps, a repair, a recovery) to the
    document, with no problem and no note."""
    report = check_replay(old)
    assert (report.records, report.state, report.problems, report.notes) == (12, "done", [], [])


def test_history_reads_an_old_journal(old: Instance, cli: Cli) -> None:
    """`fsm history` shows every old record as one line, control reasons and errors included."""
    result = cli("history", str(COUNTER), "old")
    assert result.code == 0 and result.err == ""
    lines = result.out.splitlines()
    assert len(lines) == 12
    assert lines[0] == "2025-03-01T10:00:00.000Z create                  - -> idle by cli"
    assert "error      count        counting -> counting RuntimeError: the limit file" in lines[3]
    assert lines[5].endswith("status paused -> running by alice (back from lunch)")
    assert lines[9] == "2025-03-01T10:00:08.000Z recover                 - -> counting by cli"
    tail = cli("history", str(COUNTER), "old", "--tail", "1")
    assert tail.out.splitlines() == lines[-1:]


def test_status_and_last_error_read_an_old_journal(old: Instance, tmp_path: Path) -> None:
    """Status reads the old instance; an old error record (no stamp) is its last error while no
    step came after it."""
    shown = status(old)
    assert (shown.state, shown.status, shown.outcome) == ("done", "done", "success")
    assert old.journal.last_error() is None
    head = old.journal.path.read_text().splitlines(keepends=True)[:4]
    old.journal.path.write_text("".join(head))
    error = old.journal.last_error()
    assert error is not None
    assert (error.action, error.error) == (
        "guard below_limit",
        "RuntimeError: the limit file is gone",
    )


def test_the_diagram_overlay_and_the_driver_read_an_old_journal(old: Instance) -> None:
    """Visit counts and fsm.testing's path and events come out of the old journal as they did."""
    overlay = overlay_from_journal(old.journal.records(), "done")
    assert overlay.state_visits == {"idle": 1, "counting": 4, "done": 1}
    assert overlay.edge_visits == {0: 3, 1: 1}
    assert overlay.control_visits == {"start": 1, "external": 1, "resume": 1}
    driver = Driver(old, old.machine.document_model)
    assert driver.events() == ["count", "count!", "count", "count", "finish"]
    assert driver.path() == ["idle", "counting", "counting", "counting", "counting", "done"]


def test_an_unknown_kind_and_unknown_keys_survive(tmp_path: Path) -> None:
    """A record of a kind this fsm does not know, and keys no definition names, are read and
    kept: written back, the line is the same object."""
    journal = Journal(tmp_path / "journal.ndjson")
    future = {"kind": "checkpoint", "source": None, "label": "nightly", "time": 5, "format": 2}
    extra = {**EVERY_KIND[1].to_json(), "cost": {"tokens": 12}}
    journal.append(future)
    journal.append(extra)
    unknown, step = journal.records()
    assert isinstance(unknown, UnknownRecord)
    assert (unknown.kind, unknown.source, unknown.time) == ("checkpoint", None, None)
    assert unknown.extra == {"label": "nightly", "time": 5}
    assert unknown.to_json() == {**future, "event": None, "dest": None}
    assert isinstance(step, TransitionRecord) and step.extra == {"cost": {"tokens": 12}}
    assert step.to_json() == extra


def test_replay_passes_over_an_unknown_kind_without_a_state(old: Instance) -> None:
    """A record of a newer kind that moves no state does not break the replay chain."""
    lines = old.journal.path.read_text().splitlines(keepends=True)
    lines.insert(5, '{"kind":"note","text":"from a newer fsm"}\n')
    old.journal.path.write_text("".join(lines))
    assert check_replay(old).problems == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"kind":"transition","event":"go","source":"a","transition":1}', "needs 'dest'"),
        (
            '{"kind":"transition","event":"go","source":5,"dest":"b","transition":1}',
            "needs 'source' as text, not 5",
        ),
        (
            '{"kind":"transition","event":"go","source":"a","dest":"b","transition":true}',
            "needs 'transition' as an integer, not true",
        ),
        ('{"kind":"create","dest":"a","merged":null}', "needs 'merged' as true or false, not null"),
        (
            '{"kind":"recover","dest":"a","notes":"rebuilt"}',
            "needs 'notes' as a list of text, not \"rebuilt\"",
        ),
        (
            '{"kind":"error","event":"go","source":"a","dest":"a","transition":0,"action":"x",'
            '"error":"e","guards":[{"guard":3}]}',
            "needs 'guards' as a list of guard results",
        ),
        (
            '{"kind":"retry","event":"retry","source":"f","dest":"a","status_from":"failed",'
            '"status_to":"running","items":"ISS-1"}',
            "needs 'items' as a list of text, not \"ISS-1\"",
        ),
        ('{"kind":"create","dest":"a","format":4}', "written by a newer fsm (journal format 4"),
        ('{"kind":"mystery","format":9}', "written by a newer fsm (journal format 9"),
        ('{"kind":"create","dest":"a","format":0}', "has no journal format 0 (formats are 1 to 3)"),
    ],
    ids=[
        "missing",
        "wrong-type",
        "bool-for-int",
        "null",
        "list",
        "guards",
        "retry-items",
        "newer",
        "newer-unknown",
        "zero",
    ],
)
def test_a_record_that_does_not_fit_names_its_line(line: str, problem: str) -> None:
    """A JSON object that does not fit its kind (or comes from a newer fsm) is one clear error
    naming the line and the field."""
    with pytest.raises(JournalRecordError) as caught:
        parse_record(json.loads(line), 7)
    assert str(caught.value).startswith("journal line 7: ")
    assert problem in str(caught.value)


def test_readers_report_a_misfit_line_and_go_on(old: Instance, cli: Cli) -> None:
    """Replay lists a line that is not a record as a problem; history warns about it, naming
    the line, and shows the others; history --json shows the line as it is."""
    lines = old.journal.path.read_text().splitlines(keepends=True)
    lines.insert(2, '{"kind":"control","event":"pause","format":7}\n')
    old.journal.path.write_text("".join(lines))
    with pytest.raises(JournalMismatchError, match="journal line 3: was written by a newer fsm"):
        check_replay(old)
    assert replay(old).records == 12
    shown = cli("history", str(COUNTER), "old")
    assert shown.code == 0 and len(shown.out.splitlines()) == 12
    assert "fsm: warning: journal line 3: was written by a newer fsm" in shown.err
    raw = cli("history", str(COUNTER), "old", "--json")
    assert json.loads(raw.out.splitlines()[2]) == {"kind": "control", "event": "pause", "format": 7}


def test_new_records_carry_the_format(tmp_path: Path) -> None:
    """Records fsm writes now say their format, on every line."""
    instance = Workspace(tmp_path).instance(load_machine(COUNTER), "c1")
    instance.create({"limit": 1})
    assert [line["format"] for line in lines_of(instance.journal)] == [FORMAT]
    assert lines_of(instance.journal)[0]["machine"] == "counter"


def test_a_signature_seen_before_does_not_let_other_types_through() -> None:
    """Records of one kind are compared with the signature (keys and value types) of the one
    before: a record with the same keys but a value of another type is still refused, and each
    of two signatures that alternate is still read."""
    step = EVERY_KIND[1].to_json()
    other = {**step, "actions": ["x"], "duration_ms": 3}  # an integer: another valid signature
    wrong = {**step, "transition": "2"}
    read = [parse_record(json.loads(json.dumps(data)), 1) for data in (step, other, step, other)]
    assert [r.duration_ms for r in read] == [None, 3, None, 3]
    with pytest.raises(JournalRecordError, match="needs 'transition' as an integer"):
        parse_record(dict(wrong), 2)
    assert isinstance(parse_record(dict(step), 3), TransitionRecord)
    with pytest.raises(JournalRecordError, match="needs 'transition' as an integer"):
        parse_record(dict(wrong), 4)


@pytest.mark.parametrize("kind", [["transition"], {"name": "transition"}, 2.5, None])
def test_a_kind_that_is_not_text_reads_as_an_unknown_record(
    kind: object, old: Instance, cli: Cli
) -> None:
    """A line whose ``kind`` is not text (a list, an object, a number, null) is a record of no
    kind this fsm knows: every reader goes on (it used to stop `fsm history`, `fsm replay` and
    `fsm status` with an internal error when the kind was a list or an object)."""
    record = parse_record({"kind": kind, "source": "a"}, 1)
    assert isinstance(record, UnknownRecord) and record.kind == "?"
    assert record.source == "a" and record.extra == {"kind": kind}
    lines = old.journal.path.read_text().splitlines(keepends=True)
    lines.insert(5, json.dumps({"kind": kind}) + "\n")
    lines.append(json.dumps({"kind": kind, "event": "x"}) + "\n")
    old.journal.path.write_text("".join(lines))
    shown = cli("history", str(COUNTER), "old")
    assert shown.code == 0 and shown.err == "", shown.err
    assert len(shown.out.splitlines()) == 14
    assert cli("history", str(COUNTER), "old", "--tail", "1").out.split()[1:3] == ["?", "x"]
    assert replay(old).records == 14
    assert cli("status", str(COUNTER), "old").code == 0
