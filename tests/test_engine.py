"""The engine: automatic steps, named events, transactions and runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from fsm.base.errors import (
    CorruptDocumentError,
    DocumentInputError,
    EventNotAllowedError,
    GuardRejectedError,
    InputError,
)
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine
from fsm.model.records import ControlRecord, TransitionRecord
from fsm.view.inspect import replay

COUNT_STEP = TransitionRecord(event="count", transition=0, source="idle", dest="counting")
"""A step record for commits made by hand."""

MakeCounter = Callable[..., Instance]


def doc_of(instance: Instance) -> dict[str, object]:
    """The persisted document."""
    return json.loads(instance.store.paths(instance.id).document.read_text())


def started(instance: Instance) -> Instance:
    """Start a created counter."""
    from fsm.engine.control import ControlPlane

    ControlPlane(instance).apply("start")
    return instance


def test_create_writes_initial_state_and_journal(make_counter: MakeCounter) -> None:
    """A new instance is in the initial state, with one `create` journal record."""
    instance = make_counter(limit=2)
    assert doc_of(instance)["phase"] == "idle"
    assert doc_of(instance)["status"] == "created"
    records = instance.journal.read().records
    assert [r["kind"] for r in records] == ["create"]
    assert records[0]["dest"] == "idle"


def test_create_refuses_an_existing_id(make_counter: MakeCounter) -> None:
    """Creating an instance whose id exists is refused and leaves the document alone."""
    instance = make_counter("same", limit=5)
    before = instance.store.paths(instance.id).document.read_bytes()
    with pytest.raises(InputError, match="already exists"):
        instance.workspace.instance(instance.machine, "same").create({"limit": 1})
    assert instance.store.paths(instance.id).document.read_bytes() == before


def test_create_rejects_inputs_the_model_refuses(workspace: Workspace, counter: Machine) -> None:
    """Inputs that do not validate are refused naming the field, and nothing is written."""
    instance = workspace.instance(counter, "bad")
    with pytest.raises(DocumentInputError, match="limit"):
        instance.create({"limit": -4})
    assert not instance.store.paths(instance.id).document.exists()


def test_run_reaches_success_final_state(make_counter: MakeCounter) -> None:
    """A run starts a created instance, counts to the limit and ends in `done` (exit 0)."""
    instance = make_counter(limit=3)
    result = Engine(instance).run()
    assert (result.outcome, result.state, result.exit_code) == ("completed", "done", 0)
    assert [s.event for s in result.steps] == ["count", "count", "count", "finish"]
    document = doc_of(instance)
    assert document["count"] == 3
    assert document["status"] == "done"


def test_step_takes_first_enabled_automatic_transition_in_order(make_counter: MakeCounter) -> None:
    """`abort` is declared before `count`, so it wins once its guard holds."""
    instance = started(make_counter(limit=5, errors=[{"a": 1}, {"a": 2}]))
    result = Engine(instance).step()
    assert (result.event, result.state) == ("abort", "failed")


def test_step_records_guards_actions_and_hash(make_counter: MakeCounter) -> None:
    """The journal record of a step lists every guard evaluated and the resulting document hash."""
    instance = started(make_counter(limit=1))
    Engine(instance).step()
    record = instance.journal.read().records[-1]
    assert record["kind"] == "transition"
    assert record["event"] == "count"
    assert (record["source"], record["dest"]) == ("idle", "counting")
    assert {"transition": 0, "guard": "too_many_errors", "result": False} in record["guards"]
    assert {"transition": 1, "guard": "below_limit", "result": True} in record["guards"]
    assert record["actions"] == ["increment"]
    assert record["doc_hash"].startswith("sha256:")


def test_fire_unknown_event_is_refused_and_changes_nothing(make_counter: MakeCounter) -> None:
    """An event with no transition from the current state is refused, naming the allowed events."""
    instance = started(make_counter(limit=2))
    before = instance.store.paths(instance.id).document.read_bytes()
    with pytest.raises(EventNotAllowedError, match=r"allowed: abort, count, finish"):
        Engine(instance).fire("spoil")
    assert instance.store.paths(instance.id).document.read_bytes() == before


def test_fire_refused_by_guards_changes_nothing(make_counter: MakeCounter) -> None:
    """An event whose guards all fail is refused with the guard results, and nothing changes."""
    instance = started(make_counter(limit=2))
    before = instance.store.paths(instance.id).document.read_bytes()
    records = len(instance.journal.read().records)
    with pytest.raises(GuardRejectedError, match="not below_limit=False"):
        Engine(instance).fire("finish")
    assert instance.store.paths(instance.id).document.read_bytes() == before
    assert len(instance.journal.read().records) == records


def test_raising_action_keeps_document_but_records_error(make_counter: MakeCounter) -> None:
    """An action that raises leaves state and count alone; only error bookkeeping is written."""
    instance = started(make_counter(limit=3, fail_at=0))
    result = Engine(instance).step()
    assert result.outcome == "failed"
    assert "cannot count past 0" in (result.error or "")
    document = doc_of(instance)
    assert (document["phase"], document["count"]) == ("idle", 0)
    assert document["errors"] == [{"action": "count", "message": "cannot count past 0"}]
    record = instance.journal.read().records[-1]
    assert record["kind"] == "error"
    assert "Traceback" in record["traceback"]
    log_lines = instance.store.paths(instance.id).log.read_text().splitlines()
    assert any('"traceback"' in line and "action_failed" in line for line in log_lines)


def test_invalid_update_is_a_failed_step(make_counter: MakeCounter) -> None:
    """An update the document model refuses is not persisted; the failure names the field."""
    instance = started(make_counter(limit=3))
    Engine(instance).step()
    result = Engine(instance).fire("spoil")
    assert result.outcome == "failed"
    assert "count" in (result.error or "")
    assert doc_of(instance)["count"] == 1


def test_run_ends_failed_after_repeated_errors(make_counter: MakeCounter) -> None:
    """Errors accumulate through the error hook until the budget guard aborts (exit 4)."""
    instance = make_counter(limit=3, fail_at=1, max_errors=2)
    result = Engine(instance).run()
    assert (result.outcome, result.state, result.exit_code) == ("failed", "failed", 4)
    assert [s.outcome for s in result.steps] == ["applied", "failed", "failed", "applied"]
    assert len(doc_of(instance)["errors"]) == 2  # type: ignore[arg-type]


def test_final_states_absorb(make_counter: MakeCounter) -> None:
    """In a final state a step does nothing and every event is refused."""
    instance = make_counter(limit=0)
    Engine(instance).run()
    before = instance.store.paths(instance.id).document.read_bytes()
    assert Engine(instance).step().outcome == "final"
    with pytest.raises(EventNotAllowedError, match="final state 'done'"):
        Engine(instance).fire("count")
    assert instance.store.paths(instance.id).document.read_bytes() == before


def test_run_stops_at_max_steps(make_counter: MakeCounter) -> None:
    """`max_steps` stops the run before a final state with the limit outcome (exit 5)."""
    instance = make_counter(limit=10)
    result = Engine(instance).run(max_steps=2)
    assert (result.outcome, result.exit_code, len(result.steps)) == ("limit", 5, 2)
    assert doc_of(instance)["count"] == 2


def test_run_waits_where_no_automatic_transition_is_enabled(
    workspace: Workspace, bare: Machine
) -> None:
    """A state left only by manual events ends the run waiting for input (exit 5)."""
    instance = workspace.instance(bare, "t1")
    instance.create({})
    result = Engine(instance).run()
    assert (result.outcome, result.state, result.exit_code) == ("waiting", "review", 5)


def test_interactive_chooser_fires_the_chosen_event(workspace: Workspace, bare: Machine) -> None:
    """With a chooser, a waiting run offers the enabled events and fires the one chosen."""
    instance = workspace.instance(bare, "t2")
    instance.create({})
    offered: list[list[str]] = []

    def choose(state: str, choices: object) -> str:
        offered.append([c.event for c in choices])  # type: ignore[attr-defined]
        return "reject"

    result = Engine(instance, interactive=True).run(chooser=choose)
    assert offered == [["approve", "reject"]]
    assert (result.outcome, result.state, result.exit_code) == ("failed", "rejected", 4)


def test_failure_without_error_hook_ends_the_run(workspace: Workspace, bare: Machine) -> None:
    """A machine without `on_error` stops the run at its first failed step (exit 1)."""
    instance = workspace.instance(bare, "t3")
    instance.create({"explode": True})
    before = instance.store.paths(instance.id).document.read_bytes()
    result = Engine(instance).run()
    assert (result.outcome, result.exit_code) == ("error", 1)
    assert "the work exploded" in result.message
    assert instance.store.paths(instance.id).document.read_bytes() == before
    assert instance.journal.read().records[-1]["kind"] == "error"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b'{"status": "running", "phase": "idle", "cou', id="truncated"),
        pytest.param(b"\x00\x01garbage", id="binary"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"status": "running", "phase": "idle", "count": -5}', id="invalid"),
        pytest.param(b'{"status": "running", "phase": "nowhere"}', id="unknown-state"),
    ],
)
def test_corrupt_document_is_reported_and_left_untouched(
    make_counter: MakeCounter, content: bytes
) -> None:
    """A corrupt or invalid document stops the step with a store error; the file is not modified."""
    instance = make_counter(limit=2)
    instance.store.read_retries = 0
    instance.store.paths(instance.id).document.write_bytes(content)
    with pytest.raises(
        CorruptDocumentError, match=str(instance.store.paths(instance.id).document.name)
    ):
        Engine(instance).step()
    assert instance.store.paths(instance.id).document.read_bytes() == content


def test_commit_keeps_external_fields_changed_during_a_step(make_counter: MakeCounter) -> None:
    """A title edited by another program while a step ran survives the step's write."""
    instance = started(make_counter(limit=3, title="old"))
    base = instance.load()
    edited = json.loads(base.raw)
    edited["title"] = "new title"
    edited["added_by_dashboard"] = {"x": 1}
    instance.store.paths(instance.id).document.write_text(json.dumps(edited, indent=2))
    saved = instance.commit({**base.data, "count": 1, "phase": "counting"}, COUNT_STEP, base=base)
    assert saved.data["title"] == "new title"
    assert saved.data["added_by_dashboard"] == {"x": 1}
    assert saved.data["count"] == 1


