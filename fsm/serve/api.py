"""The JSON API under ``/api/``: the command line over HTTP, described by ``/api/openapi.json``.

Each route calls the same functions as its command (``fsm ls``, ``status``, ``history``,
``diagram --run``, ``new``, ``start``/``pause``/``resume``/``stop``, ``schema``), and an error
keeps its exit code's meaning as an HTTP status: unknown machine or instance 404, other bad input
400, not allowed now 409, store error 503, internal error 500; the body is
``{"error": "<one line>", "exit_code": N}``. Requests that change instances need the token and
the same origin (:mod:`fsm.serve.access`).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse

from fsm.base.errors import InputError, UnknownMachineError
from fsm.base.ids import validate_id
from fsm.engine.commands import run_command
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance
from fsm.engine.retry import retry
from fsm.model.definition import did_you_mean
from fsm.model.machine import Machine
from fsm.model.settings import model_settings
from fsm.serve import events
from fsm.serve.models import (
    Changes,
    CommandRequest,
    ControlRequest,
    CreateRequest,
    ErrorBody,
    Fired,
    History,
    InstanceInfo,
    Listing,
    MachineSummary,
    RetryRequest,
    Session,
    Version,
)
from fsm.serve.travel import changes_between, version_at
from fsm.serve.views import (
    Filters,
    Served,
    history,
    instance_rows,
    instance_status,
    machine_view,
    summary_of,
)
from fsm.view import diagram

__all__ = ["router"]

SVG = "image/svg+xml"


DOCUMENT = {"$ref": "#/components/schemas/Document"}
"""The document answers' schema: one of the served machines' document models (the OpenAPI
document lists them; see :func:`fsm.serve.app.openapi`)."""
ACTOR = "serve"
"""The actor of every change made through the API (the client's reason is kept beside it)."""

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "bad input (exit code 2)"},
    404: {"model": ErrorBody, "description": "unknown machine or instance (exit code 2)"},
    503: {"model": ErrorBody, "description": "store error (exit code 6)"},
}
READS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    401: {
        "model": ErrorBody,
        "description": "the instance's document is private (others may not read it) and the "
        "token is missing",
    },
}
CHANGES: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    401: {"model": ErrorBody, "description": "the token is missing or wrong"},
    403: {"model": ErrorBody, "description": "another origin, or a cookie without an Origin"},
    409: {"model": ErrorBody, "description": "not allowed now (exit code 3)"},
    413: {"model": ErrorBody, "description": "the body is larger than --max-body"},
}


async def served(request: Request) -> Served:
    """The server's workspace and machines."""
    found: Served = request.app.state.served
    return found


async def may_change(request: Request) -> None:
    """Refuse control and create requests without the token or from another origin (the
    access guard has refused them already, before their body was read: this keeps a route
    safe whatever middleware it is mounted under)."""
    refusal = request.app.state.access.control_refusal(request.headers)
    if refusal is not None:
        status_code, message = refusal
        raise HTTPException(status_code, message)


def readable(request: Request, server: Served, machine: str, instance_id: str) -> Instance:
    """The instance, when this client may read it: an instance whose document others may not
    read needs the token (``fsm serve --reads``)."""
    instance = server.instance(machine, instance_id)
    access = request.app.state.access
    if access.read_refused(request.headers, instance.store.permissions(instance.id)):
        raise HTTPException(
            401,
            f"the document of '{instance.id}' is private (others may not read it): open the "
            "URL fsm serve printed, or send 'Authorization: Bearer <token>'",
        )
    return instance


async def known_query(request: Request) -> None:
    """Refuse a query name the route does not take (``?stauts=failed`` would otherwise be
    ignored, and the answer look like the one asked for), naming the ones it takes. (A
    coroutine, as the other dependencies: a function would cost each request a thread hop.)"""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    taken = [param.alias for param in dependant.query_params]
    for name in request.query_params:
        if name not in taken:
            offered = ", ".join(taken) if taken else "none"
            raise InputError(
                f"unknown query parameter '{name}'{did_you_mean(name, taken)}; this route "
                f"takes: {offered}"
            )


ServedDep = Annotated[Served, Depends(served)]
router = APIRouter(prefix="/api", dependencies=[Depends(known_query)])


@router.get("/session", response_model=Session)
def get_session(request: Request) -> Session:
    """Whether this client may send control commands (it holds the token), and whether the
    server drives the runnable instances itself."""
    access = request.app.state.access
    return Session(
        control=access.authorised(request.headers),
        remote=access.remote,
        drives=request.app.state.drives,
    )


