"""The JSON API under ``/api/``: the command line over HTTP, described by ``/api/openapi.json``.

Each route calls the same functions as its command (``fsm ls``, ``status``, ``history``,
``diagram --run``, ``new``, ``start``/``pause``/``resume``/``stop``, ``schema``), and an error
keeps its exit code's meaning as an HTTP status: unknown machine or instance 404, other bad input
400, not allowed now 409, store error 503, internal error 500; the body is
``{"error": "<one line>", "exit_code": N}``. Requests that change instances need the token and
the same origin (:mod:`fsm.serve.access`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse

from fsm.engine.control import ControlPlane
from fsm.serve import events
from fsm.serve.models import (
    ControlRequest,
    CreateRequest,
    ErrorBody,
    History,
    Listing,
    Session,
)
from fsm.serve.views import Served, history, instance_rows, instance_status, machine_view
from fsm.view.inspect import InstanceStatus

__all__ = ["router"]

SVG = "image/svg+xml"


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "bad input (exit code 2)"},
    404: {"model": ErrorBody, "description": "unknown machine or instance (exit code 2)"},
    503: {"model": ErrorBody, "description": "store error (exit code 6)"},
}
CHANGES: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    401: {"model": ErrorBody, "description": "the token is missing or wrong"},
    403: {"model": ErrorBody, "description": "another origin, or a cookie without an Origin"},
    409: {"model": ErrorBody, "description": "not allowed now (exit code 3)"},
}


def served(request: Request) -> Served:
    """The server's workspace and machines."""
    found: Served = request.app.state.served
    return found


def may_change(request: Request) -> None:
    """Refuse control and create requests without the token or from another origin."""
    refusal = request.app.state.access.control_refusal(request.headers)
    if refusal is not None:
        status_code, message = refusal
        raise HTTPException(status_code, message)


ServedDep = Annotated[Served, Depends(served)]
router = APIRouter(prefix="/api")


@router.get("/session", response_model=Session)
def get_session(request: Request) -> Session:
    """Whether this client may send control commands (it holds the token)."""
    access = request.app.state.access
    return Session(control=access.authorised(request.headers), remote=access.remote)


@router.get("/machines", tags=["machines"])
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
    server: ServedDep,
    machine: str | None = None,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """``fsm ls --json``: instances newest first, by machine and status, a page at a time."""
    return instance_rows(server, machine or None, status or None, limit, offset)


@router.post(
    "/instances/{machine}",
    response_model=InstanceStatus,
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
    instance.create(body.inputs, actor="web")
    return instance_status(instance)


@router.get(
    "/instances/{machine}/{instance_id}",
    response_model=InstanceStatus,
    tags=["instances"],
    responses=ERRORS,
)
def get_status(machine: str, instance_id: str, server: ServedDep) -> dict[str, Any]:
    """``fsm status --json``: state, status, outcome and reason, events, legal commands."""
    return instance_status(server.instance(machine, instance_id))


@router.get("/instances/{machine}/{instance_id}/document", tags=["instances"], responses=ERRORS)
def get_document(machine: str, instance_id: str, server: ServedDep) -> dict[str, Any]:
    """The instance's document as it is on disk."""
    instance = server.instance(machine, instance_id)
    return instance.store.read(instance.id).data


@router.get(
    "/instances/{machine}/{instance_id}/history",
    response_model=History,
    tags=["instances"],
    responses=ERRORS,
)
def get_history(
    machine: str,
    instance_id: str,
    server: ServedDep,
    limit: Annotated[int, Query(ge=1, le=10000)] = 200,
) -> dict[str, Any]:
    """``fsm history --json``: the latest ``limit`` journal records, oldest first."""
    return history(server.instance(machine, instance_id), limit)


@router.get(
    "/instances/{machine}/{instance_id}/diagram.svg",
    tags=["instances"],
    responses={**ERRORS, 200: {"content": {SVG: {}}}},
    response_class=Response,
)
def get_instance_diagram(machine: str, instance_id: str, server: ServedDep) -> Response:
    """``fsm diagram MACHINE --run ID``: current state, visit counts, untaken edges dimmed."""
    return Response(server.instance_svg(server.instance(machine, instance_id)), media_type=SVG)


@router.post(
    "/instances/{machine}/{instance_id}/{command}",
    response_model=InstanceStatus,
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
    """``fsm start|pause|resume|stop``: refused with 409 when not legal now."""
    instance = server.instance(machine, instance_id)
    request = body or ControlRequest()
    ControlPlane(instance).apply(command, actor=request.actor, reason=request.reason)
    return instance_status(instance)


@router.get(
    "/events",
    tags=["live"],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def get_events(
    request: Request, machine: str | None = None, instance: str | None = None
) -> StreamingResponse:
    """Server-sent events: ``change`` with ``{"machine", "id"}`` whenever an instance's
    document or journal changes (``machine: null`` means reload everything), ``ready`` once
    the stream is set up (load the data then), comments to keep the connection open."""
    stream = events.stream(request.app.state.feed, machine, instance)
    return StreamingResponse(
        stream, media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )
