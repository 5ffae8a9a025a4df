"""A real ``fsm serve``: pages learn of changes within a second, whoever makes them; Ctrl-C
stops it cleanly; a port in use is one clear line."""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fsm.model.discovery import registered_machines
from tests.conftest import COUNTER
from tests.serve.conftest import ROOT, ServeProcess, fsm_env, launch_serve, stop_serve

pytestmark = pytest.mark.slow

Event = tuple[str, Any]


class EventStream:
    """Reads ``/api/events`` in a thread; ``next()`` returns the next (event, data)."""

    def __init__(self, base: str, query: str = "") -> None:
        address = urlsplit(base)
        self.connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        self.connection.request("GET", f"/api/events{query}")
        self.socket = self.connection.sock
        self.response = self.connection.getresponse()
        assert self.response.status == 200
        self.events: queue.Queue[Event | None] = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        name, data = "message", ""
        try:
            for raw in self.response:
                line = raw.decode("utf-8").rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif not line and data:
                    self.events.put((name, json.loads(data)))
                    name, data = "message", ""
        except (OSError, ValueError, AttributeError):
            pass  # closed by the test (http.client drops its file then: AttributeError)
        self.events.put(None)  # the stream ended

    def next(self, timeout: float) -> Event | None:
        """The next event, or None when the stream ended; raises queue.Empty on timeout."""
        return self.events.get(timeout=timeout)

    def close(self) -> None:
        # Wake the reader first: closing the response waits for the read it is blocked in.
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        self.connection.close()


@pytest.fixture
def streams() -> Iterator[Callable[..., EventStream]]:
    opened: list[EventStream] = []

    def open_stream(base: str, query: str = "") -> EventStream:
        stream = EventStream(base, query)
        opened.append(stream)
        assert stream.next(10) == ("ready", {})
        return stream

    yield open_stream
    for stream in opened:
        stream.close()