def test_commit_keeps_a_pause_pressed_during_a_step(make_counter: MakeCounter) -> None:
    """A status changed by the control plane during a step wins over the step's copy."""
    instance = started(make_counter(limit=3))
    base = instance.load()
    paused = json.loads(base.raw)
    paused["status"] = "paused"
    instance.store.paths(instance.id).document.write_text(json.dumps(paused))
    saved = instance.commit({**base.data, "count": 1}, COUNT_STEP, base=base)
    assert (saved.data["status"], saved.data["count"]) == ("paused", 1)


def test_touch_fields_are_set_on_every_save(make_counter: MakeCounter) -> None:
    """`storage.touch` fields get the clock's time on each write."""
    instance = make_counter(limit=1)
    first = doc_of(instance)["updated_at"]
    Engine(instance).run()
    assert doc_of(instance)["updated_at"] != first


def test_option_reaches_actions(tmp_path: Path, counter: Machine) -> None:
    """A machine option given to the workspace changes what actions do."""
    workspace = Workspace(tmp_path, options={"step_size": 5})
    instance = workspace.instance(counter, "opt")
    instance.create({"limit": 5})
    Engine(instance).run()
    assert doc_of(instance)["count"] == 5


def test_journal_replays_to_the_document(make_counter: MakeCounter) -> None:
    """After a run with failures, replay finds the journal consistent with the document."""
    instance = make_counter(limit=3, fail_at=2, max_errors=1)
    Engine(instance).run()
    report = replay(instance)
    assert report.problems == []
    assert report.state == "failed"


