"""The listing's rows in memory for large workspaces: read once, then only the instances the
change feed names; small workspaces are read on each request."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fsm.engine.control import ControlPlane
from fsm.serve import Access, create_app, row_index
from tests.serve.conftest import BASE, PORT, TOKEN, Api, make_served


@pytest.fixture
def indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Api, list[int]]]:
    """The application, indexing from 3 rows, and a count of the full listings it made."""
    monkeypatch.setattr(row_index, "INDEX_FROM", 3)
    full: list[int] = []
    real = row_index.list_instances

    def counted(*args: Any, **kwargs: Any) -> Any:
        full.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(row_index, "list_instances", counted)
    served = make_served(tmp_path)
    app = create_app(served, Access(TOKEN, "127.0.0.1", PORT))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        yield Api(client, served.workspace, served), full


def _ids(api: Api, query: str = "") -> list[str]:
    answer = api.client.get(f"/api/instances?limit=500{query}")
    assert answer.status_code == 200, answer.text
    return [row["id"] for row in answer.json()["rows"]]


def _eventually(check: Any) -> None:
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, "the change feed never told the index"
        time.sleep(0.05)


def test_a_large_listing_is_read_once_then_kept_current_by_the_feed(
    indexed: tuple[Api, list[int]],
) -> None:
    api, full = indexed
    for name in ("c1", "c2", "c3", "c4"):
        api.counter(name)
    assert sorted(_ids(api)) == ["c1", "c2", "c3", "c4"]  # large: the next one builds the index
    assert sorted(_ids(api)) == ["c1", "c2", "c3", "c4"]
    built = len(full)
    assert sorted(_ids(api, "&status=created")) == ["c1", "c2", "c3", "c4"]
    assert len(full) == built  # no document read again: nothing changed
    api.counter("c5")
    _eventually(lambda: "c5" in _ids(api))
    ControlPlane(api.instance("c2")).apply("start")
    _eventually(lambda: _ids(api, "&status=running") == ["c2"])
    (api.workspace.path / ".counters" / "c3.json").unlink()
    _eventually(lambda: "c3" not in _ids(api))
    assert len(full) == built  # each change read only its instance


def test_a_small_listing_is_read_on_each_request(api: Api) -> None:
    api.counter("c1")
    assert [row["id"] for row in api.client.get("/api/instances").json()["rows"]] == ["c1"]
    api.counter("c2")  # listed at once, whatever the watcher has seen
    assert len(api.client.get("/api/instances").json()["rows"]) == 2
