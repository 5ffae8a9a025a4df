"""Connections that never finish their headers: a real ``fsm serve`` drops them within its
header timeout, and caps what one client holds, while complete requests are all answered."""

from __future__ import annotations

import http.client
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.serve.conftest import ServeProcess

SLOW = 1200
TIMEOUT = 2.0
pytestmark = pytest.mark.slow


def _open_files(server: ServeProcess) -> int:
    return len(os.listdir(f"/proc/{server.process.pid}/fd"))


def _get(host: str, port: int, path: str) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def test_slow_headers_are_dropped_and_complete_requests_served(
    tmp_path: Path, start_serve: Callable[..., ServeProcess]
) -> None:
    server = start_serve(tmp_path, "ccw-loop", "--header-timeout", str(TIMEOUT))
    parts = urlsplit(server.base)
    host, port = parts.hostname or "", parts.port or 0
    assert _get(host, port, "/api/machines") == 200
    before = _open_files(server)
    slow = []
    started = time.monotonic()
    for index in range(SLOW):
        conn = socket.create_connection((host, port), timeout=10)
        conn.sendall(
            f"GET /api/machines HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: {index}".encode()
        )
        slow.append(conn)
        if index % 100 == 0:  # complete requests meanwhile: all answered
            assert _get(host, port, "/api/machines") == 200
    # The cap: one client holds at most 64 connections, so most were dropped at once (the
    # server takes a moment to close the last ones it accepted).
    time.sleep(0.5)
    assert _open_files(server) <= before + 64 + 10
    # Each slow one is closed by the server (an end of stream or a reset) within the timeout.
    deadline = started + TIMEOUT + 5
    still_open = 0
    for conn in slow:
        conn.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            conn.recv(1)
        except TimeoutError:
            still_open += 1
        except ConnectionResetError:
            pass
        finally:
            conn.close()
    assert still_open == 0
    time.sleep(0.2)
    assert _open_files(server) <= before + 2
    assert _get(host, port, "/api/machines") == 200