def test_replay_detects_a_document_moved_behind_the_journal(make_counter: MakeCounter) -> None:
    """A document whose state differs from the journal's last state is a replay problem."""
    instance = make_counter(limit=3)
    Engine(instance).run(max_steps=1)
    document = doc_of(instance)
    document["phase"] = "done"
    instance.store.paths(instance.id).document.write_text(json.dumps(document))
    assert any("ends in state 'counting'" in p for p in replay(instance).problems)


def test_status_changed_by_another_program_is_journaled(make_counter: MakeCounter) -> None:
    """A pause written straight into the file during a step gets its own `external` record."""
    instance = started(make_counter(limit=3))
    base = instance.load()
    paused = json.loads(base.raw)
    paused["status"] = "paused"
    instance.store.paths(instance.id).document.write_text(json.dumps(paused))
    instance.commit({**base.data, "count": 1}, COUNT_STEP, base=base)
    records = instance.journal.records()
    kinds = [(r.kind, r.event, r.actor) for r in records]
    assert kinds[-2:] == [("control", "external", "external"), ("transition", "count", None)]
    assert isinstance(records[-2], ControlRecord)
    assert records[-2].status_to == "paused"


def test_fsm_control_during_a_step_is_not_journaled_twice(make_counter: MakeCounter) -> None:
    """A pause given through the control plane during a step is journaled once, by it."""
    from fsm.engine.control import ControlPlane

    instance = started(make_counter(limit=3))
    base = instance.load()
    ControlPlane(instance).apply("pause")
    instance.commit({**base.data, "count": 1}, COUNT_STEP, base=base)
    events = [r.get("event") for r in instance.journal.read().records if r["kind"] == "control"]
    assert events == ["start", "pause"]


def test_document_broken_during_a_step_parks_the_result(make_counter: MakeCounter) -> None:
    """A document left corrupt by another program is not overwritten; the result is kept aside."""
    instance = started(make_counter(limit=3))
    instance.store.read_retries = 0
    base = instance.load()
    instance.store.paths(instance.id).document.write_bytes(b'{"status": "pau')
    with pytest.raises(CorruptDocumentError, match="result was kept in"):
        instance.commit({**base.data, "count": 1}, COUNT_STEP, base=base)
    assert instance.store.paths(instance.id).document.read_bytes() == b'{"status": "pau'
    parked = list(instance.store.paths(instance.id).meta.glob("unsaved-step-*.json"))
    assert len(parked) == 1
    assert json.loads(parked[0].read_text())["count"] == 1