def fsm(workspace: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``fsm`` in another process, as a person in a terminal would."""
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(workspace), *argv],
        capture_output=True,
        text=True,
        env=fsm_env(),
        check=True,
    )


def changes_until(stream: EventStream, wanted: Any, timeout: float) -> list[Any]:
    """The change events seen until ``wanted`` arrives (raises queue.Empty after ``timeout``)."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        event = stream.next(max(0.0, deadline - time.monotonic()))
        assert event is not None, "the stream ended"
        seen.append(event[1])
        if event == ("change", wanted):
            return seen


def test_a_change_made_by_another_process_reaches_the_page_within_a_second(
    tmp_path: Path,
    start_serve: Callable[..., ServeProcess],
    streams: Callable[..., EventStream],
) -> None:
    """``fsm start`` in another process is announced on the instance's stream in under a
    second; a stream filtered to another instance hears nothing of it."""
    fsm(tmp_path, "new", str(COUNTER), "--id", "c1")
    fsm(tmp_path, "new", str(COUNTER), "--id", "c2")
    server = start_serve(tmp_path, str(COUNTER))
    mine = streams(server.base, "?machine=counter&instance=c1")
    other = streams(server.base, "?machine=counter&instance=c2")
    every = streams(server.base)
    fsm(tmp_path, "start", str(COUNTER), "c1")
    done = time.monotonic()
    assert mine.next(1.0) == ("change", {"machine": "counter", "id": "c1"})
    assert time.monotonic() - done < 1.0
    changes_until(every, {"machine": "counter", "id": "c1"}, 1.0)
    with pytest.raises(queue.Empty):
        other.next(0.5)


def test_instances_folder_created_after_start_is_watched(
    tmp_path: Path,
    start_serve: Callable[..., ServeProcess],
    streams: Callable[..., EventStream],
) -> None:
    """In a workspace with no instances yet, the first ``fsm new`` makes the pages reload, and
    later changes of that instance are announced one by one."""
    server = start_serve(tmp_path, str(COUNTER))
    every = streams(server.base)
    fsm(tmp_path, "new", str(COUNTER), "--id", "first")
    first = every.next(2.0)
    assert first is not None
    assert first[1] in ({"machine": None, "id": None}, {"machine": "counter", "id": "first"})
    time.sleep(0.3)  # the watch of the new folder has started again
    fsm(tmp_path, "start", str(COUNTER), "first")
    changes_until(every, {"machine": "counter", "id": "first"}, 1.5)


def test_a_removed_instances_folder_is_watched_again(
    tmp_path: Path,
    start_serve: Callable[..., ServeProcess],
    streams: Callable[..., EventStream],
) -> None:
    """Removing the folder of the instances makes the pages reload; once it is back, changes
    of its instances are announced again."""
    fsm(tmp_path, "new", str(COUNTER), "--id", "old")
    server = start_serve(tmp_path, str(COUNTER))
    every = streams(server.base)
    shutil.rmtree(tmp_path / ".counters")
    changes_until(every, {"machine": None, "id": None}, 2.0)
    fsm(tmp_path, "new", str(COUNTER), "--id", "new")
    time.sleep(0.5)  # the watch of the folder has started again
    fsm(tmp_path, "start", str(COUNTER), "new")
    changes_until(every, {"machine": "counter", "id": "new"}, 2.0)


def test_ctrl_c_stops_cleanly_with_pages_open(
    tmp_path: Path,
    start_serve: Callable[..., ServeProcess],
    streams: Callable[..., EventStream],
) -> None:
    """SIGINT ends the event streams and the server: exit 0, 'stopped', within seconds."""
    fsm(tmp_path, "new", str(COUNTER), "--id", "c1")
    server = start_serve(tmp_path, str(COUNTER))
    stream = streams(server.base)
    started = time.monotonic()
    server.process.send_signal(signal.SIGINT)
    out, err = server.process.communicate(timeout=10)
    assert time.monotonic() - started < 5
    assert server.process.returncode == 0, err
    assert out.rstrip().endswith("fsm serve: stopped")
    assert "Traceback" not in err
    assert stream.next(5) is None  # the page's stream was ended, not cut


def test_a_port_in_use_is_one_clear_line(
    tmp_path: Path, start_serve: Callable[..., ServeProcess]
) -> None:
    """A second server on the same port exits 2 saying the port is in use."""
    server = start_serve(tmp_path, str(COUNTER))
    port = str(urlsplit(server.base).port)
    second = subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(tmp_path), "serve", "--port", port],
        check=False,
        capture_output=True,
        text=True,
        env=fsm_env(),
        timeout=30,
    )
    assert second.returncode == 2
    assert second.stderr.strip() == (
        f"fsm: error: port {port} on 127.0.0.1 is in use: choose another with --port "
        "(0 picks a free one)"
    )


def readme_serve_lines() -> list[list[str]]:
    """The arguments of each ``fsm serve`` line of the README's serve block."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- readme-test: serve[^>]*-->\n```bash\n(.*?)```", text, re.S)
    assert block is not None, "the README has no serve block"
    lines = [line.split("#")[0].split() for line in block.group(1).splitlines()]
    assert all(words[:2] == ["fsm", "serve"] for words in lines)
    return [words[2:] for words in lines]


def test_the_readme_lines_start_what_they_say(tmp_path: Path) -> None:
    """Each ``fsm serve`` line of the README starts a server showing the machines it names
    (on a free port instead of the one it shows)."""
    expected = [sorted(registered_machines()), ["ccw-loop"]]
    lines = readme_serve_lines()
    assert len(lines) == len(expected)
    for argv, machines in zip(lines, expected, strict=True):
        free = re.sub(r"--port \d+", "", " ".join(argv)).split()
        server = launch_serve(tmp_path, *free)
        try:
            address = urlsplit(server.base)
            connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
            connection.request("GET", "/api/machines")
            shown = [m["name"] for m in json.loads(connection.getresponse().read())]
            connection.close()
        finally:
            stop_serve(server.process)
        assert shown == machines
