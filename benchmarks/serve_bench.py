"""`fsm serve`: the instances page over 10,000 counters, over HTTP from a running server, alone
and under twenty clients."""

from __future__ import annotations

import http.client
import json
import re
import statistics
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from common import COUNTER, Result, command_env, fsm, timed

INSTANCES = 10_000
CLIENTS = 20
REQUESTS = 10
"""Listings each of the clients asks for, one after the other."""
FIRST_ROWS = "/api/instances?limit=100"


def instances_page(folder: Path, times: int) -> list[Result]:
    """The page and its first 100 rows over 10,000 counters, then the p95 of the first rows
    under twenty clients; each against a plain read of the same rows (reading and parsing the
    10,000 documents, in this process: what every request cost before the listing kept its rows
    current from the change feed) and against 300 ms."""
    workspace = folder / "serve"
    counters = workspace / ".counters"
    counters.mkdir(parents=True)
    for number in range(INSTANCES):
        data = {"status": "running", "phase": "counting", "count": number, "limit": 10**6}
        (counters / f"c{number:05d}.json").write_text(json.dumps(data, indent=2))
    plain = statistics.median(_plain_read(counters) for _ in range(max(1, times)))
    server = subprocess.Popen(
        fsm("serve", "--port", "0", str(COUNTER)),
        cwd=workspace,
        env=command_env(folder),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        found = re.search(r"http://\S+", server.stdout.readline())
        assert found is not None, "fsm serve did not start"
        address = urlsplit(found.group())
        host, port = address.hostname or "", address.port or 0
        _get(host, port, FIRST_ROWS)  # waits for the listing made when the server started

        def page() -> float:
            start = time.perf_counter()
            for path in ("/", FIRST_ROWS):
                _get(host, port, path)
            return time.perf_counter() - start

        first = statistics.median(page() for _ in range(max(3, times)))
        p95 = _loaded(host, port)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return [
        timed(f"serve first rows ({INSTANCES:,}) vs a plain read of them", first, plain, 0.5),
        timed(f"serve first rows ({INSTANCES:,}) vs 300 ms", first, 0.300, 1.0),
        timed(f"serve p95, {CLIENTS} clients ({INSTANCES:,}) vs a plain read", p95, plain, 1.0),
        timed(f"serve p95, {CLIENTS} clients ({INSTANCES:,}) vs 300 ms", p95, 0.300, 1.0),
    ]


def _plain_read(folder: Path) -> float:
    start = time.perf_counter()
    for path in folder.iterdir():
        json.loads(path.read_bytes())
    return time.perf_counter() - start


def _get(host: str, port: int, path: str) -> None:
    connection = http.client.HTTPConnection(host, port, timeout=120)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200, (path, answer.status)
    finally:
        connection.close()


def _loaded(host: str, port: int) -> float:
    """The 95th percentile of the first rows' time while twenty clients ask for them."""
    times: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(REQUESTS):
            start = time.perf_counter()
            _get(host, port, FIRST_ROWS)
            with lock:
                times.append(time.perf_counter() - start)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statistics.quantiles(times, n=20)[-1]
