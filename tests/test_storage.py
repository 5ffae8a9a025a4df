"""A second store, in memory (primitives only: the transaction is fsm's), runs a real machine
from creation to completion with a journal that replay reads, and journals what the file store
journals (the seam's import rules: test_architecture; every store's guarantees:
test_store_contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fsm.base.clock import SimulatedClock
from fsm.base.errors import LockHeldError
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine
from fsm.model.records import TransitionRecord
from fsm.testing import MemoryStorage, MemoryStore
from fsm.view.inspect import replay, status


def _memory_workspace(folder: Path, storage: MemoryStorage) -> Workspace:
    return Workspace(folder, clock=SimulatedClock(tick=0.001), storage=storage)


def _records(instance: Instance) -> list[dict[str, Any]]:
    """The journal without what differs between two runs (times, durations, and the chain's
    links, which hash whole lines, times included)."""
    return [
        {k: v for k, v in record.items() if k not in {"time", "duration_ms", "chain"}}
        for record in instance.journal.read().records
    ]


def test_a_memory_store_runs_a_machine_from_creation_to_completion(
    tmp_path: Path, counter: Machine
) -> None:
    """Create, start and run a counter whose document and journal live in memory: the run
    completes, nothing is written where a file store keeps documents, and replay and status
    read the journal the run left."""
    storage = MemoryStorage()
    instance = _memory_workspace(tmp_path, storage).instance(counter, "c1")
    instance.create({"limit": 3})
    result = Engine(instance).run()
    assert (result.outcome, result.state) == ("completed", "done")
    store = storage.store_of(counter)
    assert store.list_ids() == ["c1"]
    assert store.read("c1").data["count"] == 3
    assert not (tmp_path / ".counters").exists()
    kinds = [r["kind"] for r in store.journal("c1").read().records]
    assert kinds == ["create", "control", "transition", "transition", "transition", "transition"]
    report = replay(instance)
    assert (report.problems, report.state, report.records) == ([], "done", 6)
    assert status(instance).state == "done"


def test_both_stores_journal_the_same_run(tmp_path: Path, counter: Machine) -> None:
    """The same run journals the same records (hashes included) in files and in memory."""
    journals = []
    for folder, storage in ((tmp_path / "files", None), (tmp_path / "memory", MemoryStorage())):
        workspace = Workspace(folder, clock=SimulatedClock(tick=0.001), storage=storage)
        instance = workspace.instance(counter, "c1")
        instance.create({"limit": 2, "fail_at": 1})
        Engine(instance).run()
        journals.append(_records(instance))
    on_files, in_memory = journals
    assert "error" in [r["kind"] for r in on_files]
    assert in_memory == on_files


def test_a_memory_commit_keeps_another_writer_s_change(tmp_path: Path, counter: Machine) -> None:
    """A title another program wrote while a step ran survives the step's commit, which is
    journaled as merged."""
    storage = MemoryStorage()
    instance = _memory_workspace(tmp_path, storage).instance(counter, "c1")
    instance.create({"limit": 3})
    ControlPlane(instance).apply("start")
    base = instance.load()
    edited = {**base.data, "title": "renamed by a dashboard"}
    storage.store_of(counter).write("c1", edited)
    stepped = {**base.data, "count": 1}
    step = TransitionRecord(event="count", transition=0, source="idle", dest="counting")
    saved = instance.commit(stepped, step, base=base)
    assert (saved.data["count"], saved.data["title"]) == (1, "renamed by a dashboard")
    assert instance.journal.read().records[-1]["merged"] is True


def test_a_memory_store_refuses_a_second_run(tmp_path: Path, counter: Machine) -> None:
    """While a run holds an instance of a memory store, another run is refused."""
    storage = MemoryStorage()
    instance = _memory_workspace(tmp_path, storage).instance(counter, "c1")
    instance.create({"limit": 3})
    held = instance.store.lease("c1")
    with pytest.raises(LockHeldError, match="already being run"):
        Engine(instance).run()
    held.release()
    assert Engine(instance).run().outcome == "completed"


def test_a_failed_step_is_journaled_in_memory(tmp_path: Path, counter: Machine) -> None:
    """An action that raises is journaled as an error where the instance is, and is the last
    error a paused run reports."""
    storage = MemoryStorage()
    instance = _memory_workspace(tmp_path, storage).instance(counter, "c1")
    instance.create({"limit": 3, "fail_at": 0})
    ControlPlane(instance).apply("start")
    result = Engine(instance).step()
    assert result.outcome == "failed"
    error = instance.journal.last_error()
    assert error is not None
    assert (error.action, error.state) == ("increment", "idle")
    assert isinstance(instance.store, MemoryStore)


@pytest.mark.parametrize("kept", ["files", "memory"])
def test_a_machine_reads_its_stored_document_through_its_context(
    tmp_path: Path, counter: Machine, kept: str
) -> None:
    """A machine gets the document as its store holds it from its context, whatever the store,
    and is given no path to it: its side files go in ``instance_dir``."""
    storage = MemoryStorage() if kept == "memory" else None
    workspace = Workspace(tmp_path, clock=SimulatedClock(tick=0.001), storage=storage)
    instance = workspace.instance(counter, "c1")
    ctx = instance.context()
    assert ctx.stored_document() is None
    instance.create({"limit": 3, "title": "kept"})
    assert ctx.stored_document() == instance.load().data
    assert not hasattr(ctx, "document_path")
    assert ctx.instance_dir == instance.folders.files
