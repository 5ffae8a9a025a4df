"""The commit path: another writer's change is never lost, whenever it lands, and a crash at any
point leaves journal and document in agreement."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance
from fsm.store import file_swap as commit_module
from fsm.store.file_swap import FileSwap
from fsm.view.inspect import check_replay

Make = Callable[..., Instance]


def _dashboard_write(instance: Instance, **changes: Any) -> None:
    """Rewrite the document in place, without a lock, as the CCW dashboard does."""
    path = instance.store.paths(instance.id).document
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2))


def _started(make_counter: Make, **values: Any) -> Instance:
    instance = make_counter(**values)
    ControlPlane(instance).apply("start")
    return instance


def _doc(instance: Instance) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(instance.store.paths(instance.id).document.read_text())
    return data


def test_a_write_between_the_merge_and_the_replace_is_merged(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pause written after the commit read the file but before it replaced it is kept: the
    commit notices the file changed, takes its journal record back and merges again."""
    instance = _started(make_counter, limit=5)
    real = commit_module.write_temporary_open
    calls = 0

    def racing_write(path: Path, data: bytes, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            _dashboard_write(instance, status="paused", title="renamed")
        return real(path, data, **kwargs)

    monkeypatch.setattr(commit_module, "write_temporary_open", racing_write)
    result = Engine(instance).step()
    assert result.outcome == "applied"
    doc = _doc(instance)
    assert (doc["status"], doc["title"], doc["count"]) == ("paused", "renamed", 1)
    records = instance.journal.read().records
    assert [r["kind"] for r in records] == ["create", "control", "control", "transition"]
    assert records[2]["actor"] == "external" and records[3]["merged"] is True
    check_replay(instance)


def test_a_write_into_the_replaced_file_is_reapplied(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that opened the document before fsm replaced it and wrote into it afterwards
    wrote into a file no one will read again: the commit sees it and re-applies the change."""
    instance = _started(make_counter, limit=5)
    real = FileSwap._install

    def replace_while_dashboard_writes(
        self: FileSwap, tmp: Path, path: Path, ident: tuple[int, int] | None
    ) -> bytes | None:
        monkeypatch.setattr(FileSwap, "_install", real)  # only the step's own replace
        stale = json.loads(path.read_text())
        with path.open("r+") as handle:  # opened before the replace
            foreign = real(self, tmp, path, ident)
            stale.update(status="paused", title="late")
            handle.truncate(0)
            handle.write(json.dumps(stale))
        return foreign

    monkeypatch.setattr(FileSwap, "_install", replace_while_dashboard_writes)
    Engine(instance).step()
    doc = _doc(instance)
    assert (doc["status"], doc["title"], doc["count"]) == ("paused", "late", 1)
    kinds = [r["kind"] for r in instance.journal.read().records]
    assert kinds[-3:] == ["transition", "control", "merge"]
    check_replay(instance)


def test_a_late_write_into_the_replaced_file_is_caught_when_the_run_ends(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that opened the old file before the replace but wrote only after the commit
    had looked at it is caught by the next look: the end of the step."""
    instance = _started(make_counter, limit=5)
    real = FileSwap._install
    handles = []

    def replace_and_keep_a_stale_handle(
        self: FileSwap, tmp: Path, path: Path, fd: int | None
    ) -> bytes | None:
        handles.append((path.open("r+"), json.loads(path.read_text())))
        return real(self, tmp, path, fd)

    monkeypatch.setattr(FileSwap, "_install", replace_and_keep_a_stale_handle)
    engine = Engine(instance)
    with engine._run_lock():  # the step's own look at the replaced file happens at its end
        engine._step(None, "test")
        handle, stale = handles[-1]
        stale.update(title="very late")
        handle.truncate(0)
        handle.write(json.dumps(stale))
        handle.close()
    for opened, _ in handles:
        opened.close()
    assert len(handles) == 2  # the step's replace, then the one re-applying the late write
    assert (_doc(instance)["title"], _doc(instance)["count"]) == ("very late", 1)
    check_replay(instance)


def test_an_older_version_written_back_keeps_both_changes(make_counter: Make) -> None:
    """A writer that read version N, and wrote it back with its change after fsm wrote N+1,
    would undo fsm's step: the next load keeps fsm's work and their change."""
    instance = _started(make_counter, limit=5)
    engine = Engine(instance)
    engine.step()
    stale = _doc(instance)
    engine.step()
    assert _doc(instance)["count"] == 2
    stale.update(status="paused", title="from an old read")
    instance.store.paths(instance.id).document.write_text(json.dumps(stale, indent=2))
    loaded = instance.load()
    assert (loaded.data["count"], loaded.status, loaded.data["title"]) == (
        2,
        "paused",
        "from an old read",
    )
    assert _doc(instance) == loaded.data
    assert instance.journal.read().records[-1]["kind"] == "merge"
    check_replay(instance)


def test_keys_another_program_added_stay_theirs(make_counter: Make) -> None:
    """A key the model does not define, added by another program and later changed by it while
    steps run, keeps its latest value."""
    instance = _started(make_counter, limit=5)
    engine = Engine(instance)
    _dashboard_write(instance, dashboard_note="v1")
    engine.step()
    _dashboard_write(instance, dashboard_note="v2")
    engine.step()
    assert _doc(instance)["dashboard_note"] == "v2"


def _killed_at(instance: Instance, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Step ``instance`` in a forked child that SIGKILLs itself when ``target`` is called."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child dies

        def die(*args: Any, **kwargs: Any) -> Any:
            os.kill(os.getpid(), signal.SIGKILL)

        if target == "journal":
            real_append = instance.journal.write_all  # type: ignore[attr-defined]

            def append_then_die(records: Any) -> int:
                size = real_append(records)
                if any(record.kind == "transition" for record in records):
                    die()
                return size

            monkeypatch.setattr(instance.journal, "write_all", append_then_die)
        else:
            monkeypatch.setattr(commit_module, target, die)
        Engine(instance).step()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_killed_before_the_replace_completes_the_write_next_time(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the journal record and the temporary file, before the replace: the next
    run completes the write (nothing changed meanwhile), says so, and leaves no temporary file."""
    instance = _started(make_counter, limit=2)
    _killed_at(instance, "exchange", monkeypatch)
    assert _doc(instance)["count"] == 0
    result = Engine(instance).run()
    assert result.outcome == "completed"
    records = instance.journal.read().records
    repair = next(r for r in records if r["kind"] == "repair")
    assert "completed the write" in repair["reason"]
    assert [r.get("count") for r in records] and _doc(instance)["count"] == 2
    assert not list(instance.store.paths(instance.id).document.parent.glob(".*.tmp"))
    check_replay(instance)


def test_killed_after_the_journal_append_rolls_back_without_the_temporary(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed right after the journal record while its temporary file is gone: the next run
    journals that the write never happened and goes on from where the document is."""
    instance = _started(make_counter, limit=2)
    _killed_at(instance, "journal", monkeypatch)
    for tmp in instance.store.paths(instance.id).document.parent.glob(".*.tmp"):
        tmp.unlink()
    result = Engine(instance).run()
    assert result.outcome == "completed"
    reasons = [r["reason"] for r in instance.journal.read().records if r["kind"] == "repair"]
    assert len(reasons) == 1 and "was never written" in reasons[0]
    check_replay(instance)


def test_killed_before_the_journal_record_leaves_only_a_temporary_to_remove(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between the temporary file and the record: nothing was journaled, the temporary
    file is removed by the next run, which says so."""
    instance = _started(make_counter, limit=2)
    real = commit_module.write_temporary_open

    def write_then_die(path: Path, data: bytes, **kwargs: Any) -> Any:
        written = real(path, data, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return written

    monkeypatch.setattr(commit_module, "write_temporary_open", write_then_die)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child dies
        Engine(instance).step()
        os._exit(0)
    os.waitpid(pid, 0)
    monkeypatch.setattr(commit_module, "write_temporary_open", real)
    assert len(list(instance.store.paths(instance.id).document.parent.glob(".*.tmp"))) == 1
    assert Engine(instance).run().outcome == "completed"
    assert not list(instance.store.paths(instance.id).document.parent.glob(".*.tmp"))
    check_replay(instance)


def test_a_torn_journal_line_is_removed_before_the_next_record(make_counter: Make) -> None:
    """A journal line cut short by a crash is removed (and journaled) before anything else is
    appended, so no record is ever glued to it."""
    instance = _started(make_counter, limit=1)
    with instance.store.paths(instance.id).journal.open("a") as handle:
        handle.write('{"kind": "transition", "ev')
    assert Engine(instance).run().outcome == "completed"
    read = instance.journal.read()
    assert read.bad_lines == []
    assert "torn last journal line" in next(
        r["reason"] for r in read.records if r["kind"] == "repair"
    )
    check_replay(instance)


def test_run_and_start_racing_leave_the_instance_driven(make_counter: Make) -> None:
    """A run that finds the instance started by someone else between its read and its own
    start goes on driving it instead of failing with 'it is running'."""
    instance = make_counter(limit=2)
    engine = Engine(instance)
    created = instance.load()
    ControlPlane(instance).apply("start", actor="other")
    current = engine.control.start_if_needed(created, actor="run")
    assert current.status == "running"
    assert engine.run().outcome == "completed"


def test_a_private_document_stays_private(make_counter: Make) -> None:
    """A document the user made readable only by themselves keeps its mode after steps."""
    instance = _started(make_counter, limit=2)
    instance.store.paths(instance.id).document.chmod(0o600)
    Engine(instance).run()
    assert instance.store.paths(instance.id).document.stat().st_mode & 0o777 == 0o600


def test_new_files_honour_the_umask(make_counter: Make) -> None:
    """Documents, journals and logs are created with the user's umask."""
    old = os.umask(0o077)
    try:
        instance = _started(make_counter, limit=1)
        Engine(instance).run()
    finally:
        os.umask(old)
    for path in (
        instance.store.paths(instance.id).document,
        instance.store.paths(instance.id).journal,
        instance.store.paths(instance.id).log,
    ):
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_the_instance_log_rotates(make_counter: Make) -> None:
    """The instance log is renamed to log.ndjson.1 past its size limit, so it stays bounded."""
    instance = make_counter(limit=1)
    instance.log.file.max_bytes = 300  # type: ignore[union-attr]
    for number in range(20):
        instance.log.info("filler", number=number)
    sizes = [p.stat().st_size for p in instance.store.paths(instance.id).meta.glob("log.ndjson*")]
    assert len(sizes) == 2 and max(sizes) < 600
