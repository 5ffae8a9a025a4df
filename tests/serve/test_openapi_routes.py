"""The OpenAPI document lists every status the server answers, route by route: a test walks
every route of the document with a good request, a wrong ``Host`` and an unknown query name,
and checks each answer's status is listed and its body fits the listed schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.validators import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from fsm.engine.engine import Engine
from tests.serve.conftest import TOKEN, Api

VALUES = {
    "machine": "counter",
    "instance_id": "c1",
    "line": "3",
    "command": "pause",
    "event": "count",
    "name": "add_task",
}
BODIES = {"/api/instances/{machine}": {"inputs": {"limit": 1}}}
QUERIES = {"/api/instances/{machine}/{instance_id}/changes": "from=1&to=3"}


def _url(template: str) -> str:
    url = template
    for key, value in VALUES.items():
        url = url.replace("{" + key + "}", value)
    return url


def _check(spec: dict[str, Any], template: str, method: str, answer: Any) -> None:
    responses = spec["paths"][template][method]["responses"]
    where = (method, template, answer.status_code, answer.text[:200])
    assert str(answer.status_code) in responses, where
    content = responses[str(answer.status_code)].get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None or not answer.headers.get("content-type", "").startswith("application/json"):
        return
    registry = Registry().with_resource("urn:spec", DRAFT202012.create_resource(spec))
    linked = json.loads(json.dumps(schema).replace('"#/components/', '"urn:spec#/components/'))
    Draft202012Validator(linked, registry=registry).validate(answer.json())


def _send(api: Api, method: str, url: str, template: str, **headers: str) -> Any:
    sent = {"Authorization": f"Bearer {TOKEN}", **headers}
    if method == "post":
        return api.client.post(url, json=BODIES.get(template, {}), headers=sent)
    return api.client.get(url, headers=sent)


def test_every_route_answers_only_statuses_the_document_lists(api: Api) -> None:
    Engine(api.counter("c1", limit=2)).run()
    spec = api.client.get("/api/openapi.json").json()
    walked = 0
    for template, operations in spec["paths"].items():
        for method in operations:
            url = _url(template)
            # A wrong Host: refused before anything else (DNS rebinding).
            refused = _send(api, method, url, template, Host="evil.example:8765")
            assert refused.status_code == 403
            _check(spec, template, method, refused)
            # A query name the route does not take: refused, naming the ones it takes.
            unknown = _send(api, method, f"{url}?stauts=failed", template)
            assert unknown.status_code == 400, (template, unknown.text)
            assert "unknown query parameter 'stauts'" in unknown.json()["error"]
            _check(spec, template, method, unknown)
            if template == "/api/events":
                continue  # a good request streams until the server stops
            query = QUERIES.get(template)
            answer = _send(api, method, f"{url}?{query}" if query else url, template)
            _check(spec, template, method, answer)
            walked += 1
    assert walked >= 18


def test_events_of_an_unknown_machine_or_an_unsafe_id_are_refused(api: Api) -> None:
    spec = api.client.get("/api/openapi.json").json()
    for query in ("machine=nope", "instance=../x"):
        answer = api.client.get(f"/api/events?{query}")
        assert answer.status_code == 400, answer.text
        _check(spec, "/api/events", "get", answer)
    assert "did you mean" in api.client.get("/api/events?machine=countr").json()["error"]
    jsonschema.validate({"error": "x", "exit_code": 2}, spec["components"]["schemas"]["ErrorBody"])
