"""Every moment of a commit, raced deterministically by every kind of writer.

The statistical test (``test_guarantee_lost_updates``) throws writes at random moments; this one
puts one write exactly at each point of the commit where a write could slip through, with each
way the CCW dashboard (or an editor) writes: in place into the file it finds, in place into a file
it opened earlier (the one fsm is about to replace), and through a temporary file renamed over
the document. Each write changes one thing another program owns; afterwards that change and
fsm's step must both be in the document, and the journal must replay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance
from fsm.engine.transaction import Transaction
from fsm.store import file_swap as commit_module
from fsm.store.file_swap import FileSwap
from fsm.view.inspect import check_replay

Make = Callable[..., Instance]

CHANGES: dict[str, dict[str, Any]] = {
    "title": {"title": "edited"},
    "pause": {"status": "paused"},
    "stop": {"status": "failed", "phase": "failed", "failure_reason": "stopped by the dashboard"},
    "note": {"dashboard_note": "theirs"},
}


class Writer:
    """Another program writing the document: ``inplace`` into the file it finds, ``opened``
    into a file it opened before (``prepare``), ``rename`` through a temporary file."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind = kind
        self.path = path
        self.handle: int | None = None
        self.read: dict[str, Any] | None = None

    def prepare(self) -> None:
        """Read the document (and, for ``opened``, open it) without writing yet."""
        self.read = json.loads(self.path.read_text())
        if self.kind == "opened":
            self.handle = os.open(self.path, os.O_WRONLY)

    def write(self, change: dict[str, Any]) -> None:
        """Write what it read, changed."""
        assert self.read is not None
        raw = json.dumps({**self.read, **change}, indent=2).encode()
        if self.kind == "rename":
            tmp = self.path.with_name(self.path.name + ".editor")
            tmp.write_bytes(raw)
            os.rename(tmp, self.path)
            return
        fd = self.handle if self.handle is not None else os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, raw, 0)
        finally:
            os.close(fd)
            self.handle = None


def _instance(make_counter: Make) -> Instance:
    instance = make_counter(limit=4, title="original")
    ControlPlane(instance).apply("start")
    Engine(instance).step()
    return instance


@pytest.fixture(params=["inplace", "opened", "rename"])
def writer_kind(request: pytest.FixtureRequest) -> str:
    """How the other program writes (see :class:`Writer`)."""
    kind: str = request.param
    return kind


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_write_right_after_the_last_check_survives(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch, writer_kind: str, change: str
) -> None:
    """A write landing after the commit's last look at the file and before its replace: the
    change is re-applied, fsm's step is kept."""
    instance = _instance(make_counter)
    writer = Writer(writer_kind, instance.store.paths(instance.id).document)
    real = FileSwap._unchanged
    fired = []

    def check_then_write(*args: Any) -> bool:
        unchanged = real(*args)
        if unchanged and not fired:
            fired.append(True)
            writer.write(CHANGES[change])
        return unchanged

    writer.prepare()
    monkeypatch.setattr(FileSwap, "_unchanged", staticmethod(check_then_write))
    Engine(instance).step()
    monkeypatch.setattr(FileSwap, "_unchanged", staticmethod(real))
    assert fired
    _assert_both_kept(instance, change, counted=2)


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_write_during_the_step_survives(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch, writer_kind: str, change: str
) -> None:
    """A write landing while the step computes (after its read, before the commit's)."""
    instance = _instance(make_counter)
    writer = Writer(writer_kind, instance.store.paths(instance.id).document)
    real = commit_module.write_temporary_open

    def write_then_commit(path: Path, data: bytes, **kwargs: Any) -> Any:
        monkeypatch.setattr(commit_module, "write_temporary_open", real)
        writer.write(CHANGES[change])
        return real(path, data, **kwargs)

    writer.prepare()
    monkeypatch.setattr(commit_module, "write_temporary_open", write_then_commit)
    Engine(instance).step()
    _assert_both_kept(instance, change, counted=2)


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_stale_write_after_the_replace_survives(
    make_counter: Make, writer_kind: str, change: str
) -> None:
    """A writer that read (or opened) the version before a step and writes after it: its copy
    of the old version must not undo the step, and its change must stay."""
    instance = _instance(make_counter)
    writer = Writer(writer_kind, instance.store.paths(instance.id).document)
    engine = Engine(instance)
    with engine._run_lock():
        writer.prepare()
        engine.step()
        writer.write(CHANGES[change])
        engine.run()
    _assert_both_kept(instance, change, counted=2)


