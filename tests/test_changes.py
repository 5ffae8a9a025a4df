"""Every journal record of a step says what the step changed (a JSON Patch against the version
before), on every store; ``fsm history --changes`` shows it and ``fsm replay`` checks it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.base.clock import SimulatedClock
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine
from fsm.model.patch import PATCH_LIMIT
from fsm.model.rebuild import Rebuilder
from fsm.model.records import Record, changed_paths, record_changes
from fsm.testing import MemoryStorage
from fsm.view.inspect import replay
from tests.conftest import COUNTER, Cli


def _journal_path(instance: Instance) -> Path:
    return Path(instance.store.describe(instance.id)).with_suffix(".fsm") / "journal.ndjson"


def _rebuilt_hashes(instance: Instance) -> list[str]:
    """How each record's version checks out when rebuilt from the patches before it."""
    rules = instance.rules
    rebuilder = Rebuilder(lambda data: rules.render(data, instance.id), rules.core_matches)
    verdicts = []
    for number, record in instance.journal.entries():
        assert isinstance(record, Record)
        rebuilder.follow(number, record)
        verdicts.append(rebuilder.check(record).verdict)
    return verdicts


@pytest.fixture(params=["files", "memory"])
def store_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    """A workspace on each of fsm's stores."""
    storage = MemoryStorage() if request.param == "memory" else None
    return Workspace(tmp_path, clock=SimulatedClock(tick=0.001), storage=storage)


def test_each_record_of_a_run_says_what_it_changed(
    store_workspace: Workspace, counter: Machine
) -> None:
    """Creation holds the whole document, every later record its patch, on every store; the
    patches applied one after the other give every record's recorded hash."""
    instance = store_workspace.instance(counter, "c1")
    instance.create({"limit": 2})
    Engine(instance).run()
    records = instance.journal.records()
    created = record_changes(records[0]) or []
    assert [(op["op"], op["path"]) for op in created] == [("add", "")]
    assert created[0]["value"]["limit"] == 2
    start, first = records[1], records[2]
    assert start.kind == "control"
    assert changed_paths(start) == ["/status", "/updated_at"]
    assert record_changes(first)[0] == {"op": "replace", "path": "/phase", "value": "counting"}
    assert {"op": "replace", "path": "/count", "value": 1} in (record_changes(first) or [])
    assert _rebuilt_hashes(instance) == ["exact"] * len(records)


def test_history_changes_shows_the_changed_fields(
    make_counter: Callable[..., Instance], cli: Cli
) -> None:
    """``fsm history --changes`` prints each changed field under its record, with its value."""
    make_counter("c1", limit=1)
    assert cli("run", str(COUNTER), "c1", "-q").code == 0
    result = cli("history", str(COUNTER), "c1", "--changes")
    assert result.code == 0
    lines = result.out.splitlines()
    assert "    + (the whole document: 5 fields)" in lines
    finish = next(i for i, line in enumerate(lines) if " finish " in line)
    assert lines[finish + 1 : finish + 3] == ['    ~ /status = "done"', '    ~ /phase = "done"']
    plain = cli("history", str(COUNTER), "c1")
    assert not any(line.startswith("    ") for line in plain.out.splitlines())


def _rewrite(instance: Instance, edit: Callable[[list[dict[str, Any]]], None]) -> None:
    path = _journal_path(instance)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    edit(records)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_replay_names_the_record_whose_changes_do_not_rebuild_it(
    make_counter: Callable[..., Instance],
) -> None:
    """A patch that does not give its record's document is a replay problem naming its line,
    even when a later record sets the field right again."""
    instance = make_counter("c1", limit=3)
    Engine(instance).run()
    assert replay(instance).problems == []

    def tamper(records: list[dict[str, Any]]) -> None:
        assert records[3]["changes"][0]["path"] == "/count"
        records[3]["changes"][0]["value"] = 7  # the second count step

    _rewrite(instance, tamper)
    problems = replay(instance).problems
    assert len(problems) == 1
    assert "the record on line 4 (transition count)" in problems[0]


def test_an_edit_between_steps_is_journaled_by_the_next_step(
    make_counter: Callable[..., Instance],
) -> None:
    """Another program's edit of its own field between two steps is journaled by the next
    write (an external record with what it changed): replay has no problem and no note, every
    version rebuilds exactly."""
    instance = make_counter("c1", limit=4)
    ControlPlane(instance).apply("start")
    engine = Engine(instance)
    engine.step()
    document = Path(instance.store.describe(instance.id))
    data = json.loads(document.read_text())
    document.write_text(json.dumps({**data, "title": "renamed by the dashboard"}, indent=2) + "\n")
    engine.run()
    report = replay(instance)
    assert (report.problems, report.notes) == ([], [])
    external = [r for r in instance.journal.records() if r.actor == "external"]
    assert len(external) == 1
    assert external[0].extra["changes"] == [
        {"op": "add", "path": "/title", "value": "renamed by the dashboard"}
    ]


def test_a_pause_written_by_another_program_is_journaled_with_its_change(
    make_counter: Callable[..., Instance],
) -> None:
    """A status another program set between steps is an external record holding its change,
    so every version still rebuilds exactly."""
    instance = make_counter("c1", limit=4)
    ControlPlane(instance).apply("start")
    engine = Engine(instance)
    engine.step()
    document = Path(instance.store.describe(instance.id))
    data = json.loads(document.read_text())
    document.write_text(json.dumps({**data, "status": "paused"}, indent=2) + "\n")
    assert engine.run().outcome == "paused"
    external = [r for r in instance.journal.records() if r.event == "external"]
    assert [changed_paths(r) for r in external] == [["/status"]]
    assert set(_rebuilt_hashes(instance)) == {"exact"}
    assert replay(instance).notes == []


def test_a_change_larger_than_the_limit_keeps_its_paths(
    make_counter: Callable[..., Instance],
) -> None:
    """A record whose patch is over the limit keeps the paths it changed; replay says the
    versions from it on cannot be rebuilt, and finds nothing wrong."""
    instance = make_counter("c1", limit=2, title="x" * (PATCH_LIMIT + 10))
    Engine(instance).run()
    created = instance.journal.records()[0]
    assert "changes" not in created.extra
    assert changed_paths(created) == [""]
    assert record_changes(instance.journal.records()[-1]) is not None
    report = replay(instance)
    assert report.problems == []
    assert any("record 1 kept only the paths it changed" in note for note in report.notes)


def test_journals_written_before_changes_still_replay(
    make_counter: Callable[..., Instance],
) -> None:
    """A journal whose records say nothing of what changed replays as before, without notes
    about changes."""
    instance = make_counter("c1", limit=2)
    Engine(instance).run()

    def forget(records: list[dict[str, Any]]) -> None:
        for record in records:
            record.pop("changes", None)

    _rewrite(instance, forget)
    report = replay(instance)
    assert report.problems == []
    assert report.notes == []
    assert [record_changes(r) for r in instance.journal.records()] == [None] * 5
