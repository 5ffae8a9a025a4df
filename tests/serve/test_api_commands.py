"""The page's new control paths over the API: retry, firing an event, a machine's own command;
each the CLI's path, journaled with the actor ``serve`` and the client's reason."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.discovery import open_machine
from fsm.model.machine import load_machine
from fsm.serve import Access, Served, create_app
from tests.conftest import ENGINE_MACHINES
from tests.serve.conftest import BASE, PORT, TOKEN, Api

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _journal(api: Api, machine: str, instance_id: str) -> list[dict[str, object]]:
    found = api.client.get(f"/api/instances/{machine}/{instance_id}/history")
    assert found.status_code == 200
    records: list[dict[str, object]] = found.json()["records"]
    return records


def test_fire_takes_the_event_with_the_reason_journaled(api: Api) -> None:
    api.counter("c1", limit=3)
    assert api.post("/api/instances/counter/c1/start").status_code == 200
    fired = api.post("/api/instances/counter/c1/events/count", {"reason": "alice: one more"})
    assert fired.status_code == 200, fired.text
    body = fired.json()
    assert body["outcome"] == "applied" and body["state"] == "counting"
    assert body["instance"]["state"] == "counting"
    last = _journal(api, "counter", "c1")[-1]
    assert last["kind"] == "transition" and last["event"] == "count"
    assert last["actor"] == "serve" and last["reason"] == "alice: one more"


def test_fire_refusals_are_409_and_a_failing_action_is_reported(api: Api) -> None:
    api.counter("c1", limit=3)
    paused = api.post("/api/instances/counter/c1/events/count")
    assert (
        paused.status_code == 409 and "not accepted until it is running" in paused.json()["error"]
    )
    api.post("/api/instances/counter/c1/start")
    unknown = api.post("/api/instances/counter/c1/events/launch")
    assert unknown.status_code == 409 and "allowed: " in unknown.json()["error"]
    api.post("/api/instances/counter/c1/events/count")
    spoiled = api.post("/api/instances/counter/c1/events/spoil", {"reason": "bad batch"})
    assert spoiled.status_code == 200
    assert spoiled.json()["outcome"] == "failed" and "validate" in spoiled.json()["error"]
    last = _journal(api, "counter", "c1")[-1]
    assert last["kind"] == "error" and last["reason"] == "bad batch" and last["actor"] == "serve"


def test_fire_needs_the_token_and_refuses_a_chosen_actor(api: Api) -> None:
    api.counter("c1")
    api.post("/api/instances/counter/c1/start")
    anonymous = api.client.post("/api/instances/counter/c1/events/count", json={})
    assert anonymous.status_code == 401
    actor = api.post("/api/instances/counter/c1/events/count", {"actor": "mallory"})
    assert actor.status_code == 400
    assert [r["kind"] for r in _journal(api, "counter", "c1")] == ["create", "control"]


def test_add_task_through_the_machine_command_route(api: Api, tmp_path: Path) -> None:
    loop = api.workspace.instance(api.served.machines["ccw-loop"], "L1")
    loop.create({"title": "Parser", "description": "Fix the parser"})
    shown = api.client.get("/api/instances/ccw-loop/L1").json()
    assert [c["name"] for c in shown["commands"]] == ["add_task"]
    assert "description" in shown["commands"][0]["input_schema"]["properties"]
    body = {"inputs": {"description": "Add --verbose", "tool": "codex"}, "reason": "bob"}
    added = api.post("/api/instances/ccw-loop/L1/commands/add_task", body)
    assert added.status_code == 200, added.text
    lines = (tmp_path / ".workflow" / ".loop" / "L1" / "tasks.jsonl").read_text().splitlines()
    task = json.loads(lines[-1])
    assert task["description"] == "Add --verbose" and task["tool"] == "codex"
    assert task["task_id"].startswith("task-") and task["order"] == 0
    last = _journal(api, "ccw-loop", "L1")[-1]
    assert last["kind"] == "command" and last["event"] == "add_task"
    assert last["actor"] == "serve" and last["reason"] == "bob"
    assert last["inputs"] == {
        "description": "Add --verbose",
        "tool": "codex",
        "mode": "write",
        "on_error": "continue",
    }


def test_machine_command_refusals(api: Api, tmp_path: Path) -> None:
    loop = api.workspace.instance(api.served.machines["ccw-loop"], "L1")
    loop.create({"title": "Parser", "description": "Fix the parser"})
    bad = api.post("/api/instances/ccw-loop/L1/commands/add_task", {"inputs": {"tool": "x"}})
    assert bad.status_code == 400 and "description" in bad.json()["error"]
    unknown = api.post("/api/instances/ccw-loop/L1/commands/add_tsk")
    assert unknown.status_code == 400 and "add_task" in unknown.json()["error"]
    none = api.post("/api/instances/counter/c9/commands/add_task")
    assert none.status_code == 404
    assert not (tmp_path / ".workflow" / ".loop" / "L1" / "tasks.jsonl").exists()
    assert [r["kind"] for r in _journal(api, "ccw-loop", "L1")] == ["create"]
    api.post("/api/instances/ccw-loop/L1/stop", {"reason": "done with it"})
    ended = api.post(
        "/api/instances/ccw-loop/L1/commands/add_task", {"inputs": {"description": "late"}}
    )
    assert ended.status_code == 409 and "ended" in ended.json()["error"]
    assert api.client.get("/api/instances/ccw-loop/L1").json()["commands"] == []


def test_retry_reopens_a_failed_instance_for_the_items_named(tmp_path: Path) -> None:
    judged = load_machine(ENGINE_MACHINES / "judged" / "machine.yaml")
    served = Served(Workspace(tmp_path), {"judged": judged, "ccw-loop": open_machine("ccw-loop")})
    flaky = tmp_path / "flaky.sh"
    flaky.write_text(f'#!/bin/sh\ntest -e "{tmp_path}/fixed"\n')
    flaky.chmod(0o755)
    instance = served.workspace.instance(judged, "b1")
    instance.create(
        {"parts": [{"name": "a", "program": str(flaky)}, {"name": "b", "program": str(flaky)}]}
    )
    Engine(instance).run(actor="test")
    app = create_app(served, Access(TOKEN, "127.0.0.1", PORT))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        shown = client.get("/api/instances/judged/b1").json()
        assert shown["outcome"] == "failure" and shown["retry"] is True
        retried = client.post(
            "/api/instances/judged/b1/retry",
            json={"items": ["b"], "reason": "fixed b"},
            headers=AUTH,
        )
        assert retried.status_code == 200, retried.text
        assert retried.json()["final"] is False and retried.json()["retry"] is False
        last = client.get("/api/instances/judged/b1/history").json()["records"][-1]
        assert last["kind"] == "retry" and last["items"] == ["b"]
        assert last["actor"] == "serve" and last["reason"] == "fixed b"
        again = client.post("/api/instances/judged/b1/retry", json={}, headers=AUTH)
        assert again.status_code == 409 and "has not ended" in again.json()["error"]
        loop = served.workspace.instance(served.machines["ccw-loop"], "L1")
        loop.create({"title": "t", "description": "d"})
        client.post("/api/instances/ccw-loop/L1/stop", json={}, headers=AUTH)
        hookless = client.post("/api/instances/ccw-loop/L1/retry", json={}, headers=AUTH)
        assert hookless.status_code == 409 and "no 'retry' hook" in hookless.json()["error"]
