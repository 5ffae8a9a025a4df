"""Who is driving an instance: the heartbeat a run publishes while it drives one.

A run (``fsm run``, each instance of ``fsm run --all``, a worker) publishes a
:class:`Heartbeat` when it takes the instance, again whenever the action in progress changes
(checked every :data:`INTERVAL` seconds) and at least every :data:`REFRESH` seconds, and removes
it when it lets go. A reader (``fsm serve``'s page) takes a heartbeat for a live driver while it
is fresh (:meth:`Heartbeat.alive`): younger than :data:`STALE` seconds, and, when it was
published on this host, from a process that still exists, so a run killed outright stops
counting at once on its own host and within :data:`STALE` seconds elsewhere.

Where heartbeats are kept is the store's business, behind :class:`Heartbeats` (publish, clear,
read). A store that has a ``heartbeats()`` method returning one is asked for it (a database
store keeps them in a table, so that a server on another host sees workers everywhere);
otherwise they are a small JSON file, ``driver.json``, in the instance's meta folder
(:class:`FileHeartbeats`), which is where the instance's other records of this host live.

Publishing runs on a thread of its own (:class:`Pulse`): the steps only note the action they
start (an attribute set), so a step costs nothing more while nobody asks.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fsm.base.clock import iso_utc
from fsm.base.files import process_alive

if TYPE_CHECKING:
    from fsm.store.protocol import Store

__all__ = [
    "INTERVAL",
    "REFRESH",
    "STALE",
    "FileHeartbeats",
    "Heartbeat",
    "Heartbeats",
    "Pulse",
    "heartbeats_of",
]

INTERVAL = 1.0
"""Seconds between two looks at what the run is doing."""
REFRESH = 5.0
"""Seconds after which a heartbeat is published again even when nothing changed."""
STALE = 15.0
"""Seconds after which a heartbeat no longer counts: its run is gone."""
FILE_NAME = "driver.json"


@dataclass(frozen=True)
class Heartbeat:
    """What a run driving an instance says of itself."""

    host: str
    pid: int
    driver: str
    """Who drives: the run's actor (``run``, ``run-all``, ``serve``, ``worker``)."""
    started: str
    """When the run took the instance (ISO 8601, UTC)."""
    beat: float
    """When this heartbeat was published (seconds since the epoch)."""
    state: str | None = None
    action: str | None = None
    """The action in progress (None between actions)."""
    action_started: float | None = None
    """When it started (seconds since the epoch)."""

    def alive(self, now: float | None = None) -> bool:
        """True while the heartbeat is fresh, and its process exists when it is of this host."""
        now = time.time() if now is None else now
        if now - self.beat > STALE:
            return False
        if self.host == socket.gethostname():
            return process_alive(self.pid)
        return True

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Heartbeat | None:
        """The heartbeat ``data`` holds, or None when it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            beat = cls(
                host=str(data["host"]),
                pid=int(data["pid"]),
                driver=str(data["driver"]),
                started=str(data["started"]),
                beat=float(data["beat"]),
                state=None if data.get("state") is None else str(data["state"]),
                action=None if data.get("action") is None else str(data["action"]),
                action_started=(
                    None if data.get("action_started") is None else float(data["action_started"])
                ),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return beat


class Heartbeats(Protocol):
    """Where the heartbeats of one machine's instances are kept (a store may supply its own:
    see the module docstring)."""

    def publish(self, instance_id: str, heartbeat: Heartbeat) -> None:
        """Keep ``heartbeat`` as the instance's, replacing the one before."""
        ...

    def clear(self, instance_id: str, heartbeat: Heartbeat) -> None:
        """Remove the instance's heartbeat if it is still this one's (same host and pid)."""
        ...

    def read(self, instance_id: str) -> Heartbeat | None:
        """The instance's latest heartbeat, alive or not (None when there is none)."""
        ...


class FileHeartbeats:
    """Heartbeats as ``driver.json`` in each instance's meta folder (written whole, then
    renamed over the one before: a reader never sees half of one)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _path(self, instance_id: str) -> Path:
        return self.store.folders(instance_id).meta / FILE_NAME

    def publish(self, instance_id: str, heartbeat: Heartbeat) -> None:
        path = self._path(instance_id)
        mode = self.store.permissions(instance_id)
        data = json.dumps(heartbeat.to_json()).encode()
        tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        except FileNotFoundError:
            return  # no meta folder (yet): the next beat tries again
        try:
            if mode is not None:
                os.fchmod(fd, mode & 0o666)
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def clear(self, instance_id: str, heartbeat: Heartbeat) -> None:
        current = self.read(instance_id)
        if current is not None and (current.host, current.pid) == (heartbeat.host, heartbeat.pid):
            with contextlib.suppress(FileNotFoundError):
                self._path(instance_id).unlink()

    def read(self, instance_id: str) -> Heartbeat | None:
        path = self._path(instance_id)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            data = os.read(fd, 65536)
        except OSError:
            return None
        finally:
            os.close(fd)
        try:
            return Heartbeat.from_json(json.loads(data))
        except ValueError:
            return None


def heartbeats_of(store: Store) -> Heartbeats:
    """The heartbeats of ``store``'s instances: the store's own, else files in their meta
    folders."""
    own = getattr(store, "heartbeats", None)
    if callable(own):
        found: Heartbeats = own()
        return found
    return FileHeartbeats(store)


class Pulse:
    """Publishes the heartbeat of one run of one instance while it drives it."""

    def __init__(
        self, heartbeats: Heartbeats, instance_id: str, driver: str, state: str | None = None
    ) -> None:
        self.heartbeats = heartbeats
        self.id = instance_id
        now = time.time()
        self.current = Heartbeat(
            host=socket.gethostname(),
            pid=os.getpid(),
            driver=driver,
            started=iso_utc_now(now),
            beat=now,
            state=state,
        )
        self.action: tuple[str | None, float | None, str | None] = (None, None, state)
        """Set by the run at each action: (action, when it started, state)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def doing(self, action: str | None, state: str | None) -> None:
        """The run starts ``action`` in ``state`` (None: between actions)."""
        self.action = (action, time.time() if action is not None else None, state)

    @contextlib.contextmanager
    def running(self) -> Iterator[Pulse]:
        """Publish now, then every so often until the block ends; then remove it."""
        self._publish()
        self._thread = threading.Thread(target=self._beat, name="fsm-heartbeat", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            with contextlib.suppress(OSError):
                self.heartbeats.clear(self.id, self.current)

    def _beat(self) -> None:
        published = self.action
        while not self._stop.wait(INTERVAL):
            now = time.time()
            if self.action != published or now - self.current.beat >= REFRESH:
                published = self.action
                self._publish()

    def _publish(self) -> None:
        action, started, state = self.action
        self.current = replace(
            self.current, beat=time.time(), action=action, action_started=started, state=state
        )
        with contextlib.suppress(OSError):
            self.heartbeats.publish(self.id, self.current)


def iso_utc_now(now: float) -> str:
    """``now`` (seconds since the epoch) as ISO 8601 UTC with milliseconds."""
    from datetime import UTC, datetime

    return iso_utc(datetime.fromtimestamp(now, UTC))