@router.get("/machines", tags=["machines"], response_model=list[MachineSummary])
def get_machines(server: ServedDep) -> list[dict[str, Any]]:
    """``fsm machines --json``: the machines this server shows."""
    return [
        {
            "name": name,
            "description": machine.spec.description,
            "version": str(machine.spec.version),
            "source": server.sources.get(name, str(machine.path)),
        }
        for name, machine in sorted(server.machines.items())
    ]


@router.get("/machines/{machine}", tags=["machines"], responses=ERRORS)
def get_machine(machine: str, server: ServedDep) -> dict[str, Any]:
    """States, transitions (guards, actions), control commands, options, inputs and schema."""
    return machine_view(server, machine)


@router.get("/machines/{machine}/schema", tags=["machines"], responses=ERRORS)
def get_schema(machine: str, server: ServedDep) -> dict[str, Any]:
    """``fsm schema``: the JSON Schema of the machine's document."""
    return server.machine(machine).document_model.model_json_schema(by_alias=True)


@router.get(
    "/machines/{machine}/diagram.svg",
    tags=["machines"],
    responses={**ERRORS, 200: {"content": {SVG: {}}}},
    response_class=Response,
)
def get_machine_diagram(machine: str, server: ServedDep) -> Response:
    """``fsm diagram -f svg``: the machine's diagram."""
    return Response(server.machine_svg(machine), media_type=SVG)


