"""``fsm serve`` as a control room: limits before work, filters, private reads, one row per
instance, time travel, who is driving, and an OpenAPI document the live answers fit."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.serve import Access, create_app
from fsm.serve.server import served_machines
from fsm.serve.views import instance_rows
from fsm.store.heartbeat import FileHeartbeats, Heartbeat
from tests.serve.conftest import PORT, TOKEN, Api

# --- limits before work: nothing of a refused body is read ---------------------------------


async def _call(app: Any, headers: dict[str, str], chunks: list[bytes]) -> tuple[int, int]:
    """POST to ``app`` at the ASGI level; return the status and how many body chunks the
    server asked for."""
    asked = 0
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        if asked <= len(chunks):
            return {
                "type": "http.request",
                "body": chunks[asked - 1],
                "more_body": asked < len(chunks),
            }
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/instances/counter",
        "raw_path": b"/api/instances/counter",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "scheme": "http",
        "server": ("127.0.0.1", PORT),
        "client": ("127.0.0.1", 5000),
        "http_version": "1.1",
        "root_path": "",
    }
    await app(scope, receive, send)
    return status, asked


HOST = {"Host": f"127.0.0.1:{PORT}", "Content-Type": "application/json"}
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    ("headers", "chunks", "status", "most_read"),
    [
        pytest.param(
            {**HOST, "Content-Length": str(300 * 1024 * 1024)},
            [b"x" * 65536] * 4,
            401,
            0,
            id="unauthenticated-300MB",
        ),
        pytest.param(
            {**HOST, **BEARER, "Origin": "http://evil.example", "Content-Length": "300000000"},
            [b"x" * 65536] * 4,
            403,
            0,
            id="other-origin",
        ),
        pytest.param(
            {**HOST, **BEARER, "Content-Length": str(300 * 1024 * 1024)},
            [b"x" * 65536] * 4,
            413,
            0,
            id="authenticated-over-the-limit",
        ),
        pytest.param(
            {**HOST, **BEARER},
            [b"x" * 65536] * 40,
            413,
            17,
            id="chunked-over-the-limit",
        ),
    ],
)
def test_refused_bodies_are_not_read(
    api: Api, headers: dict[str, str], chunks: list[bytes], status: int, most_read: int
) -> None:
    """Token, origin and size are checked before the body is read: a refused request's body is
    never asked for, or no further than the limit when it says no length."""
    app = create_app(api.served, Access(TOKEN, "127.0.0.1", PORT))
    answered, asked = asyncio.run(_call(app, headers, chunks))
    assert answered == status
    assert asked <= most_read
    assert not (api.workspace.path / ".counters").exists()


# --- filters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "says"),
    [
        pytest.param(
            {"status": "faild"},
            "unknown status 'faild' for status (did you mean 'failed'?)",
            id="status",
        ),
        pytest.param(
            {"machine": "countr"},
            "unknown machine 'countr' for machine (did you mean 'counter'?)",
            id="machine",
        ),
        pytest.param(
            {"outcome": "sucess"},
            "unknown outcome 'sucess' for outcome (did you mean 'success'?)",
            id="outcome",
        ),
        pytest.param({"since": "yesterday"}, "since='yesterday' is not a date or time", id="since"),
    ],
)
def test_unknown_filter_values_are_a_400_with_a_suggestion(
    api: Api, query: dict[str, str], says: str
) -> None:
    """A filter value nothing could match is refused, naming the closest value."""
    api.counter("c1")
    answer = api.client.get("/api/instances", params=query)
    assert answer.status_code == 400
    assert says in answer.json()["error"]
    assert answer.json()["exit_code"] == 2


def test_filters_by_text_outcome_and_time(api: Api) -> None:
    """Text matches the id, the title and the reason; outcome and updated-since narrow too."""
    api.counter("alpha", limit=1, title="Nightly import")
    done = api.counter("beta", limit=1)
    Engine(done).run()
    old = api.counter("gamma", limit=1)
    os.utime(Path(old.store.describe(old.id)), (86400, 86400))

    def ids(**query: str) -> list[str]:
        answer = api.client.get("/api/instances", params=query)
        assert answer.status_code == 200, answer.text
        return sorted(row["id"] for row in answer.json()["rows"])

    assert ids(q="nightly") == ["alpha"]
    assert ids(q="BETA") == ["beta"]
    assert ids(q="success state") == ["beta"]  # its reason
    assert ids(outcome="success") == ["beta"]
    assert ids(outcome="none") == ["alpha", "gamma"]
    assert ids(since="1971-01-01") == ["alpha", "beta"]
    assert ids(since="1970-01-01T00:00:00Z") == ["alpha", "beta", "gamma"]


# --- private documents --------------------------------------------------------------------


def test_a_private_document_needs_the_token_to_be_read(api: Api) -> None:
    """An instance whose document others may not read (mode 600) is not served without the
    token: its reads are 401 and its row has no details; with the token all is served."""
    instance = api.counter("secret", limit=2, title="payroll")
    api.counter("open", limit=2)
    os.chmod(instance.store.describe(instance.id), 0o600)
    for path in ("", "/document", "/history", "/diagram.svg", "/versions/1"):
        refused = api.client.get(f"/api/instances/counter/secret{path}")
        assert refused.status_code == 401, path
        assert "private" in refused.json()["error"]
        allowed = api.client.get(f"/api/instances/counter/secret{path}", headers=BEARER)
        assert allowed.status_code == 200, path
    rows = {row["id"]: row for row in api.client.get("/api/instances").json()["rows"]}
    assert rows["secret"]["private"] is True
    assert rows["secret"]["state"] is None and rows["secret"]["progress"] == {}
    assert rows["open"]["private"] is False and rows["open"]["state"] == "idle"
    assert api.client.get("/api/instances", params={"q": "payroll"}).json()["total"] == 1


# --- one row per instance when machines share a layout ------------------------------------


def test_machines_sharing_a_layout_list_each_instance_once(tmp_path: Path) -> None:
    """skill-tuning and issue-manager keep their documents in the same place: each instance is
    listed once, under its machine, also when its journal does not name the machine (an old
    journal) or it has no journal (another program wrote it)."""
    skills = tmp_path / "skills" / "s1"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: s1\ndescription: x\n---\n# S1\n")
    workspace = Workspace(tmp_path)
    served = served_machines(workspace, ["skill-tuning", "issue-manager"])
    tuning = workspace.instance(served.machines["skill-tuning"], "tune-1")
    tuning.create({"target_skill": {"path": "skills/s1"}})
    old = workspace.instance(served.machines["skill-tuning"], "tune-old")
    old.create({"target_skill": {"path": "skills/s1"}})
    journal = Path(old.store.folders(old.id).meta) / "journal.ndjson"
    first, *rest = journal.read_text().splitlines(keepends=True)
    record = json.loads(first)
    del record["machine"]  # as create records were written before they named the machine
    journal.write_text(json.dumps(record) + "\n" + "".join(rest))
    workspace.instance(served.machines["issue-manager"], "issues-1").create({})
    rows = instance_rows(served)["rows"]
    assert sorted((row["machine"], row["id"]) for row in rows) == [
        ("issue-manager", "issues-1"),
        ("skill-tuning", "tune-1"),
        ("skill-tuning", "tune-old"),
    ]
    assert all(row["error"] is None for row in rows)


# --- time travel -----------------------------------------------------------------------------


def test_the_document_as_of_any_record(api: Api) -> None:
    """Each journal line gives the document as that record left it, rebuilt from the changes
    and checked against its hash, with the diagram as of then and the changes between two."""
    instance = api.counter("c1", limit=3)
    ControlPlane(instance).apply("start")
    engine = Engine(instance)
    kept = [instance.store.read("c1").data]
    for _ in range(4):
        engine.step()
        kept.append(instance.store.read("c1").data)
    history = api.client.get("/api/instances/counter/c1/history").json()
    lines = history["lines"]
    assert lines == [1, 2, 3, 4, 5, 6]
    for line, expected in zip(lines[1:], kept, strict=True):
        version = api.client.get(f"/api/instances/counter/c1/versions/{line}").json()
        assert version["document"] == expected
        assert version["check"]["verdict"] == "exact"
    svg = api.client.get("/api/instances/counter/c1/versions/3/diagram.svg").text
    assert "<svg" in svg
    changes = api.client.get(
        "/api/instances/counter/c1/changes", params={"from": 3, "to": 5}
    ).json()
    assert changes["known"] is True
    assert {"op": "replace", "path": "/count", "value": 3} in changes["changes"]
    assert "/count" in changes["paths"]
    missing = api.client.get("/api/instances/counter/c1/versions/99")
    assert missing.status_code == 400
    assert "no journal record of 'c1' on line 99" in missing.json()["error"]


# --- who is driving -------------------------------------------------------------------------


def test_the_status_says_who_drives_and_when_nobody_does(api: Api) -> None:
    """A live heartbeat is the driver (host, pid, the action and its start); one of a process
    that is gone, or too old, is nobody; the command that would drive is always given."""
    instance = api.counter("c1", limit=3)
    beats = FileHeartbeats(instance.store)
    now = time.time()
    beat = Heartbeat(
        socket.gethostname(), os.getpid(), "run", "t", now, "counting", "increment", now - 12
    )
    beats.publish("c1", beat)
    info = api.client.get("/api/instances/counter/c1").json()
    assert info["driver"]["action"] == "increment"
    assert info["driver"]["pid"] == os.getpid()
    assert info["run_command"].endswith("run counter c1")
    beats.publish("c1", Heartbeat(socket.gethostname(), 2**22 + 7, "run", "t", now, None))
    assert api.client.get("/api/instances/counter/c1").json()["driver"] is None
    beats.publish("c1", Heartbeat("elsewhere", 1, "worker", "t", now - 3600, None))
    assert api.client.get("/api/instances/counter/c1").json()["driver"] is None


def test_a_run_publishes_its_heartbeat_and_removes_it(api: Api) -> None:
    """While ``fsm run`` drives an instance its heartbeat names it; when it ends it is gone."""
    instance = api.counter("c1", limit=2)
    seen: list[Any] = []

    def look(_: Any) -> None:
        seen.append(FileHeartbeats(instance.store).read("c1"))

    Engine(instance).run(on_step=look, actor="run")
    assert seen and all(beat is not None and beat.pid == os.getpid() for beat in seen)
    assert seen[0].driver == "run"
    assert FileHeartbeats(instance.store).read("c1") is None


# --- the OpenAPI document fits the live answers ----------------------------------------------


def test_live_answers_fit_the_openapi_document(api: Api) -> None:
    """Every GET route's live answer validates against the response schema the OpenAPI document
    gives for its status; it declares no 422, and a security scheme for the token."""
    instance = api.counter("c1", limit=2)
    Engine(instance).run()
    spec = api.client.get("/api/openapi.json").json()
    assert set(spec["components"]["securitySchemes"]) == {"bearer", "cookie"}
    registry = Registry().with_resource("urn:spec", DRAFT202012.create_resource(spec))
    base = "/api/instances/counter/c1"
    calls = {
        "/api/session": "/api/session",
        "/api/machines": "/api/machines",
        "/api/machines/{machine}": "/api/machines/counter",
        "/api/instances": "/api/instances?status=faild",
        "/api/instances/{machine}/{instance_id}": "/api/instances/counter/c1",
        "/api/instances/{machine}/{instance_id}/document": "/api/instances/counter/c1/document",
        "/api/instances/{machine}/{instance_id}/history": "/api/instances/counter/c1/history",
        "/api/instances/{machine}/{instance_id}/versions/{line}": f"{base}/versions/3",
        "/api/instances/{machine}/{instance_id}/changes": f"{base}/changes?from=1&to=4",
    }
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            assert "422" not in operation["responses"], path
    for template, url in calls.items():
        answer = api.client.get(url)
        responses = spec["paths"][template]["get"]["responses"]
        assert str(answer.status_code) in responses, (url, answer.status_code)
        schema = responses[str(answer.status_code)]["content"]["application/json"]["schema"]
        resolver_schema = json.loads(
            json.dumps(schema).replace('"#/components/', '"urn:spec#/components/')
        )
        jsonschema.Draft202012Validator(resolver_schema, registry=registry).validate(answer.json())
    assert api.client.get("/api/instances?status=faild").status_code == 400


def _fits(spec: dict[str, Any], template: str, method: str, answer: Any) -> None:
    """``answer``'s status is one the document lists for the route, and its body validates
    against that status's schema."""
    registry = Registry().with_resource("urn:spec", DRAFT202012.create_resource(spec))
    responses = spec["paths"][template][method]["responses"]
    assert str(answer.status_code) in responses, (template, answer.status_code, answer.text)
    schema = responses[str(answer.status_code)]["content"]["application/json"]["schema"]
    linked = json.loads(json.dumps(schema).replace('"#/components/', '"urn:spec#/components/'))
    jsonschema.Draft202012Validator(linked, registry=registry).validate(answer.json())


