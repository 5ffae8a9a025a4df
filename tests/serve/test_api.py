"""The JSON API: the command line's answers over HTTP, its exit codes kept as HTTP statuses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.model.records import ControlRecord
from fsm.serve import views
from fsm.view.inspect import list_instances, status
from tests.serve.conftest import AGENT_RUN, Api, with_agent_run


def test_listing_is_fsm_ls_with_progress(api: Api) -> None:
    """The rows are ``fsm ls --json``'s, newest first, each with its progress lines."""
    api.counter("old", limit=5)
    os.utime(api.workspace.path / ".counters" / "old.json", (1, 1))
    api.counter("new", limit=7)
    body = api.client.get("/api/instances").json()
    expected = [
        row.to_json() for row in list_instances(api.workspace, [api.served.machines["counter"]])
    ]
    assert [row["id"] for row in body["rows"]] == ["new", "old"]
    assert [
        {k: v for k, v in row.items() if k not in {"progress", "title", "private"}}
        for row in body["rows"]
    ] == expected
    assert [row["private"] for row in body["rows"]] == [False, False]
    assert body["rows"][0]["progress"] == {"progress": "0/7"}
    assert body["total"] == 2


def test_listing_filters_and_pages(api: Api) -> None:
    """machine, status, limit and offset narrow the rows; total counts every match."""
    for number in range(5):
        api.counter(f"c{number}")
    ControlPlane(api.instance("c2")).apply("start")
    running = api.client.get("/api/instances", params={"status": "running"}).json()
    assert [row["id"] for row in running["rows"]] == ["c2"]
    page = api.client.get("/api/instances", params={"machine": "counter", "limit": 2, "offset": 1})
    assert page.json()["total"] == 5
    assert len(page.json()["rows"]) == 2
    assert api.client.get("/api/instances", params={"machine": "ccw-loop"}).json()["rows"] == []


def test_listing_shows_the_failure_reason(api: Api) -> None:
    """An instance that ended failed carries its outcome and the reason in its row."""
    instance = api.counter("broken", limit=5, fail_at=1, max_errors=1)
    Engine(instance).run()
    (row,) = api.client.get("/api/instances").json()["rows"]
    assert row["outcome"] == "failure"
    assert row["reason"] == status(instance).reason


def test_status_is_fsm_status_json(api: Api) -> None:
    """``GET /api/instances/M/ID`` answers what ``fsm status --json`` prints."""
    instance = api.counter("c1", limit=3)
    answer = api.client.get("/api/instances/counter/c1")
    assert answer.status_code == 200
    assert answer.json() == {
        **status(instance).to_json(),
        "driver": None,
        "run_command": f"fsm -C {api.workspace.path} run counter c1",
        "retry": False,
        "commands": [],
    }
    assert answer.json()["control"] == ["start", "stop"]


def test_document_is_the_file_as_it_is(api: Api) -> None:
    """The document endpoint returns the JSON on disk."""
    instance = api.counter("c1", limit=3, title="hello")
    on_disk = json.loads(instance.store.paths(instance.id).document.read_text())
    assert api.client.get("/api/instances/counter/c1/document").json() == on_disk


def test_history_gives_the_latest_records(api: Api) -> None:
    """``limit`` keeps the latest records, oldest first, and says more exist."""
    instance = api.counter("c1", limit=4)
    Engine(instance).run()
    everything = instance.journal.read().records
    latest = api.client.get("/api/instances/counter/c1/history", params={"limit": 2}).json()
    count = len(everything)
    assert latest == {"records": everything[-2:], "lines": [count - 1, count], "more": True}
    whole = api.client.get("/api/instances/counter/c1/history").json()
    assert whole == {"records": everything, "lines": list(range(1, count + 1)), "more": False}


def test_instance_diagram_is_the_run_overlay(api: Api) -> None:
    """The instance's SVG highlights its current state and shows visit counts."""
    instance = api.counter("c1", limit=2)
    Engine(instance).run()
    answer = api.client.get("/api/instances/counter/c1/diagram.svg")
    assert answer.headers["content-type"] == "image/svg+xml"
    svg = answer.text
    assert "instance in state done" in svg
    assert 'fill="#ffd54f"' in svg
    assert "count ×2" in svg


