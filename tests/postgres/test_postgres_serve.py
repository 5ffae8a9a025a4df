"""``fsm serve``'s control room over the PostgreSQL store, on a real server: the listing, each
record's changes, time travel and the driver line read through the store, as they do from
files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from fsm.postgres.store import PostgresStore
from fsm.serve import Access, Served, create_app
from fsm.store.heartbeat import Pulse, heartbeats_of
from tests.conftest import COUNTER
from tests.serve.conftest import BASE, PORT, TOKEN


@pytest.fixture
def served(tmp_path: Path, postgres_store_url: str) -> Iterator[tuple[TestClient, Workspace]]:
    """The counter served over a workspace whose store is the database."""
    (tmp_path / "fsm.toml").write_text(f'[store]\nurl = "{postgres_store_url}"\nspace = "s"\n')
    workspace = Workspace(tmp_path)
    app = create_app(
        Served(workspace, {"counter": load_machine(COUNTER)}), Access(TOKEN, "127.0.0.1", PORT)
    )
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        yield client, workspace


def test_the_control_room_reads_through_the_database(
    served: tuple[TestClient, Workspace],
) -> None:
    """An instance created through the API lives in the database; after a run, its journal
    lines say what each step changed, every version rebuilds exactly, the changes between two
    are given, and a run's heartbeat is the driver until it ends."""
    client, workspace = served
    created = client.post(
        "/api/instances/counter",
        json={"id": "c1", "inputs": {"limit": 3}},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert created.status_code == 201, created.text
    instance = workspace.instance(load_machine(COUNTER), "c1")
    assert isinstance(instance.store, PostgresStore)
    ControlPlane(instance).apply("start")
    Engine(instance).run()
    # --reads private (the default): a document in the database is private, as a file
    # others may not read is: without the token, no document, history or version is served
    for path in ("", "/document", "/history", "/versions/1", "/diagram.svg"):
        refused = client.get(f"/api/instances/counter/c1{path}")
        assert refused.status_code == 401, (path, refused.text)
    hidden = client.get("/api/instances").json()["rows"]
    assert [(row["id"], row["private"], row["state"]) for row in hidden] == [("c1", True, None)]
    client.headers["Authorization"] = f"Bearer {TOKEN}"
    listing = client.get("/api/instances").json()
    assert [(row["id"], row["state"]) for row in listing["rows"]] == [("c1", "done")]
    history = client.get("/api/instances/counter/c1/history").json()
    counted = [
        (line, record)
        for line, record in zip(history["lines"], history["records"], strict=True)
        if record.get("event") == "count"
    ]
    for n, (_, record) in enumerate(counted, 1):
        assert {"op": "replace", "path": "/count", "value": n} in record["changes"]
    assert len(counted) == 3
    for line in history["lines"]:
        version = client.get(f"/api/instances/counter/c1/versions/{line}").json()
        assert version["check"]["verdict"] == "exact", (line, version["check"])
    first, last = counted[0][0], counted[-1][0]
    assert (
        client.get(f"/api/instances/counter/c1/versions/{first}").json()["document"]["count"] == 1
    )
    changes = client.get(
        "/api/instances/counter/c1/changes", params={"from": first, "to": last}
    ).json()
    assert {"op": "replace", "path": "/count", "value": 3} in changes["changes"]
    assert client.get("/api/instances/counter/c1").json()["driver"] is None
    with Pulse(heartbeats_of(instance.store), "c1", "worker", "counting").running():
        driver = client.get("/api/instances/counter/c1").json()["driver"]
        assert (driver["driver"], driver["state"]) == ("worker", "counting")
    assert client.get("/api/instances/counter/c1").json()["driver"] is None
