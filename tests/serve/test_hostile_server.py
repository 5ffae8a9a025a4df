"""A real ``fsm serve`` process under abuse and under load: requests are refused from their
headers before their bodies are sent (so nothing of them is read), a 20 MB create is refused with
nothing written, the server's memory does not grow with what it refused, and twenty clients
polling every read route while a run changes an instance all get valid answers."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from tests.conftest import COUNTER
from tests.serve.conftest import ServeProcess, fsm_env

MIB = 1024 * 1024
ANSWER_WAIT = 20.0
"""Seconds a refusal may take to arrive (a hang, not a speed: no answer means the server
waited for a body that was never sent)."""


def _address(server: ServeProcess) -> tuple[str, int]:
    parts = urlsplit(server.base)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _rss(server: ServeProcess) -> int:
    """The server process's resident memory, in bytes."""
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _head_only(server: ServeProcess, headers: dict[str, str], sent: bytes = b"") -> int:
    """Send a POST create's request line and headers (and ``sent``, a first piece of a body
    that would be far larger), never the rest; return the status the server answers."""
    host, port = _address(server)
    lines = ["POST /api/instances/counter HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection((host, port), timeout=ANSWER_WAIT) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + sent)
        answer = b""
        while b"\r\n" not in answer:
            piece = conn.recv(4096)
            if not piece:
                break
            answer += piece
    status_line = answer.split(b"\r\n", 1)[0].decode()
    assert status_line.startswith("HTTP/1.1 "), answer[:200]
    return int(status_line.split()[1])


def _request(
    server: ServeProcess, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, Any]:
    host, port = _address(server)
    connection = http.client.HTTPConnection(host, port, timeout=120)
    try:
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        data = answer.read()
    finally:
        connection.close()
    kind = answer.getheader("Content-Type", "")
    return answer.status, json.loads(data) if kind.startswith("application/json") else data


def _bearer(server: ServeProcess) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}


@pytest.fixture
def server(tmp_path: Path, start_serve: Callable[..., ServeProcess]) -> ServeProcess:
    """``fsm serve`` of the counter over an empty workspace, with the default --max-body."""
    return start_serve(tmp_path, str(COUNTER))


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({"Content-Length": str(300 * MIB)}, 401, id="unauthenticated-300MB"),
        pytest.param(
            {"Content-Length": str(300 * MIB), "Authorization": "Bearer wrong-token"},
            401,
            id="wrong-token-300MB",
        ),
        pytest.param(
            {"Content-Length": str(300 * MIB), "Origin": "http://evil.example", "token": ""},
            403,
            id="other-origin-300MB",
        ),
        pytest.param({"Content-Length": str(20 * MIB), "token": ""}, 413, id="create-20MB"),
        pytest.param({"Content-Length": "12x", "token": ""}, 400, id="bad-length"),
    ],
)
def test_a_refused_request_is_answered_from_its_headers(
    server: ServeProcess, tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    """Token, origin and size are judged from the headers: the refusal comes while the body
    (all but its first 64 KiB) was never sent, the server's memory does not grow by what the
    body announced, and nothing is written."""
    if "token" in headers:
        headers = {k: v for k, v in headers.items() if k != "token"}
        headers["Authorization"] = f"Bearer {server.token}"
    headers["Content-Type"] = "application/json"
    before = _rss(server)
    for _ in range(3):
        assert _head_only(server, headers, b"x" * 65536) == status
    assert _rss(server) - before < 20 * MIB
    assert not (tmp_path / ".counters").exists()
    assert _request(server, "GET", "/api/instances")[0] == 200  # still serving


def test_a_chunked_body_past_the_limit_is_cut_off(server: ServeProcess, tmp_path: Path) -> None:
    """A body that gives no length is read only up to the limit: 100 MB sent in chunks gets a
    413 (the connection is closed on the rest), the server stays small, nothing is written."""
    host, port = _address(server)
    before = _rss(server)
    head = (
        f"POST /api/instances/counter HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (MIB, b"x" * MIB)
    answer = b""
    with socket.create_connection((host, port), timeout=ANSWER_WAIT) as conn:
        conn.sendall(head.encode())
        try:
            for _ in range(100):
                conn.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection on the rest: what it should do
        try:
            while b"\r\n" not in answer:
                piece = conn.recv(4096)
                if not piece:
                    break
                answer += piece
        except ConnectionResetError:
            pass
    if answer:
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert _rss(server) - before < 40 * MIB
    assert not (tmp_path / ".counters").exists()
    assert _request(server, "GET", "/api/instances")[0] == 200


def test_a_20_mb_create_is_refused_and_nothing_is_written(
    tmp_path: Path, start_serve: Callable[..., ServeProcess]
) -> None:
    """With the body limit raised past 20 MB, a create whose 20 MB title would make a document
    larger than a document may be (16 MiB) is a 413 naming why, and nothing is written: no
    instance, no folder; a create within the limits then works."""
    server = start_serve(tmp_path, str(COUNTER), "--max-body", str(64 * MIB))
    body = json.dumps({"id": "big", "inputs": {"limit": 1, "title": "x" * (20 * MIB)}}).encode()
    status, answer = _request(server, "POST", "/api/instances/counter", body, **_bearer(server))
    assert status == 413, answer
    assert "more than a document may hold (16.0 MiB): nothing was created" in answer["error"]
    assert not (tmp_path / ".counters").exists()
    status, listing = _request(server, "GET", "/api/instances")
    assert (status, listing["total"]) == (200, 0)
    small = json.dumps({"id": "small", "inputs": {"limit": 1}}).encode()
    status, created = _request(server, "POST", "/api/instances/counter", small, **_bearer(server))
    assert status == 201, created
    assert created["id"] == "small"


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        pytest.param("/api/instances?status=bogus", {}, 400, id="unknown-status"),
        pytest.param("/api/instances?since=yesterday", {}, 400, id="bad-since"),
        pytest.param("/api/instances/counter/-rf%20x", {}, 400, id="unsafe-id"),
        pytest.param("/api/instances/counter/nope", {}, 404, id="unknown-instance"),
        pytest.param("/api/instances", {"Host": "evil.example"}, 403, id="rebinding-host"),
    ],
)
def test_hostile_reads_are_refused_cleanly(
    server: ServeProcess, path: str, headers: dict[str, str], status: int
) -> None:
    """Bad filters, unsafe ids, unknown instances and a foreign Host header get their status
    and a JSON error, never a 500."""
    answered, body = _request(server, "GET", path, **headers)
    assert answered == status, body
    assert isinstance(body, dict)
    assert body["error"]