def test_machine_view_and_schema(api: Api) -> None:
    """The machine endpoint lists states, transitions with guards, options with defaults and
    the document's JSON Schema; its diagram is the machine's SVG."""
    view = api.client.get("/api/machines/counter").json()
    machine = api.served.machines["counter"]
    assert [s["name"] for s in view["states"]] == list(machine.states)
    finish = next(t for t in view["transitions"] if t["event"] == "finish")
    assert finish["guards"] == [
        {"label": "not below_limit", "doc": "True while the count is under the limit."}
    ]
    assert {"name": "delay", "type": "number", "default": "0.0", "required": False, "help": ""} in [
        {k: o[k] for k in ("name", "type", "default", "required", "help")} for o in view["options"]
    ]
    assert view["schema"] == machine.document_model.model_json_schema(by_alias=True)
    assert api.client.get("/api/machines/counter/schema").json() == view["schema"]
    assert "<svg" in api.client.get("/api/machines/counter/diagram.svg").text
    names = [m["name"] for m in api.client.get("/api/machines").json()]
    assert names == ["ccw-loop", "counter"]


def test_create_makes_an_instance(api: Api) -> None:
    """``POST /api/instances/M`` is ``fsm new``: 201, the document exists, journaled with the
    server as its actor."""
    answer = api.post("/api/instances/counter", {"id": "fresh", "inputs": {"limit": 9}})
    assert answer.status_code == 201
    assert answer.json()["id"] == "fresh"
    instance = api.instance("fresh")
    assert instance.load().doc.limit == 9  # type: ignore[attr-defined]
    assert instance.journal.read().records[0]["actor"] == "serve"
    generated = api.post("/api/instances/ccw-loop", {"inputs": {"title": "t", "description": "d"}})
    assert generated.status_code == 201
    assert generated.json()["id"].startswith("loop-v2-")


def test_control_applies_and_journals(api: Api) -> None:
    """A legal command is applied, journaled with the server as actor and the client's reason,
    and the new status answered."""
    api.counter("c1", limit=3)
    answer = api.post("/api/instances/counter/c1/start", {"reason": "ann: go"})
    assert answer.status_code == 200
    assert answer.json()["status"] == "running"
    assert answer.json()["control"] == ["pause", "stop"]
    last = api.instance("c1").journal.last()
    assert isinstance(last, ControlRecord)
    assert (last.event, last.actor, last.reason) == ("start", "serve", "ann: go")


def test_a_client_cannot_choose_the_actor(api: Api) -> None:
    """A control command naming its own actor is refused (400) and nothing is journaled: the
    journal's actor of a change made here is always the server."""
    instance = api.counter("c1", limit=3)
    before = instance.journal.read().records
    answer = api.post("/api/instances/counter/c1/start", {"reason": "go", "actor": "root"})
    assert answer.status_code == 400
    assert "the actor of a change made here is the server ('serve')" in answer.json()["error"]
    assert instance.journal.read().records == before


# --- errors: the exit codes' meanings as HTTP statuses -------------------------------------