def _assert_both_kept(instance: Instance, change: str, *, counted: int) -> None:
    doc = json.loads(instance.store.paths(instance.id).document.read_text())
    wanted = CHANGES[change]
    assert {key: doc.get(key) for key in wanted} == wanted, doc
    assert doc["count"] >= counted, doc
    steps = [r for r in instance.journal.read().records if r.get("event") == "count"]
    assert doc["count"] == len(steps), doc
    check_replay(instance)
    assert not list(instance.store.paths(instance.id).document.parent.glob(".*.tmp"))


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_write_between_two_steps_is_kept_and_journaled(
    make_counter: Make, writer_kind: str, change: str
) -> None:
    """A write landing while no step runs: the next step keeps it, and a stop or pause seen
    that way is journaled (as an external control record), so the journal still replays."""
    instance = _instance(make_counter)
    writer = Writer(writer_kind, instance.store.paths(instance.id).document)
    engine = Engine(instance)
    with engine._run_lock():
        engine.step()
        writer.prepare()
        writer.write(CHANGES[change])
        engine.run()
    _assert_both_kept(instance, change, counted=2)
    if change in ("pause", "stop"):
        last = instance.journal.read().records[-1]
        assert (last["kind"], last["actor"], last["status"]) == (
            "control",
            "external",
            CHANGES[change]["status"],
        )


@pytest.mark.parametrize("later", ["inplace", "rename"])
@pytest.mark.parametrize("moment", ["before", "right after"])
def test_a_change_in_the_replaced_file_is_not_undone_by_a_later_write(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch, later: str, moment: str
) -> None:
    """One write lands in the file fsm just replaced (invisible until fsm re-applies it); a
    second write, made from the document as it looked meanwhile, lands before or right after
    fsm re-applied the first. The second writer never saw the first change and did not undo
    it: both stay. (Found by the statistical test: a dashboard note lost this way.)"""
    instance = _instance(make_counter)
    engine = Engine(instance)
    first = Writer("opened", instance.store.paths(instance.id).document)
    second = Writer(later, instance.store.paths(instance.id).document)
    real = Transaction._take_late_writes

    def settle_then_second_write(self: Transaction) -> Any:
        settled = real(self)
        if settled is not None:
            monkeypatch.setattr(Transaction, "_take_late_writes", real)
            second.write(CHANGES["title"])
        return settled

    with engine._run_lock():
        first.prepare()
        engine.step()  # replaces the file the first writer holds open
        first.write(CHANGES["note"])
        second.prepare()  # sees the document without the note
        if moment == "before":
            second.write(CHANGES["title"])
        else:
            monkeypatch.setattr(Transaction, "_take_late_writes", settle_then_second_write)
        engine.run()
    doc = json.loads(instance.store.paths(instance.id).document.read_text())
    assert (doc["title"], doc.get("dashboard_note"), doc["count"]) == ("edited", "theirs", 4)
    check_replay(instance)


def test_a_copy_of_another_writers_version_is_not_taken_for_fsms_merge_of_it(
    make_counter: Make,
) -> None:
    """A note lands in the file fsm just replaced; the dashboard then renames a title edit over
    the document (read without the note), fsm re-applies the note onto that version, and the
    dashboard writes a stop made from the version it renamed. The stop's copy lacks the note
    because its writer never saw it, not because it deleted it: the note stays. (Found by the
    statistical test: the copy was taken for one of fsm's merge, which has the note.)"""
    instance = _instance(make_counter)
    engine = Engine(instance)
    note = Writer("opened", instance.store.paths(instance.id).document)
    title = Writer("rename", instance.store.paths(instance.id).document)
    stop = Writer("inplace", instance.store.paths(instance.id).document)
    with engine._run_lock():
        note.prepare()
        engine.step()  # replaces the file the note's writer holds open
        note.write(CHANGES["note"])
        title.prepare()  # sees the document without the note
        title.write(CHANGES["title"])
        stop.prepare()  # sees the title edit, still without the note
        engine.step()  # re-applies the note onto the title edit, then counts
        stop.write(CHANGES["stop"])
        result = engine.run()
    doc = json.loads(instance.store.paths(instance.id).document.read_text())
    assert result.outcome == "failed"
    kept = (doc["title"], doc.get("dashboard_note"), doc["status"], doc["failure_reason"])
    assert kept == ("edited", "theirs", "failed", "stopped by the dashboard")
    check_replay(instance)