@pytest.mark.parametrize("bad", [float("nan"), "\udcff"], ids=["nan", "lone-surrogate"])
def test_unwritable_update_is_a_failed_step(
    make_counter: MakeCounter, counter: Machine, bad: object
) -> None:
    """An update JSON cannot carry fails the step: only the error bookkeeping is written."""
    import dataclasses

    def unwritable(doc: object, ctx: object) -> dict[str, object]:
        return {"note": bad}

    count = next(t for t in counter.transitions if t.event == "count")
    counter.transitions[count.index] = dataclasses.replace(
        count, actions=(("unwritable", unwritable),)
    )
    counter.__post_init__()
    instance = started(make_counter(limit=3))
    result = Engine(instance).step()
    assert result.outcome == "failed"
    assert "cannot be written as JSON" in (result.error or "")
    document = doc_of(instance)
    assert "note" not in document
    assert (document["phase"], len(document["errors"])) == ("idle", 1)  # type: ignore[arg-type]


def test_paused_run_reports_the_last_error(make_counter: MakeCounter) -> None:
    """A run that finds the instance paused after a failure says what failed last."""
    from fsm.engine.control import ControlPlane

    instance = started(make_counter(limit=3, fail_at=0, max_errors=5))
    Engine(instance).step()
    ControlPlane(instance).apply("pause")
    result = Engine(instance).run()
    assert result.outcome == "paused"
    assert "last error: increment: RuntimeError: cannot count past 0" in result.message


def test_pause_during_the_final_step_does_not_leave_a_paused_ending(
    make_counter: MakeCounter,
) -> None:
    """A step that ends the instance wins over a pause pressed meanwhile: done stays done."""
    instance = started(make_counter(limit=0))
    base = instance.load()
    paused = json.loads(base.raw)
    paused["status"] = "paused"
    instance.store.paths(instance.id).document.write_text(json.dumps(paused))
    ours = {**base.data, "phase": "done", "status": "done"}
    saved = instance.commit(ours, COUNT_STEP, base=base)
    assert (saved.state, saved.status) == ("done", "done")


def test_replay_flags_changes_beyond_the_external_fields(make_counter: MakeCounter) -> None:
    """Another program editing the title is a note; editing the count is a replay problem."""
    instance = make_counter(limit=3)
    Engine(instance).run(max_steps=1)
    document = doc_of(instance)
    document["title"] = "edited by the dashboard"
    instance.store.paths(instance.id).document.write_text(json.dumps(document))
    report = replay(instance)
    assert report.problems == []
    assert any("changed after the last journal record" in n for n in report.notes)
    document["count"] = 99
    instance.store.paths(instance.id).document.write_text(json.dumps(document))
    assert any("beyond the fields other programs own" in p for p in replay(instance).problems)


def test_replay_skips_a_torn_last_journal_line(make_counter: MakeCounter) -> None:
    """A journal whose last line was cut by a crash still replays, with a note."""
    instance = make_counter(limit=1)
    Engine(instance).run()
    with instance.store.paths(instance.id).journal.open("a") as handle:
        handle.write('{"kind": "transi')
    report = replay(instance)
    assert report.problems == []
    assert any("torn" in n for n in report.notes)


def test_commit_that_cannot_take_the_lock_parks_the_result(
    make_counter: MakeCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step whose commit fails on the store keeps its result in the meta folder."""
    from fsm.base.errors import LockHeldError, StoreError

    instance = started(make_counter(limit=3))
    base = instance.load()

    def held(*args: object, **kwargs: object) -> object:
        raise LockHeldError("document lock not released within 10s")

    monkeypatch.setattr(instance.store, "lock", held)
    with pytest.raises(StoreError, match="result was kept in"):
        instance.commit({**base.data, "count": 1}, COUNT_STEP, base=base)
    parked = list(instance.store.paths(instance.id).meta.glob("unsaved-step-*.json"))
    assert [json.loads(p.read_text())["count"] for p in parked] == [1]


def test_a_status_the_model_defaults_is_written_at_creation(tmp_path: Path) -> None:
    """A create hook that leaves the control status to the model's default still gives an
    instance that can be started: the default is written into the file."""
    from fsm.engine.control import ControlPlane
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine
    from tests.conftest import ENGINE_MACHINES

    machine = load_machine(ENGINE_MACHINES / "judged" / "machine.yaml")
    instance = Workspace(tmp_path).instance(machine, "b1")
    hooks = machine.hooks
    machine.hooks = replace(hooks, create=lambda inputs, ctx: {"parts": []})
    try:
        instance.create({})
    finally:
        machine.hooks = hooks
    assert json.loads(instance.store.paths(instance.id).document.read_text())["status"] == "created"
    assert ControlPlane(instance).apply("start").status == "running"