def corrupt(api: Api) -> None:
    api.counter("bad")
    (api.workspace.path / ".counters" / "bad.json").write_text("{not json")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "exit_code", "says"),
    [
        pytest.param(
            "get",
            "/api/instances/nope/c1",
            None,
            404,
            2,
            "unknown machine 'nope'",
            id="unknown-machine",
        ),
        pytest.param(
            "get",
            "/api/instances/counter/missing",
            None,
            404,
            2,
            "no counter instance 'missing'",
            id="unknown-instance",
        ),
        pytest.param(
            "get",
            "/api/machines/countr",
            None,
            404,
            2,
            "did you mean 'counter'",
            id="machine-did-you-mean",
        ),
        pytest.param(
            "get",
            "/api/instances/counter/-rf",
            None,
            400,
            2,
            "starts with '-'",
            id="id-option-like",
        ),
        pytest.param(
            "get",
            "/api/instances/counter/.hidden",
            None,
            400,
            2,
            "invalid instance id",
            id="id-hidden",
        ),
        pytest.param(
            "get", "/api/instances/counter/a..b", None, 400, 2, "without '..'", id="id-dots"
        ),
        pytest.param(
            "get",
            "/api/instances/counter/%2E%2E",
            None,
            400,
            2,
            "invalid instance id",
            id="id-parent",
        ),
        pytest.param("get", "/api/instances?limit=0", None, 400, 2, "limit", id="bad-query"),
        pytest.param(
            "post",
            "/api/instances/counter",
            {"id": "../x"},
            400,
            2,
            "invalid instance id",
            id="create-unsafe-id",
        ),
        pytest.param(
            "post",
            "/api/instances/counter",
            {"inputs": {"limit": -1}},
            400,
            2,
            "limit",
            id="create-invalid",
        ),
        pytest.param(
            "post",
            "/api/instances/counter",
            {"id": "c1"},
            400,
            2,
            "already exists",
            id="create-existing",
        ),
        pytest.param(
            "post",
            "/api/instances/counter",
            {"surprise": 1},
            400,
            2,
            "surprise",
            id="create-unknown-key",
        ),
        pytest.param(
            "post",
            "/api/instances/counter/c1/pause",
            {},
            409,
            3,
            "cannot pause",
            id="control-not-now",
        ),
        pytest.param(
            "post", "/api/instances/counter/c1/explode", {}, 400, 2, "command", id="control-unknown"
        ),
        pytest.param(
            "get",
            "/api/instances/counter/bad",
            None,
            503,
            6,
            "corrupt document",
            id="corrupt-status",
        ),
        pytest.param(
            "get",
            "/api/instances/counter/bad/document",
            None,
            503,
            6,
            "corrupt document",
            id="corrupt-document",
        ),
        pytest.param(
            "get",
            "/api/instances/counter/bad/diagram.svg",
            None,
            503,
            6,
            "corrupt document",
            id="corrupt-diagram",
        ),
        pytest.param(
            "post",
            "/api/instances/counter/bad/stop",
            {},
            503,
            6,
            "corrupt document",
            id="corrupt-control",
        ),
        pytest.param("get", "/api/nothing-here", None, 404, 2, "Not Found", id="unknown-route"),
    ],
)
def test_errors_map_to_http_statuses(
    api: Api, method: str, path: str, body: object, status: int, exit_code: int, says: str
) -> None:
    """Unknown 404, bad input 400, not allowed now 409, store error 503; one line with the
    exit code the command line would give."""
    api.counter("c1")
    corrupt(api)
    answer = api.post(path, body) if method == "post" else api.client.get(path)
    assert answer.status_code == status, answer.text
    assert answer.json()["exit_code"] == exit_code
    assert says in answer.json()["error"]
    assert "\n" not in answer.json()["error"]


def test_a_refused_command_changes_nothing(api: Api) -> None:
    """409 leaves the document and the journal as they were."""
    instance = api.counter("c1")
    before = (
        instance.store.paths(instance.id).document.read_bytes(),
        instance.store.paths(instance.id).journal.read_bytes(),
    )
    assert api.post("/api/instances/counter/c1/resume").status_code == 409
    assert (
        instance.store.paths(instance.id).document.read_bytes(),
        instance.store.paths(instance.id).journal.read_bytes(),
    ) == before


def test_internal_errors_are_one_line_without_traceback(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug answers 500 with one line naming it, never a traceback."""

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("fsm.serve.api.instance_rows", broken)
    answer = api.client.get("/api/instances")
    assert answer.status_code == 500
    assert answer.json()["error"] == "internal error: RuntimeError: boom\\nsecond line"
    assert "Traceback" not in answer.text


def test_openapi_describes_the_api_and_no_page_loads_from_elsewhere(api: Api) -> None:
    """The OpenAPI document lists every route; no docs page pulls scripts from a CDN, and the
    pages' files name no other server."""
    spec = api.client.get("/api/openapi.json").json()
    assert {
        "/api/instances",
        "/api/instances/{machine}",
        "/api/instances/{machine}/{instance_id}",
        "/api/instances/{machine}/{instance_id}/history",
        "/api/instances/{machine}/{instance_id}/diagram.svg",
        "/api/instances/{machine}/{instance_id}/{command}",
        "/api/machines/{machine}",
        "/api/events",
    } <= set(spec["paths"])
    responses = spec["paths"]["/api/instances/{machine}/{instance_id}/{command}"]["post"][
        "responses"
    ]
    assert {"200", "400", "401", "403", "404", "409", "503"} <= set(responses)
    assert api.client.get("/docs").status_code == 404
    static = Path(views.__file__).parent / "static"
    for path in static.iterdir():
        assert "http://" not in path.read_text() and "https://" not in path.read_text(), path
    page = api.client.get("/")
    assert page.status_code == 200
    assert '<script type="module" src="/static/instances.js">' in page.text


def test_a_listing_row_has_the_fields_of_fsm_ls_json_and_progress(api: Api) -> None:
    """The API's listing rows, as its OpenAPI document describes them and as it answers them,
    have exactly the fields of `fsm ls --json` (declared once, in the listing) plus the
    machine's progress lines and whether the row is shown without its details."""
    import dataclasses

    from fsm.view.listing import ListedInstance

    fields = [f.name for f in dataclasses.fields(ListedInstance)]
    spec = api.client.get("/api/openapi.json").json()
    assert list(spec["components"]["schemas"]["Row"]["properties"]) == [
        *fields,
        "progress",
        "title",
        "private",
    ]
    api.counter("c1")
    rows = api.client.get("/api/instances").json()["rows"]
    assert [list(row) for row in rows] == [[*fields, "progress", "title", "private"]]
    assert rows[0]["private"] is False


def test_pages_refuse_unknown_machines_and_unsafe_ids(api: Api) -> None:
    """An instance or machine page for something that does not exist says so with 404/400."""
    api.counter("c1")
    assert api.client.get("/instances/counter/c1").status_code == 200
    assert api.client.get("/machines/counter").status_code == 200
    assert api.client.get("/instances/counter/nope").status_code == 404
    assert api.client.get("/machines/nope").status_code == 404
    unsafe = api.client.get("/instances/counter/..hidden")
    assert unsafe.status_code == 400
    assert "invalid instance id" in unsafe.text
    assert api.client.get("/static/../../conftest.py").status_code == 404


def test_status_and_history_carry_the_agent_runs(api: Api) -> None:
    """The instance's status names its latest agent run, and the history gives each step's
    agent runs as the journal holds them (the web view shows both)."""
    instance = api.counter("c1", limit=1)
    Engine(instance).run()
    record = with_agent_run(instance)
    info = api.client.get("/api/instances/counter/c1").json()
    assert info["last_agent"] == {**AGENT_RUN, "time": record["time"], "event": record["event"]}
    history = api.client.get("/api/instances/counter/c1/history").json()
    assert history["records"][-1]["agents"] == [AGENT_RUN]


def test_listing_titles_sorting_and_counts_per_status(api: Api) -> None:
    """Rows carry their title; ``sort`` orders by any column (``-``: descending, rows without
    a value last); ``counts`` holds each status's number, the status filter aside."""
    api.counter("c1", title="Zebra")
    api.counter("c2", title="apple")
    api.counter("c3")
    api.post("/api/instances/counter/c3/start")
    by_title = api.client.get("/api/instances?sort=title").json()
    assert [row["id"] for row in by_title["rows"]] == ["c2", "c1", "c3"]
    assert [row["title"] for row in by_title["rows"]] == ["apple", "Zebra", None]
    backwards = api.client.get("/api/instances?sort=-title").json()
    assert [row["id"] for row in backwards["rows"]] == ["c1", "c2", "c3"]
    by_id = api.client.get("/api/instances?sort=-id").json()
    assert [row["id"] for row in by_id["rows"]] == ["c3", "c2", "c1"]
    running = api.client.get("/api/instances?status=running").json()
    assert [row["id"] for row in running["rows"]] == ["c3"]
    assert running["counts"] == {"created": 2, "running": 1}
    refused = api.client.get("/api/instances?sort=titel")
    assert refused.status_code == 400
    assert "did you mean 'title'" in refused.json()["error"]
