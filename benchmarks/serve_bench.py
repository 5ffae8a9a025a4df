"""`fsm serve`: the instances page over 2,000 counters, over HTTP from a running server."""

from __future__ import annotations

import http.client
import json
import re
import statistics
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from common import COUNTER, Result, best_of, command_env, fsm, median_runs, timed


def instances_page(folder: Path, times: int) -> list[Result]:
    """The instances page of ``fsm serve`` over 2,000 counters (the page and the first page of
    rows it fetches) vs ``fsm ls --json`` over the same files as a command, and vs 300 ms.

    The command runs without fsm's cache: like the page, it then reads every document (with its
    index, ``fsm ls`` reads only the documents that changed since it last listed them)."""
    workspace = folder / "serve"
    (workspace / ".counters").mkdir(parents=True)
    for number in range(2000):
        data = {"status": "running", "phase": "counting", "count": number, "limit": 10**6}
        (workspace / ".counters" / f"c{number:05d}.json").write_text(json.dumps(data, indent=2))
    env = command_env(folder)
    server = subprocess.Popen(
        fsm("serve", "--port", "0", str(COUNTER)),
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        found = re.search(r"http://\S+", server.stdout.readline())
        assert found is not None, "fsm serve did not start"
        address = urlsplit(found.group())
        connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)

        def page() -> None:
            for path in ("/", "/api/instances?limit=100"):
                connection.request("GET", path)
                answer = connection.getresponse()
                answer.read()
                assert answer.status == 200, path

        page()  # warm up
        ours = statistics.median(best_of(page, 1, repeat=1) for _ in range(times))
        connection.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    listing = ["env", "FSM_CACHE_DIR=", *fsm("ls", str(COUNTER), "--json")]
    (theirs,) = median_runs([listing], workspace, env, times)
    return [
        timed("serve instances page (2,000) vs fsm ls, no cache", ours, theirs, 1.0),
        timed("serve instances page (2,000) vs 300 ms", ours, 0.300, 1.0),
    ]
