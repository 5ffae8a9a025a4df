"""The web application: pages, static files, the API, errors mapped to HTTP statuses.

Pages are plain HTML files shipped in the package (``static/``); their scripts fetch the API and
draw with the DOM, no build step and nothing from another server. The watcher of
:mod:`fsm.serve.watch` runs for the application's lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import importlib.metadata
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from fsm.base.errors import (
    FsmError,
    InputError,
    InputTooLargeError,
    RefusedError,
    StoreError,
    UnknownInstanceError,
    UnknownMachineError,
)
from fsm.serve.access import Access, AccessGuard
from fsm.serve.api import router
from fsm.serve.drive import Driver
from fsm.serve.row_index import RowIndex
from fsm.serve.views import Served
from fsm.serve.watch import ChangeFeed, sources_of
from fsm.view.terminal import one_line

__all__ = ["STATIC", "create_app", "http_status"]

STATIC = Path(__file__).parent / "static"


def http_status(exc: FsmError) -> int:
    """The HTTP status meaning what the error's exit code means on the command line."""
    if isinstance(exc, UnknownMachineError | UnknownInstanceError):
        return 404
    if isinstance(exc, InputTooLargeError):
        return 413
    if isinstance(exc, InputError):
        return 400
    if isinstance(exc, RefusedError):
        return 409
    if isinstance(exc, StoreError):
        return 503
    return 500


def create_app(
    served: Served,
    access: Access,
    feed: ChangeFeed | None = None,
    driver: Callable[[ChangeFeed], Driver] | None = None,
) -> FastAPI:
    """The application showing ``served`` under the rules of ``access``; with ``driver``
    (``fsm serve --drive``), the driver made with the change feed drives the runnable
    instances while the application runs."""
    changes = feed or ChangeFeed(sources_of(served.workspace, served.machines.values()))
    index = served.index = RowIndex(served.workspace, served.machines.values())
    changes.listeners.append(index.changed)
    driving = driver(changes) if driver is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(changes.watch(stop))]
        if index is not None:
            tasks.append(asyncio.create_task(asyncio.to_thread(index.warm)))
        if driving is not None:
            tasks.append(asyncio.create_task(driving.run(stop)))
        try:
            yield
        finally:
            stop.set()
            changes.close()
            await asyncio.gather(*tasks, return_exceptions=True)

    app = FastAPI(
        title="fsm serve",
        version=_version(),
        description="A live view of the machines and instances of one workspace.",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.served = served
    app.state.access = access
    app.state.feed = changes
    app.state.drives = driving.workers if driving is not None else 0
    app.include_router(router)
    app.openapi = lambda: openapi(app, served, access)  # type: ignore[method-assign]
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _pages(app)
    _errors(app)
    app.add_middleware(AccessGuard, access=access)
    return app


EVENTS_DESCRIPTION = """A `text/event-stream` of server-sent events:

* `ready` (data `{}`), once the stream is set up: load what the page shows then;
* `change` (data `{"machine": "<name>" | null, "id": "<id>" | null}`), whenever an instance's
  document or journal changed (`machine: null`: reload everything);
* comments (`: keep-alive`) every 15 seconds; `retry: 1000` asks browsers to reconnect after a
  second."""


_ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
_EVERY_ROUTE = {
    "400": "bad input (exit code 2): a query parameter the route does not take, or a bad value",
    "401": "this server takes remote clients: every request needs the token",
    "403": "refused: the Host header does not name this server (DNS rebinding)",
    "500": "internal error (exit code 1)",
}
"""What every route may answer, whatever it does: the access guard's refusals and a failure."""


def openapi(app: FastAPI, served: Served, access: Access) -> dict[str, Any]:
    """The OpenAPI document as the server answers: 400 (never 422) for bad input, the token as
    a security scheme (a bearer token or this server's cookie), the served machines' document
    models as ``Document``, and the event stream's events."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi
    from pydantic.json_schema import models_json_schema

    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "the token fsm serve printed",
        },
        "cookie": {
            "type": "apiKey",
            "in": "cookie",
            "name": access.cookie,
            "description": "set by opening the address fsm serve printed (?token=...)",
        },
    }
    models: list[tuple[type[BaseModel], Literal["validation"]]] = [
        (machine.document_model, "validation") for machine in served.machines.values()
    ]
    refs, defs = models_json_schema(models, ref_template="#/components/schemas/{model}")
    schemas.update(defs.get("$defs", {}))
    schemas["Document"] = {
        "description": "An instance document: one of the served machines' document models "
        "(GET /api/machines/{machine}/schema gives each).",
        "anyOf": list(refs.values()) or [{"type": "object"}],
    }
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if responses.pop("422", None) is not None and "400" not in responses:
                responses["400"] = {
                    "description": "bad input (exit code 2)",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                    },
                }
            for status, description in _EVERY_ROUTE.items():
                if status == "401" and not access.remote:
                    continue
                if status not in responses:
                    responses[status] = {"description": description, "content": _ERROR_JSON}
                elif status == "403" and method == "get":
                    responses[status]["description"] = description
            if method == "post":
                operation["security"] = [{"bearer": []}, {"cookie": []}]
            elif path.startswith("/api/instances/") and not access.remote:
                operation["security"] = [{}, {"bearer": []}, {"cookie": []}]
            elif access.remote:
                operation["security"] = [{"bearer": []}, {"cookie": []}]
            if path == "/api/events":
                operation["description"] = EVENTS_DESCRIPTION
                operation["responses"]["200"] = {
                    "description": "the event stream",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                }
    app.openapi_schema = schema
    return schema


def _version() -> str:
    try:
        return importlib.metadata.version("fsm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _pages(app: FastAPI) -> None:
    served: Served = app.state.served

    @app.get("/", include_in_schema=False)
    def instances_page() -> Response:
        return FileResponse(STATIC / "instances.html")

    @app.get("/instances/{machine}/{instance_id}", include_in_schema=False)
    def instance_page(machine: str, instance_id: str) -> Response:
        try:
            served.instance(machine, instance_id)
        except FsmError as exc:
            return _error_page(exc)
        return FileResponse(STATIC / "instance.html")

    @app.get("/machines/{machine}", include_in_schema=False)
    def machine_page(machine: str) -> Response:
        try:
            served.machine(machine)
        except FsmError as exc:
            return _error_page(exc)
        return FileResponse(STATIC / "machine.html")


def _error_page(exc: FsmError) -> HTMLResponse:
    text = html.escape(one_line(str(exc)))
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>fsm serve: error'
        '</title><link rel="stylesheet" href="/static/style.css"></head><body><main>'
        f'<p class="error">{text}</p><p><a href="/">All instances</a></p></main></body></html>'
    )
    return HTMLResponse(body, status_code=http_status(exc))


def _errors(app: FastAPI) -> None:
    @app.exception_handler(FsmError)
    async def fsm_error(request: Request, exc: FsmError) -> JSONResponse:
        return _error(http_status(exc), str(exc), exc.exit_code)

    @app.exception_handler(OSError)
    async def os_error(request: Request, exc: OSError) -> JSONResponse:
        where = f": {exc.filename}" if exc.filename else ""
        return _error(503, f"store error: {exc.strerror or exc}{where}", 6)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        return _error(400, f"{where}: {first.get('msg', 'invalid request')}", 2)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), 2)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__}: {exc}", 1)


def _error(status: int, message: str, exit_code: int) -> JSONResponse:
    return JSONResponse({"error": one_line(message), "exit_code": exit_code}, status_code=status)
