"""The store conformance suite: every guarantee a store must give, written once.

A store proves itself by running these tests. Its test module subclasses :class:`StoreContract`
(the class name must start with ``Test`` for pytest to collect it) and gives the fixture
``storage``, the factory of its stores (:data:`fsm.store.protocol.StoreFactory`)::

    import pytest
    from fsm.testing.contract import StoreContract

    class TestPostgresStore(StoreContract):
        leases_expire = True

        @pytest.fixture
        def storage(self, tmp_path):
            return make_postgres_storage(fresh_database())

        def expire_lease(self, store, instance_id):
            force_lease_expiry(store, instance_id)

Two handles made by the factory on the same workspace must see the same instances, as two
processes would (the file store: two objects on the same folder; the memory store: one object).
The suite drives a small counter machine shipped with fsm (``contract_counter.yaml``) with the
real engine and transaction, and the store's primitives directly. What it checks: ids that
could escape are refused by every primitive; documents read back byte-exact; the compare-and-swap
refuses a stale version and builds again on the newer one; nothing is written when the build
fails; another writer's change and a control command made while a step runs are never lost; a
lock holder excludes others, a second lease is refused and, where leases expire, a run that lost
its lease can never write again; after a crash at each point of a run, the next run repairs,
completes, and the journal replays to the document; an unreadable document is quarantined and
restored, never deleted; listings, stamps and change notifications tell what was written.

Stores whose data outlives the process (``durable``: files, a database) are crashed by SIGKILL
in a forked child; others by an exception at the point.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fsm.base.clock import SimulatedClock
from fsm.base.errors import (
    InvalidIdError,
    LeaseLostError,
    LockHeldError,
    UnknownInstanceError,
)
from fsm.base.update import bytes_hash
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance, Workspace
from fsm.engine.rules import Loaded
from fsm.model.machine import Machine, load_machine
from fsm.model.rebuild import Rebuilder
from fsm.model.records import ControlRecord, TransitionRecord, record_changes
from fsm.store.heartbeat import STALE, Pulse, heartbeats_of
from fsm.store.protocol import Layout, Proposal, Snapshot, Store, StoreFactory
from fsm.view.inspect import check_replay

__all__ = ["CONTRACT_MACHINE", "StoreContract"]

CONTRACT_MACHINE = Path(__file__).with_name("contract_counter.yaml")
"""The machine the suite drives."""

HOSTILE_IDS = ["../x", "a/b", "..", ".hidden", "-flag", "", "a\x00b", "a b", "a" * 129, "x\n"]
"""Ids no store may use."""


class _Crash(BaseException):
    """A crash at a point, in stores whose data lives in the test's own process."""


class _Points:
    """Counts the primitive calls of a run and crashes at the ``at``-th (None: never)."""

    def __init__(self, at: int | None, durable: bool) -> None:
        self.at = at
        self.durable = durable
        self.seen: list[str] = []

    def hit(self, name: str) -> None:
        self.seen.append(name)
        if self.at is not None and len(self.seen) == self.at:
            if self.durable:
                os.kill(os.getpid(), signal.SIGKILL)
            raise _Crash(name)


class _Watched:
    """A store whose swaps and appends pass the points of :class:`_Points` (before, during the
    build, after)."""

    def __init__(self, store: Store, points: _Points) -> None:
        self._store = store
        self._points = points

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._store, name)
        if name not in {"swap", "append"}:
            return target
        points = self._points

        def call(instance_id: str, second: Any, **kwargs: Any) -> Any:
            if name == "swap":
                build = second

                def building(current: Snapshot | None) -> Proposal:
                    points.hit("swap:build")
                    return build(current)  # type: ignore[no-any-return]

                second = building
            points.hit(f"{name}:before")
            result = target(instance_id, second, **kwargs)
            points.hit(f"{name}:after")
            return result

        return call


def _fork(body: Callable[[], None]) -> None:
    """Run ``body`` in a forked child and wait for it (it may kill itself)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            body()
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.waitpid(pid, 0)


class StoreContract:
    """The conformance suite (see the module docstring). Subclasses give ``storage``."""

    durable: ClassVar[bool] = True
    """The store's data outlives the process (crashes are tested by SIGKILL)."""
    leases_expire: ClassVar[bool] = False
    """The store's leases expire (:meth:`expire_lease` makes one expire)."""

    @pytest.fixture
    def storage(self) -> StoreFactory:
        """The factory of the stores under test (each subclass gives its own)."""
        raise NotImplementedError("a StoreContract subclass gives the fixture 'storage'")

    def expire_lease(self, store: Store, instance_id: str) -> None:
        """Make the current lease of ``instance_id`` expire (stores whose leases expire)."""
        raise NotImplementedError

    # --- fixtures and helpers ----------------------------------------------------------------

    @pytest.fixture
    def machine(self) -> Machine:
        """The counter machine of the suite."""
        return load_machine(CONTRACT_MACHINE)

    @pytest.fixture
    def workspace(self, tmp_path: Path, storage: StoreFactory) -> Workspace:
        """A workspace whose instances the store under test keeps."""
        return self.handle(tmp_path / "workspace", storage)

    @staticmethod
    def handle(path: Path, storage: StoreFactory) -> Workspace:
        """A workspace handle on ``path`` (another one is what another process would see)."""
        return Workspace(path, clock=SimulatedClock(tick=0.001), storage=storage)

    @staticmethod
    def store(workspace: Workspace, machine: Machine) -> Store:
        """The store of ``machine``'s instances in ``workspace``."""
        return workspace.store_for(machine)

    @staticmethod
    def started(
        workspace: Workspace, machine: Machine, instance_id: str, **inputs: Any
    ) -> Instance:
        """A counter created and started."""
        instance = workspace.instance(machine, instance_id)
        instance.create({"limit": 3, **inputs})
        ControlPlane(instance).apply("start")
        return instance

    @staticmethod
    def _counted(instance: Instance, base: Loaded) -> Loaded:
        """Commit a count step from ``base``, as the engine's step would."""
        stepped = {**base.data, "count": base.data["count"] + 1, "phase": "counting"}
        record = TransitionRecord(
            event="count", transition=0, source=base.state, dest="counting", actor="test"
        )
        return instance.commit(stepped, record, base=base)

    # --- ids ---------------------------------------------------------------------------------

    @pytest.mark.parametrize("instance_id", HOSTILE_IDS)
    def test_hostile_ids_are_refused_by_every_primitive(
        self, workspace: Workspace, machine: Machine, instance_id: str
    ) -> None:
        """An id that could escape its place or read as an option is refused by every primitive
        before anything is read or written."""
        store = self.store(workspace, machine)
        calls: list[Callable[[], Any]] = [
            lambda: store.read(instance_id),
            lambda: store.read_bytes(instance_id),
            lambda: store.exists(instance_id),
            lambda: store.swap(instance_id, lambda _: Proposal(b"{}\n", [])),
            lambda: store.append(instance_id, []),
            lambda: store.lease(instance_id),
            lambda: store.park(instance_id, {}),
            lambda: store.quarantine(instance_id),
            lambda: store.listed(instance_id),
            lambda: store.folders(instance_id),
            lambda: store.journal(instance_id),
        ]
        for call in calls:
            with pytest.raises(InvalidIdError):
                call()
        with pytest.raises(InvalidIdError), store.lock(instance_id):
            pass
        assert store.list_ids() == []

    # --- documents ---------------------------------------------------------------------------

    def test_an_instance_without_a_document_is_unknown(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """Reading an instance that has no document says so; it is not listed."""
        store = self.store(workspace, machine)
        with pytest.raises(UnknownInstanceError):
            store.read("c1")
        assert (store.exists("c1"), store.read_bytes("c1"), store.list_ids()) == (False, None, [])

    def test_documents_read_back_byte_exact(self, workspace: Workspace, machine: Machine) -> None:
        """What a commit wrote reads back as the same bytes, through another handle too, with
        the journal record whose hash is theirs."""
        instance = self.started(workspace, machine, "c1")
        saved = instance.load()
        other = self.store(self.handle(workspace.path, workspace.store_factory()), machine)
        for store in (instance.store, other):
            assert store.read("c1").raw == saved.raw
            assert store.read_bytes("c1") == saved.raw
            assert store.is_current("c1", saved.raw)
            assert store.list_ids() == ["c1"]
            last = store.journal("c1").last()
            assert last is not None
            assert last.doc_hash == bytes_hash(saved.raw)

    def test_a_swap_writes_the_document_with_its_records(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A swap on no document creates it and appends its records, in order, all of them."""
        store = self.store(workspace, machine)
        seen: list[Snapshot | None] = []
        records = [
            _record("external"),
            TransitionRecord(event="count", transition=0, source="idle", dest="counting"),
        ]

        def build(current: Snapshot | None) -> Proposal:
            seen.append(current)
            return Proposal(b'{"phase": "idle"}\n', records)

        swapped = store.swap("c1", build)
        assert seen == [None]
        assert swapped.replaced is None
        assert store.read("c1").raw == b'{"phase": "idle"}\n'
        assert [r.kind for r in store.journal("c1").records()] == ["control", "transition"]

    def test_a_stale_version_is_refused_and_built_again(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """When another writer swaps a version while a build is made on the previous one, that
        build is not written: the swap builds again on the newer version, and only the records
        of what was written are journaled."""
        store = self.store(workspace, machine)
        other = self.store(self.handle(workspace.path, workspace.store_factory()), machine)
        store.swap("c1", lambda _: Proposal(b'{"v": 1}\n', [_record("one")]))
        built_on: list[bytes | None] = []

        def build(current: Snapshot | None) -> Proposal:
            built_on.append(None if current is None else current.raw)
            if len(built_on) == 1:  # another writer is quicker
                other.swap("c1", lambda _: Proposal(b'{"v": 2}\n', [_record("two")]))
            return Proposal(b'{"v": 3}\n', [_record(f"three-on-{len(built_on)}")])

        store.swap("c1", build, expected=b'{"v": 1}\n')
        assert built_on == [b'{"v": 1}\n', b'{"v": 2}\n']
        assert store.read("c1").raw == b'{"v": 3}\n'
        events = [r.event for r in store.journal("c1").records()]
        assert events == ["one", "two", "three-on-2"]

    def test_a_build_that_fails_writes_nothing(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A build that raises leaves the document and the journal as they were."""
        store = self.store(workspace, machine)
        store.swap("c1", lambda _: Proposal(b'{"v": 1}\n', [_record("one")]))

        def failing(current: Snapshot | None) -> Proposal:
            raise RuntimeError("the step failed")

        with pytest.raises(RuntimeError, match="the step failed"):
            store.swap("c1", failing)
        assert store.read("c1").raw == b'{"v": 1}\n'
        assert [r.event for r in store.journal("c1").records()] == ["one"]

    # --- no lost update ----------------------------------------------------------------------

    def test_no_update_of_another_writer_is_lost(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A field another writer changed while a step ran survives the step's commit, which
        keeps the step's own work and is journaled as merged; the journal replays."""
        instance = self.started(workspace, machine, "c1")
        base = instance.load()
        other = self.handle(workspace.path, workspace.store_factory()).instance(machine, "c1")
        edited = other.load()
        self._commit_title(other, edited, "renamed elsewhere")
        saved = self._counted(instance, base)
        assert (saved.data["count"], saved.data["title"]) == (1, "renamed elsewhere")
        assert instance.journal.records()[-1].merged
        check_replay(instance)

    @staticmethod
    def _commit_title(instance: Instance, base: Loaded, title: str) -> None:
        record = _record("edit", base.state, base.status)
        instance.commit({**base.data, "title": title}, record, base=base)

    def test_a_control_command_during_a_step_is_never_lost(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A pause another process applies while a step runs is kept by the step's commit, and
        the run then ends paused; the journal replays."""
        instance = self.started(workspace, machine, "c1")
        base = instance.load()
        other = self.handle(workspace.path, workspace.store_factory()).instance(machine, "c1")
        ControlPlane(other).apply("pause", actor="test")
        saved = self._counted(instance, base)
        assert (saved.status, saved.data["count"]) == ("paused", 1)
        assert Engine(instance).run().outcome == "paused"
        check_replay(instance)

    # --- what each step changed --------------------------------------------------------------

    def test_each_record_says_what_its_step_changed(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """Every record of a run, another writer's merged edit and a control command included,
        carries what its step changed (a JSON Patch written with it by the one transaction), and
        the patches rebuild every version to the bytes its record's hash names."""
        instance = self.started(workspace, machine, "c1")
        base = instance.load()
        other = self.handle(workspace.path, workspace.store_factory()).instance(machine, "c1")
        self._commit_title(other, other.load(), "renamed elsewhere")
        self._counted(instance, base)
        ControlPlane(instance).apply("pause")
        ControlPlane(instance).apply("resume")
        Engine(instance).run()
        assert instance.load().state == "done"
        records = instance.journal.records()
        assert all(record_changes(record) is not None for record in records), [
            (record.kind, record.event) for record in records if record_changes(record) is None
        ]
        count_paths = [
            [op["path"] for op in record_changes(record) or []]
            for record in records
            if record.kind == "transition" and record.event == "count"
        ]
        assert count_paths
        assert all("/count" in paths for paths in count_paths), count_paths
        rules = instance.rules
        rebuilder = Rebuilder(lambda data: rules.render(data, instance.id), rules.core_hash)
        verdicts = []
        for number, record in enumerate(records, 1):
            rebuilder.follow(number, record)
            verdicts.append(rebuilder.check(record).verdict)
        assert set(verdicts) <= {"exact", "unchecked"}, list(zip(verdicts, records, strict=True))
        assert rebuilder.document == instance.load().data
        check_replay(instance)

    # --- who drives ----------------------------------------------------------------------------

    def test_a_heartbeat_is_seen_by_another_handle_until_cleared(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """The heartbeat a run publishes for an instance is read, alive and with its action, by
        another handle (another process would see the same); the latest replaces the one
        before, a run that is not the publisher cannot clear it, and once cleared none is left."""
        self.started(workspace, machine, "c1")
        mine = heartbeats_of(self.store(workspace, machine))
        other = self.handle(workspace.path, workspace.store_factory())
        theirs = heartbeats_of(self.store(other, machine))
        assert theirs.read("c1") is None
        pulse = Pulse(mine, "c1", "worker", "idle")
        with pulse.running():
            seen = theirs.read("c1")
            assert seen is not None
            assert seen.alive()
            assert (seen.driver, seen.pid, seen.state, seen.action) == (
                "worker",
                os.getpid(),
                "idle",
                None,
            )
            pulse.doing("count", "counting")
            pulse._publish()
            seen = theirs.read("c1")
            assert seen is not None
            assert (seen.action, seen.state) == ("count", "counting")
            assert seen.action_started is not None
            assert abs(seen.action_started - time.time()) < STALE
            stranger = dataclasses.replace(seen, pid=seen.pid + 1)
            theirs.clear("c1", stranger)
            assert theirs.read("c1") is not None
        assert theirs.read("c1") is None
        assert mine.read("c1") is None

    # --- locks and leases ----------------------------------------------------------------------

    def test_a_lock_holder_excludes_others(self, workspace: Workspace, machine: Machine) -> None:
        """While one handle holds an instance's document lock, another's attempt times out;
        once it is released, the other takes it."""
        store = self.store(workspace, machine)
        other = self.store(self.handle(workspace.path, workspace.store_factory()), machine)
        outcome: list[str] = []
        with store.lock("c1"):
            thread = threading.Thread(target=_try_lock, args=(other, outcome))
            thread.start()
            thread.join()
        _try_lock(other, outcome)
        assert outcome == ["refused", "taken"]

    def test_a_second_lease_is_refused_until_released(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A run's lease refuses a second run (another handle's, or this one's) until it is
        released; a fenced write under a held lease goes through, and a later lease's fencing
        token is never smaller."""
        store = self.store(workspace, machine)
        other = self.store(self.handle(workspace.path, workspace.store_factory()), machine)
        first = store.lease("c1")
        assert first.held()
        for handle in (store, other):
            with pytest.raises(LockHeldError):
                handle.lease("c1")
        store.swap("c1", lambda _: Proposal(b'{"v": 1}\n', [_record("one")]), fence=first)
        first.release()
        second = other.lease("c1")
        assert second.held()
        assert second.token >= first.token
        second.release()

    def test_a_run_that_lost_its_lease_never_writes_again(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A lease that expired and was taken over fences its holder off: its swaps and appends
        are refused and change nothing; the new holder's token is larger."""
        if not self.leases_expire:
            pytest.skip(f"{type(self).__name__}: its leases never expire (nothing to take over)")
        store = self.store(workspace, machine)
        store.swap("c1", lambda _: Proposal(b'{"v": 1}\n', [_record("one")]))
        stale = store.lease("c1")
        self.expire_lease(store, "c1")
        other = self.store(self.handle(workspace.path, workspace.store_factory()), machine)
        taker = other.lease("c1")
        assert taker.token > stale.token
        assert not stale.held()
        with pytest.raises(LeaseLostError):
            store.swap("c1", lambda _: Proposal(b'{"v": 2}\n', [_record("two")]), fence=stale)
        with pytest.raises(LeaseLostError):
            store.append("c1", [_record("three")], fence=stale)
        assert store.read("c1").raw == b'{"v": 1}\n'
        assert [r.event for r in store.journal("c1").records()] == ["one"]
        taker.release()

    # --- crashes -----------------------------------------------------------------------------

    def test_journal_and_document_agree_after_a_crash_at_each_point(
        self, workspace: Workspace, machine: Machine, storage: StoreFactory
    ) -> None:
        """A run killed before, during or after any of its swaps and appends leaves an instance
        the next run repairs and completes: its journal replays to its document, which counted
        exactly as many steps as were journaled."""
        dry = _Points(None, durable=False)
        self._run_watched(workspace.path / "dry", machine, storage, dry)
        assert dry.seen, "the run made no swap"
        for at in range(1, len(dry.seen) + 1):
            folder = workspace.path / f"crash-{at}"
            points = _Points(at, durable=self.durable)
            if self.durable:
                _fork(functools.partial(self._run_watched, folder, machine, storage, points))
            else:
                with pytest.raises(_Crash):
                    self._run_watched(folder, machine, storage, points)
            instance = self.handle(folder, storage).instance(machine, "c1")
            if self.leases_expire and self.durable:
                # A killed run's lease lasts until it expires (a file lease ends with its
                # process): the suite does not wait for that.
                self.expire_lease(instance.store, "c1")
            result = Engine(instance).run()
            assert result.outcome == "completed", (dry.seen[at - 1], at, result)
            check_replay(instance)
            counted = [r for r in instance.journal.records() if isinstance(r, TransitionRecord)]
            assert instance.load().data["count"] == sum(r.event == "count" for r in counted)

    def _run_watched(
        self, folder: Path, machine: Machine, storage: StoreFactory, points: _Points
    ) -> None:
        """Create and start a counter, then run it with every swap and append watched."""
        self.started(self.handle(folder, storage), machine, "c1", limit=2)

        def watched(layout: Layout) -> Store:
            return _Watched(storage(layout), points)

        instance = self.handle(folder, watched).instance(machine, "c1")
        Engine(instance).run()

    # --- unreadable documents ------------------------------------------------------------------

    def test_an_unreadable_document_is_quarantined_never_deleted(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A document that is not JSON is moved aside by quarantine (the instance then has
        none) and put back by restore, byte-exact; a result parked is kept somewhere named."""
        store = self.store(workspace, machine)
        store.swap("c1", lambda _: Proposal(b"{not json\n", []))
        assert store.read_bytes("c1") == b"{not json\n"
        kept = store.quarantine("c1")
        assert kept
        assert not store.exists("c1")
        assert store.quarantine("c1") is None
        store.restore("c1", kept)
        assert store.read_bytes("c1") == b"{not json\n"
        assert store.park("c1", {"count": 1})

    # --- readers -----------------------------------------------------------------------------

    def test_a_listing_shows_what_was_written(self, workspace: Workspace, machine: Machine) -> None:
        """The listing of an instance gives its document's bytes and the machine that created
        it; its stamp changes (or is withheld) when a step is written."""
        instance = self.started(workspace, machine, "c1")
        store = instance.store
        listed = store.listed("c1")
        assert (listed.raw, listed.creator, listed.error) == (
            instance.load().raw,
            machine.name,
            None,
        )
        before = store.stamp("c1")
        Engine(instance).step()
        after = store.stamp("c1")
        assert after is None or after != before
        assert store.listed("missing").raw is None

    def test_changes_are_told_to_a_waiting_reader(
        self, workspace: Workspace, machine: Machine
    ) -> None:
        """A reader waiting for changes is told the id of an instance another handle wrote."""
        instance = self.started(workspace, machine, "c1")
        other = self.handle(workspace.path, workspace.store_factory()).instance(machine, "c1")

        async def wait_for_change() -> set[str]:
            stop = asyncio.Event()
            told: set[str] = set()

            async def listen() -> None:
                async for ids in instance.store.changes(stop):
                    told.update(ids or ())
                    if "c1" in told:
                        stop.set()

            listening = asyncio.create_task(listen())
            await asyncio.sleep(0.5)  # the reader is waiting
            await asyncio.to_thread(Engine(other).step)
            try:
                await asyncio.wait_for(listening, timeout=20)
            finally:
                stop.set()
            return told

        assert "c1" in asyncio.run(wait_for_change())


def _record(event: str, state: str = "idle", status: str | None = None) -> ControlRecord:
    """A record of ``event`` that changes neither state nor status."""
    return ControlRecord(
        event=event,
        source=state,
        dest=state,
        status_from=status,
        status_to=status,
        actor="test",
    )


def _try_lock(store: Store, outcome: list[str]) -> None:
    try:
        with store.lock("c1", timeout=0.2):
            outcome.append("taken")
    except LockHeldError:
        outcome.append("refused")
