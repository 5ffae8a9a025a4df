"""What a worker's per-step path keeps while it saves round trips and flushes: the claim reads
the document byte-exact, every write of a run still notifies the listeners (``fsm serve``), after
the write is visible, and an expired claim is taken over by the next claim."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from fsm.engine.engine import Engine
from fsm.postgres.database import CHANGES, WORK
from fsm.postgres.store import PostgresStore
from fsm.store import selection as stores
from tests.postgres.fleet import Fleet


@pytest.fixture(autouse=True)
def _no_store_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stores.ENVIRONMENT, raising=False)


def _store(fleet: Fleet, instance_id: str) -> PostgresStore:
    store = fleet.instance(instance_id).store
    assert isinstance(store, PostgresStore)
    return store


def test_a_claim_reads_the_document_byte_exact(tmp_path: Path, postgres_store_url: str) -> None:
    """The document a worker's claim reads in its own statement, which its run takes as its first
    read, is the row's bytes exactly."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    (instance_id,) = fleet.create(1, limit=2)
    store = _store(fleet, instance_id)
    claim = store.claim(None)
    assert claim is not None and claim.instance_id == instance_id
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        row = conn.execute("SELECT raw FROM fsm_instances WHERE id = %s", (instance_id,)).fetchone()
    assert row is not None
    assert claim.raw == bytes(row[0]) == store.read_bytes(instance_id)
    claim.release()


@pytest.mark.parametrize(
    ("steps", "channel"),
    [
        pytest.param(1, CHANGES, id="a-step-under-the-lease"),
        pytest.param(0, CHANGES, id="the-start-under-the-lease"),
    ],
)
def test_a_runs_writes_notify_after_they_are_visible(
    tmp_path: Path, postgres_store_url: str, steps: int, channel: str
) -> None:
    """A run's writes under its lease notify ``fsm_changes`` with the instance's key, and a
    listener that reads the row when told sees the write already."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    (instance_id,) = fleet.create(1, limit=3)
    store = _store(fleet, instance_id)
    key = store.key(instance_id)
    with psycopg.connect(postgres_store_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {channel}")
        with psycopg.connect(postgres_store_url, autocommit=True) as reader:

            def version() -> int:
                sql = "SELECT version FROM fsm_instances WHERE id = %s"
                row = reader.execute(sql, (instance_id,)).fetchone()
                assert row is not None
                return int(row[0])

            before = version()
            claim = store.claim(None)
            assert claim is not None
            Engine(fleet.instance(instance_id), lease=claim).run(max_steps=steps)
            seen = [
                (note.payload, version())
                for note in listener.notifies(timeout=10, stop_after=steps + 1)
            ]
            final = version()
    assert final == before + steps + 1  # the start and the steps, each a write
    assert [payload for payload, _ in seen] == [key] * (steps + 1)
    assert seen[-1][1] == final


def test_a_release_of_a_runnable_instance_tells_idle_workers(
    tmp_path: Path, postgres_store_url: str
) -> None:
    """A run that ends with its instance still runnable notifies ``fsm_work`` once, when it lets
    the instance go (an idle worker claims it at once); its steps under the lease do not
    (nobody may claim it meanwhile)."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    (instance_id,) = fleet.create(1, limit=5)
    store = _store(fleet, instance_id)
    with psycopg.connect(postgres_store_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {WORK}")
        claim = store.claim(None)
        assert claim is not None
        Engine(fleet.instance(instance_id), lease=claim).run(max_steps=2)  # releases it
        told = [note.payload for note in listener.notifies(timeout=1, stop_after=4)]
    assert told == [store.key(instance_id)]
    assert fleet.rows()[instance_id]["holder"] is None


def test_a_claim_takes_over_an_expired_claim(tmp_path: Path, postgres_store_url: str) -> None:
    """An instance whose holder's lease expired is claimed by the next claim, with a higher
    fencing token; the old claim's writes are refused from then on."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    (instance_id,) = fleet.create(1, limit=2)
    store = _store(fleet, instance_id)
    first = store.claim(None)
    assert first is not None
    assert store.claim(None) is None  # held, by a live holder
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("UPDATE fsm_holders SET expires = statement_timestamp() - interval '1s'")
    second = store.claim(None)
    assert second is not None and second.instance_id == instance_id
    assert second.token > first.token
    assert not first.held()
    assert second.held()
    second.release()


def test_a_claim_takes_over_an_abandoned_instance_before_unstarted_ones(
    tmp_path: Path, postgres_store_url: str
) -> None:
    """An instance whose worker was killed mid-run (its holder's lease expired) is the next
    claim's, ahead of any number of instances nobody started, however long ago they were
    written: its run was under way (a killed worker's instance waited 26 s behind 150 unstarted
    ones with a 3 s lease when the oldest write came first)."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    unstarted = fleet.create(150, limit=2, prefix="u")
    (abandoned,) = fleet.create(1, limit=2, prefix="k")
    store = _store(fleet, abandoned)
    first = store.lease(abandoned)
    Engine(fleet.instance(abandoned), lease=first).run(max_steps=1)  # under way: written last
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        # The holder of a worker killed a second ago, its lease run out (not this process's).
        conn.execute(
            "WITH killed AS (INSERT INTO fsm_holders (name, expires) VALUES "
            "('worker pid 1 on elsewhere', statement_timestamp() - interval '1s') RETURNING id) "
            "UPDATE fsm_instances SET holder = (SELECT id FROM killed) WHERE id = %s",
            (abandoned,),
        )
    second = store.claim(None)
    assert second is not None and second.instance_id == abandoned
    assert second.token > first.token
    third = store.claim(None)  # then the unstarted ones, the one written longest ago first
    assert third is not None and third.instance_id == unstarted[0]
    second.release()
    third.release()
