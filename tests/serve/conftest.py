"""A served workspace for API tests (the framework's test client) and real ``fsm serve`` runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fsm.engine.instance import Instance, Workspace
from fsm.model.discovery import open_machine
from fsm.model.machine import load_machine
from fsm.serve import Access, Served, create_app
from tests.conftest import COUNTER

TOKEN = "test-token-0123456789abcdef"
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass
class Api:
    """A test client of the application, and the workspace it serves."""

    client: TestClient
    workspace: Workspace
    served: Served

    def counter(self, instance_id: str, **values: Any) -> Instance:
        """Create a counter instance."""
        instance = self.workspace.instance(self.served.machines["counter"], instance_id)
        instance.create(values)
        return instance

    def instance(self, instance_id: str) -> Instance:
        """An instance of the counter."""
        return self.workspace.instance(self.served.machines["counter"], instance_id)

    def post(self, path: str, body: Any = None, **headers: str) -> Any:
        """POST with the token (``Authorization`` may be overridden)."""
        sent = {"Authorization": f"Bearer {TOKEN}", **headers}
        return self.client.post(path, json=body if body is not None else {}, headers=sent)


def make_served(path: Path) -> Served:
    """The counter and ccw-loop machines served over ``path``."""
    counter = load_machine(COUNTER)
    loop = open_machine("ccw-loop")
    return Served(Workspace(path), {"counter": counter, "ccw-loop": loop})


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    """The application on a fresh workspace, its lifespan (the watcher) running."""
    served = make_served(tmp_path)
    app = create_app(served, Access(TOKEN, "127.0.0.1", PORT))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        yield Api(client, served.workspace, served)


@dataclass
class ServeProcess:
    """A real ``fsm serve`` process."""

    process: subprocess.Popen[str]
    url: str

    @property
    def base(self) -> str:
        """The address without the token."""
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        """The token it printed."""
        return self.url.split("token=", 1)[1]


def fsm_env() -> dict[str, str]:
    """The environment of ``fsm`` processes started by tests."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def launch_serve(workspace: Path, *argv: str) -> ServeProcess:
    """Start ``fsm serve`` on a free port in ``workspace``; return once it printed its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fsm", "-C", str(workspace), "serve", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=fsm_env(),
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    match = re.match(r"fsm serve: (http://\S+)", first)
    if match is None:
        stop_serve(process)
        raise AssertionError(f"fsm serve did not start: {first!r}")
    return ServeProcess(process, match.group(1))


def stop_serve(process: subprocess.Popen[str]) -> None:
    """Stop a server started by :func:`launch_serve` and close its pipes."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def start_serve() -> Iterator[Callable[..., ServeProcess]]:
    """Start ``fsm serve`` processes (stopped at the end of the test)."""
    started: list[ServeProcess] = []

    def start(workspace: Path, *argv: str) -> ServeProcess:
        server = launch_serve(workspace, *argv)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_serve(server.process)


AGENT_RUN = {
    "tool": "codex",
    "mode": "write",
    "command": "codex exec --sandbox workspace-write --skip-git-repo-check --json {prompt}",
    "exit_code": 0,
    "ok": True,
    "duration_ms": 8200,
    "output": "codex-json",
    "version": "0.169.0",
    "final_message": "Added div to calc.py.",
    "files_changed": ["calc.py"],
    "exit_reason": "completed",
    "usage": {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 345},
}


def with_agent_run(instance: Instance) -> dict[str, Any]:
    """Append to ``instance``'s journal a step record carrying an agent run, as a step that
    ran an agent writes it; return the record."""
    last = instance.journal.read().records[-1]
    record = {**last, "kind": "transition", "agents": [AGENT_RUN]}
    instance.journal.append(record)
    return record