@pytest.mark.parametrize("kind", ["inplace", "opened"])
def test_without_renameat2_other_writers_are_still_merged(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Where the system cannot exchange two files (not Linux), the document is replaced by a
    rename: writes in place, into the replaced file or onto a newer version are still merged
    (only a rename landing in the microseconds between the last check and the replace is not
    seen there)."""
    from fsm.base import files

    monkeypatch.setattr(files, "_renameat2", lambda: None)
    assert not files.exchange(Path("a"), Path("b"))
    instance = _instance(make_counter)
    writer = Writer(kind, instance.store.paths(instance.id).document)
    engine = Engine(instance)
    with engine._run_lock():
        writer.prepare()
        engine.step()
        writer.write(CHANGES["stop"])
        engine.run()
    _assert_both_kept(instance, "stop", counted=2)


class SlowWriter:
    """A writer in place that truncates the file, is descheduled, and writes later (when fsm
    next waits for the file to parse, or right after fsm's next look at a replaced file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pending: list[tuple[int, bytes]] = []

    def truncate(self, change: dict[str, Any], *, base: dict[str, Any] | None = None) -> None:
        """Read the document (or take ``base``), open it truncating it, and hold the write."""
        data = base if base is not None else json.loads(self.path.read_text())
        raw = json.dumps({**data, **change}, indent=2).encode()
        self.pending.append((os.open(self.path, os.O_WRONLY | os.O_TRUNC), raw))

    def finish(self) -> None:
        """The held writes land."""
        for fd, raw in self.pending:
            os.pwrite(fd, raw, 0)
            os.close(fd)
        self.pending.clear()


def test_a_file_emptied_twice_by_writers_midway_is_not_taken_as_unchanged(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found under load by the statistical test (a stop lost without trace): a dashboard edit
    truncates the document just before fsm reads it, and writes while fsm waits for it to
    parse; a stop truncates it again just before fsm's last check and writes after the
    replace. The empty file fsm read first must not count as what the file held: the check
    sees the change and the stop is merged."""
    instance = _instance(make_counter)
    writer = SlowWriter(instance.store.paths(instance.id).document)
    real_open, real_unchanged, real_keep = (
        FileSwap._open_current,
        FileSwap._unchanged,
        FileSwap._keep_replaced,
    )
    title_seen: list[dict[str, Any]] = []
    stage = {"open": 0, "check": 0}

    def sleep_lands_writes(seconds: float) -> None:
        writer.finish()

    def open_after_truncation(self: FileSwap, path: Path) -> Any:
        stage["open"] += 1
        if stage["open"] == 1:
            title_seen.append(json.loads(path.read_text()))
            writer.truncate(CHANGES["title"])
        return real_open(self, path)

    def check_after_truncation(*args: Any) -> bool:
        stage["check"] += 1
        if stage["check"] == 1:
            writer.truncate(CHANGES["stop"], base={**title_seen[0], **CHANGES["title"]})
        return real_unchanged(*args)

    def keep_then_writes_land(self: FileSwap, *args: Any) -> Any:
        lost = real_keep(self, *args)
        writer.finish()
        return lost

    monkeypatch.setattr(commit_module.time, "sleep", sleep_lands_writes)
    monkeypatch.setattr(FileSwap, "_open_current", open_after_truncation)
    monkeypatch.setattr(FileSwap, "_unchanged", staticmethod(check_after_truncation))
    monkeypatch.setattr(FileSwap, "_keep_replaced", keep_then_writes_land)
    result = Engine(instance).run()
    assert result.outcome == "failed", result
    doc = json.loads(instance.store.paths(instance.id).document.read_text())
    assert (doc["title"], doc["status"], doc["phase"]) == ("edited", "failed", "failed")
    assert doc["failure_reason"] == "stopped by the dashboard"
    steps = [r for r in instance.journal.read().records if r.get("event") == "count"]
    assert doc["count"] == len(steps) >= 2
    check_replay(instance)