@router.get("/instances", response_model=Listing, tags=["instances"], responses=ERRORS)
def get_instances(
    request: Request,
    server: ServedDep,
    machine: str | None = None,
    status: str | None = None,
    outcome: Annotated[
        str | None, Query(description="success, failure, or none (not ended)")
    ] = None,
    q: Annotated[
        str | None, Query(description="words looked for in the id, title and reason")
    ] = None,
    since: Annotated[
        str | None, Query(description="updated at or after (ISO 8601 date or time)")
    ] = None,
    sort: Annotated[
        str | None,
        Query(
            description="a column: updated, id, machine, title, state, status, progress or "
            "outcome; '-' first for descending (default: -updated, newest first)"
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """``fsm ls --json``: instances newest first (or sorted by ``sort``), filtered, a page at a
    time, with the number of instances of each status (``counts``, the status filter aside).
    A filter value nothing could match (``status=faild``) is a 400 naming the closest one."""
    filters = Filters(
        machine or None, status or None, outcome or None, q or None, since or None, sort or None
    )
    access = request.app.state.access
    stores: dict[str, Any] = {}

    def private(machine_name: str, instance_id: str) -> bool:
        if access.reads == "none" or access.authorised(request.headers):
            return False
        if machine_name not in stores:
            stores[machine_name] = server.workspace.store_for(server.machine(machine_name))
        refused: bool = access.read_refused(
            request.headers, stores[machine_name].permissions(instance_id)
        )
        return refused

    return instance_rows(server, filters, limit, offset, private)


@router.post(
    "/instances/{machine}",
    response_model=InstanceInfo,
    status_code=201,
    tags=["instances"],
    responses={
        **CHANGES,
        413: {"model": ErrorBody, "description": "inputs larger than a document (exit code 2)"},
    },
    dependencies=[Depends(may_change)],
)
def create_instance(
    machine: str, server: ServedDep, body: Annotated[CreateRequest, Body()]
) -> dict[str, Any]:
    """``fsm new``: create an instance in its initial state (``fsm run`` drives it)."""
    resolved = server.machine(machine)
    instance_id = body.id if body.id is not None else server.workspace.new_id(resolved)
    instance = server.workspace.instance(resolved, instance_id)
    instance.create(body.inputs, actor=ACTOR)
    return instance_info(server, instance)


def instance_info(server: Served, instance: Instance) -> dict[str, Any]:
    """``fsm status --json``, who drives the instance, and the command that would; whether a
    retry would reopen it, and the machine's own commands it takes."""
    info = instance_status(instance)  # its driver included
    machine = instance.machine
    source = server.sources.get(machine.name, machine.name)
    info["run_command"] = f"fsm -C {server.workspace.path} run {source} {instance.id}"
    info["retry"] = machine.hooks.retry is not None and info["outcome"] == "failure"
    info["commands"] = [] if info["final"] else command_infos(machine)
    return info


def command_infos(machine: Machine) -> list[dict[str, Any]]:
    """The machine's own commands, their inputs listed and their JSON Schema."""
    return [
        {
            "name": command.name,
            "description": command.description,
            "inputs": []
            if command.inputs_model is None
            else [setting.to_json() for setting in model_settings(command.inputs_model)],
            "input_schema": None
            if command.inputs_model is None
            else command.inputs_model.model_json_schema(),
        }
        for command in machine.commands.values()
    ]


@router.get(
    "/instances/{machine}/{instance_id}",
    response_model=InstanceInfo,
    tags=["instances"],
    responses=READS,
)
def get_status(
    request: Request, machine: str, instance_id: str, server: ServedDep
) -> dict[str, Any]:
    """``fsm status --json``: state, status, outcome and reason, events, legal commands; and
    ``driver``, the run driving it now (None: nobody), with ``run_command``, the command that
    would."""
    return instance_info(server, readable(request, server, machine, instance_id))


@router.get(
    "/instances/{machine}/{instance_id}/document",
    tags=["instances"],
    responses={
        **READS,
        200: {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Document"}}}
        },
    },
)
def get_document(
    request: Request, machine: str, instance_id: str, server: ServedDep
) -> dict[str, Any]:
    """The instance's document as it is on disk."""
    instance = readable(request, server, machine, instance_id)
    return instance.store.read(instance.id).data


@router.get(
    "/instances/{machine}/{instance_id}/history",
    response_model=History,
    response_model_exclude_unset=True,
    tags=["instances"],
    responses=READS,
)
def get_history(
    request: Request,
    machine: str,
    instance_id: str,
    server: ServedDep,
    limit: Annotated[int, Query(ge=1, le=10000)] = 200,
) -> dict[str, Any]:
    """``fsm history --json``: the latest ``limit`` journal records, oldest first, each with
    its journal line (``lines``), by which time travel names it."""
    return history(readable(request, server, machine, instance_id), limit)


@router.get(
    "/instances/{machine}/{instance_id}/versions/{line}",
    response_model=Version,
    response_model_exclude_unset=True,
    tags=["time travel"],
    responses=READS,
)
def get_version(
    request: Request, machine: str, instance_id: str, line: int, server: ServedDep
) -> dict[str, Any]:
    """The document as the record on journal line ``line`` left it, rebuilt from the
    journal's changes and checked against the record's hashes (``check``)."""
    instance = readable(request, server, machine, instance_id)
    version = version_at(instance, line)
    return {
        "line": version.line,
        "record": version.record,
        "document": version.document,
        "check": {"verdict": version.check.verdict, "reason": version.check.reason},
        "summary": summary_of(instance.machine, version.document),
    }


@router.get(
    "/instances/{machine}/{instance_id}/versions/{line}/diagram.svg",
    tags=["time travel"],
    responses={**READS, 200: {"content": {SVG: {}}}},
    response_class=Response,
)
def get_version_diagram(
    request: Request, machine: str, instance_id: str, line: int, server: ServedDep
) -> Response:
    """The instance's diagram as of the record on line ``line``: its state, the visits
    counted up to it."""
    instance = readable(request, server, machine, instance_id)
    version = version_at(instance, line)
    state = version.record.get("state") or version.record.get("dest")
    overlay = dataclasses.replace(version.visits, current_state=str(state))
    dot = diagram.to_dot(instance.machine, run=overlay)
    return Response(server.render(dot), media_type=SVG)


@router.get(
    "/instances/{machine}/{instance_id}/changes",
    response_model=Changes,
    response_model_by_alias=True,
    response_model_exclude_unset=True,
    tags=["time travel"],
    responses=READS,
)
def get_changes(
    request: Request,
    machine: str,
    instance_id: str,
    server: ServedDep,
    first: Annotated[int, Query(alias="from", ge=1)],
    to: Annotated[int, Query(ge=1)],
) -> dict[str, Any]:
    """What changed between the versions of the records on lines ``from`` and ``to``."""
    return changes_between(readable(request, server, machine, instance_id), first, to)


@router.get(
    "/instances/{machine}/{instance_id}/diagram.svg",
    tags=["instances"],
    responses={**READS, 200: {"content": {SVG: {}}}},
    response_class=Response,
)
def get_instance_diagram(
    request: Request, machine: str, instance_id: str, server: ServedDep
) -> Response:
    """``fsm diagram MACHINE --run ID``: current state, visit counts, untaken edges dimmed."""
    instance = readable(request, server, machine, instance_id)
    return Response(server.instance_svg(instance), media_type=SVG)


@router.post(
    "/instances/{machine}/{instance_id}/retry",
    response_model=InstanceInfo,
    tags=["instances"],
    responses=CHANGES,
    dependencies=[Depends(may_change)],
)
def retry_instance(
    machine: str,
    instance_id: str,
    server: ServedDep,
    body: Annotated[RetryRequest | None, Body()] = None,
) -> dict[str, Any]:
    """``fsm retry MACHINE ID [ITEM...]``: reopen an instance that ended failed, for the
    ``items`` named (none: every failed one); 409 when it has not ended failed or its machine
    cannot retry. A run (``fsm run``, ``fsm serve --drive``) then drives it."""
    instance = server.instance(machine, instance_id)
    request = body or RetryRequest()
    retry(instance, request.items, actor=ACTOR, reason=request.reason)
    return instance_info(server, instance)


@router.post(
    "/instances/{machine}/{instance_id}/events/{event}",
    response_model=Fired,
    tags=["instances"],
    responses=CHANGES,
    dependencies=[Depends(may_change)],
)
def fire_event(
    machine: str,
    instance_id: str,
    event: str,
    server: ServedDep,
    body: Annotated[ControlRequest | None, Body()] = None,
) -> dict[str, Any]:
    """``fsm fire MACHINE ID EVENT``: take the event's transition now (its guards and actions
    run in this request); 409 when the event is not allowed or its guards refuse it. An action
    that fails is journaled as the step's error and answered as ``outcome: failed``."""
    instance = server.instance(machine, instance_id)
    request = body or ControlRequest()
    result = Engine(instance).fire(event, actor=ACTOR, reason=request.reason)
    return {
        "outcome": result.outcome,
        "event": event,
        "state": result.state,
        "error": None if result.error is None else str(result.error),
        "instance": instance_info(server, instance),
    }


@router.post(
    "/instances/{machine}/{instance_id}/commands/{name}",
    response_model=InstanceInfo,
    tags=["instances"],
    responses=CHANGES,
    dependencies=[Depends(may_change)],
)
def machine_command(
    machine: str,
    instance_id: str,
    name: str,
    server: ServedDep,
    body: Annotated[CommandRequest | None, Body()] = None,
) -> dict[str, Any]:
    """``fsm command MACHINE ID NAME``: a command of the machine's own (ccw-loop's
    ``add_task``) with its ``inputs``; 400 for an unknown command or inputs its model refuses,
    409 once the instance has ended."""
    instance = server.instance(machine, instance_id)
    request = body or CommandRequest()
    run_command(instance, name, request.inputs, actor=ACTOR, reason=request.reason)
    return instance_info(server, instance)


@router.post(
    "/instances/{machine}/{instance_id}/{command}",
    response_model=InstanceInfo,
    tags=["instances"],
    responses=CHANGES,
    dependencies=[Depends(may_change)],
)
def control(
    machine: str,
    instance_id: str,
    command: Literal["start", "pause", "resume", "stop"],
    server: ServedDep,
    body: Annotated[ControlRequest | None, Body()] = None,
) -> dict[str, Any]:
    """``fsm start|pause|resume|stop``: refused with 409 when not legal now. The journal's
    actor is the server (``serve``); the client's reason is kept beside it."""
    instance = server.instance(machine, instance_id)
    request = body or ControlRequest()
    ControlPlane(instance).apply(command, actor=ACTOR, reason=request.reason)
    return instance_info(server, instance)


@router.get(
    "/events",
    tags=["live"],
    response_class=StreamingResponse,
    responses={400: ERRORS[400], 200: {"content": {"text/event-stream": {}}}},
)
async def get_events(
    request: Request, server: ServedDep, machine: str | None = None, instance: str | None = None
) -> StreamingResponse:
    """Server-sent events: ``change`` with ``{"machine", "id"}`` whenever an instance's
    document or journal changes (``machine: null`` means reload everything), ``ready`` once
    the stream is set up (load the data then), comments to keep the connection open. A
    machine this server does not show, or an unsafe instance id, is a 400 (nothing would ever
    come)."""
    if machine:
        try:
            server.machine(machine)
        except UnknownMachineError as exc:
            raise InputError(f"machine={machine}: {exc}") from None
    if instance:
        validate_id(instance)
    stream = events.stream(request.app.state.feed, machine, instance)
    return StreamingResponse(
        stream, media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )
