"""A simulated CCW dashboard: a long-lived process that rewrites a document on command.

It reads one JSON command per line on stdin and answers one JSON line on stdout. A command names
the document, the operation (``pause``, ``stop``, ``resume``, ``title``, ``key``), the value to
write, how to write (``inplace``: open with truncate and write, without any lock, as Node's
``writeFileSync`` does; ``rename``: a temporary file renamed over the document), how long to
wait before reading (``delay``) and between reading and writing (``think``, the time a real
dashboard spends parsing and rendering). The answer says whether it wrote, what it read, and
when its write returned (``time.monotonic``, which all processes of the machine share).

It imports nothing of fsm: it is another program.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_WROTE: list[int] = []
KEY = "dashboard_note"
"""The key the dashboard adds to documents (the counter's model does not define it)."""


def _read(path: str) -> dict[str, Any]:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data: dict[str, Any] = json.loads(b"".join(chunks))
    return data


def _write(path: str, data: dict[str, Any], mode: str, stall: float = 0.0) -> None:
    raw = json.dumps(data, indent=2).encode("utf-8")
    if mode == "inplace":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        _WROTE.append(os.fstat(fd).st_ino)
        try:
            if stall:  # descheduled between the truncation and the write (a busy machine)
                time.sleep(stall)
            os.write(fd, raw)
        finally:
            os.close(fd)
        return
    tmp = f"{path}.dashboard-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, raw)
    finally:
        os.close(fd)
    os.rename(tmp, path)


def _changed(op: str, data: dict[str, Any], value: str) -> bool:
    """Apply ``op`` to ``data`` as the dashboard's API would; False when it refuses."""
    status = data.get("status")
    if op == "pause":
        if status != "running":
            return False
        data["status"] = "paused"
    elif op == "resume":
        if status != "paused":
            return False
        data["status"] = "running"
    elif op == "stop":
        if status not in ("created", "running", "paused"):
            return False
        data.update(status="failed", phase="failed", failure_reason=value)
    elif op == "title":
        data["title"] = value
    elif op == "key":
        data[KEY] = value
    else:
        raise ValueError(f"unknown operation {op!r}")
    return True


def handle(command: dict[str, Any]) -> dict[str, Any]:
    """Carry out one command; return the answer."""
    time.sleep(command.get("delay", 0.0))
    path = command["path"]
    data = _read(path)
    read_inode = os.stat(path).st_ino
    seen = {name: data.get(name) for name in ("status", "phase", "count", "title", KEY)}
    seen["inode"] = read_inode
    applied = _changed(command["op"], data, command.get("value", ""))
    if applied:
        data["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        think = command.get("think", 0.0)
        if think:
            time.sleep(think)
        _write(path, data, command.get("mode", "inplace"), command.get("stall", 0.0))
    wrote = _WROTE.pop() if _WROTE else None
    return {"applied": applied, "seen": seen, "returned": time.monotonic(), "inode": wrote}


def main() -> None:
    """Serve commands until stdin closes."""
    for line in sys.stdin:
        try:
            answer = handle(json.loads(line))
        except Exception as exc:  # the test reads it and fails with it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
