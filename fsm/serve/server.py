"""Running the application: bind, say where, serve until Ctrl-C (or SIGTERM), stop cleanly."""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO

import uvicorn

from fsm.base.errors import FsmError, InputError
from fsm.engine.instance import Workspace
from fsm.serve.access import MAX_BODY, Access, check_bind, new_token, read_token_file
from fsm.serve.app import create_app
from fsm.serve.connections import HEADER_TIMEOUT, IDLE_TIMEOUT, PER_CLIENT, guarded_protocol
from fsm.serve.drive import Driver
from fsm.serve.views import Served
from fsm.serve.watch import ChangeFeed, sources_of
from fsm.view.terminal import one_line

__all__ = ["ServeOptions", "run", "served_machines"]

GRACE_SECONDS = 2


@dataclass(frozen=True)
class ServeOptions:
    """How ``fsm serve`` was asked to listen."""

    host: str = "127.0.0.1"
    port: int = 8765
    allow_remote: bool = False
    token_file: Path | None = None
    max_body: int = MAX_BODY
    reads: str = "private"
    drive: int = 0
    """How many runnable instances the server drives at a time (0: it drives none)."""
    header_timeout: float = HEADER_TIMEOUT
    """Seconds a connection has to finish a request's headers (:mod:`fsm.serve.connections`)."""
    per_client: int = PER_CLIENT
    """Connections one client address may hold."""


class _Server(uvicorn.Server):
    """uvicorn's server, which also ends the event streams when told to stop: open streams
    would otherwise hold the graceful shutdown until its time limit."""

    def __init__(self, config: uvicorn.Config, feed: ChangeFeed) -> None:
        super().__init__(config)
        self.feed = feed
        self.loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.feed.close)


def run(served: Served, options: ServeOptions, out: TextIO = sys.stdout) -> None:
    """Serve ``served`` until interrupted; print the address (with the token) first."""
    check_bind(options.host, options.allow_remote)
    token = read_token_file(options.token_file) if options.token_file else new_token()
    listener = _bind(options.host, options.port)
    port = int(listener.getsockname()[1])
    if options.max_body < 1:
        raise InputError(f"--max-body {options.max_body} must be 1 or more")
    access = Access(
        token,
        options.host,
        port,
        remote=options.allow_remote,
        max_body=options.max_body,
        reads=options.reads,
    )
    if options.drive < 0:
        raise InputError(f"--workers {options.drive} must be 1 or more")
    feed = ChangeFeed(sources_of(served.workspace, served.machines.values()))

    def driver(changes: ChangeFeed) -> Driver:
        return Driver(served, changes, options.drive, out)

    app = create_app(served, access, feed, driver if options.drive else None)
    config = uvicorn.Config(
        app,
        http=guarded_protocol(options.header_timeout, options.per_client),
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_keep_alive=IDLE_TIMEOUT,
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    host = f"[{options.host}]" if ":" in options.host else options.host
    shown = "" if options.token_file else f"?token={token}"
    print(f"fsm serve: http://{host}:{port}/{shown}", file=out)
    print(f"  workspace {served.workspace.path}", file=out)
    print(f"  machines  {', '.join(sorted(served.machines)) or 'none'}", file=out)
    if options.token_file:
        print(f"  token     from {options.token_file} (open the URL with ?token=...)", file=out)
    if options.drive:
        print(f"  drives    runnable instances, {options.drive} at a time", file=out)
    print("  Ctrl-C stops", file=out, flush=True)
    try:
        _Server(config, feed).run(sockets=[listener])
    except KeyboardInterrupt:
        pass  # uvicorn raises the signal again once it has shut down cleanly
    finally:
        listener.close()
    print("fsm serve: stopped", file=out, flush=True)


def served_machines(workspace: Workspace, targets: Sequence[str]) -> Served:
    """The machines named (or at the paths) ``targets``, or every registered machine.

    A machine named on purpose that does not load is an error; one of the registered machines
    that does not load is left out with a warning, so the others can still be watched.
    """
    from fsm.model.discovery import open_machine, registered_machines

    served = Served(workspace, {})
    for target in targets or sorted(registered_machines()):
        try:
            machine = open_machine(target)
        except FsmError as exc:
            if targets:
                raise
            print(f"fsm: warning: {target} is not shown: {one_line(str(exc))}", file=sys.stderr)
            continue
        served.machines[machine.name] = machine
        served.sources[machine.name] = str(machine.path)
    return served


def _bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port} is not a port number (0 to 65535; 0 picks a free one)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(
                f"port {port} on {host} is in use: choose another with --port (0 picks a free one)"
            ) from exc
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    # (socket.gaierror, an unknown host name, is an OSError too)
    listener.listen(128)
    return listener