def test_live_changes_and_refusals_fit_the_openapi_document(api: Api) -> None:
    """The answers of creates and control commands, accepted and refused (an id taken, a wrong
    token, an actor named, a command not legal now, an unknown machine, a body over the limit,
    another origin), have
    statuses the OpenAPI document lists and bodies its schemas accept."""
    spec = api.client.get("/api/openapi.json").json()
    create = "/api/instances/{machine}"
    command = "/api/instances/{machine}/{instance_id}/{command}"
    answers = [
        (create, api.post("/api/instances/counter", {"id": "c1", "inputs": {"limit": 2}}), 201),
        (create, api.post("/api/instances/counter", {"id": "c1", "inputs": {"limit": 2}}), 400),
        (create, api.post("/api/instances/nope", {"inputs": {}}), 404),
        (create, api.post("/api/instances/counter", {"inputs": {"limit": "x"}}), 400),
        (
            create,
            api.post("/api/instances/counter", {"inputs": {"title": "x" * (2 << 20)}}),
            413,
        ),
        (command, api.post("/api/instances/counter/c1/start", {"reason": "go"}), 200),
        (command, api.post("/api/instances/counter/c1/resume"), 409),
        (command, api.post("/api/instances/counter/c1/pause", {"actor": "mallory"}), 400),
        (
            command,
            api.post("/api/instances/counter/c1/pause", Authorization="Bearer wrong"),
            401,
        ),
        (
            command,
            api.post("/api/instances/counter/c1/pause", Origin="http://evil.example"),
            403,
        ),
    ]
    for template, answer, status in answers:
        assert answer.status_code == status, (template, answer.text)
        _fits(spec, template, "post", answer)
    assert api.instance("c1").load().status == "running"