@pytest.mark.slow
def test_twenty_clients_polling_while_a_run_changes_an_instance(
    tmp_path: Path, start_serve: Callable[..., ServeProcess]
) -> None:
    """Twenty clients read every route 40 times each over their own connections while
    ``fsm run`` changes an instance in another process: every answer is a 200 with a valid
    body, and the server answers afterwards as before."""
    workspace = Workspace(tmp_path)
    counter = load_machine(COUNTER)
    for number in range(30):
        workspace.instance(counter, f"c{number:02d}").create({"limit": 3})
    workspace.instance(counter, "slow").create({"limit": 200})
    server = start_serve(tmp_path, str(COUNTER))
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fsm",
            "-C",
            str(tmp_path),
            "-o",
            "delay=0.05",
            "run",
            str(COUNTER),
            "slow",
            "-q",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=fsm_env(),
    )
    base = "/api/instances/counter/slow"
    routes = [
        "/api/instances?limit=100",
        "/api/instances?q=slow&status=running",
        base,
        f"{base}/history?limit=50",
        f"{base}/document",
        f"{base}/diagram.svg",
        f"{base}/versions/1",
    ]
    statuses: Counter[int] = Counter()
    problems: list[str] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        host, port = _address(server)
        connection = http.client.HTTPConnection(host, port, timeout=60)
        try:
            for turn in range(40):
                path = routes[(number + turn) % len(routes)]
                connection.request("GET", path)
                answer = connection.getresponse()
                data = answer.read()
                with lock:
                    statuses[answer.status] += 1
                if answer.status != 200:
                    problems.append(f"{path}: {answer.status} {data[:200]!r}")
                elif path.endswith(".svg"):
                    assert data.startswith(b"<svg") or b"<svg" in data[:400], path
                else:
                    json.loads(data)
        except Exception as exc:  # reported below, with the others
            problems.append(f"client {number}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(20)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    finally:
        run.terminate()
        run.communicate(timeout=60)
    assert problems == []
    assert statuses == {200: 20 * 40}
    assert _request(server, "GET", "/api/instances")[1]["total"] == 31
