"""Watchers of the journal: who is told of every record the engine writes, whatever the store.

Every journal record of every instance is written by :class:`fsm.engine.transaction.Transaction`
(a step, a failure, a control command, a repair, a merge), on any store; it tells the watchers
registered here once the store has taken the records. A test session measuring which edges its
tests take (``pytest --fsm-cov``) watches this way instead of reading folders afterwards: an
instance kept in memory or in PostgreSQL counts like one in files.

With no watcher, a write costs one check of an empty list. A process started with
:data:`RECORDS_FILE` in its environment (an ``fsm`` command a test runs as a subprocess) appends
every record, with its machine's name and definition path, to that file as a JSON line, unless
it is the process that set the variable (:data:`OWNER_PID`), which watches in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from fsm.model.machine import Machine
from fsm.model.records import Record

__all__ = ["OWNER_PID", "RECORDS_FILE", "Watcher", "journaled", "watch", "watching"]

Watcher = Callable[[Machine, str, Sequence[Record]], None]
"""Called with the machine, the instance id and the records just written (in journal order)."""

RECORDS_FILE = "FSM_COVERAGE_RECORDS"
"""The environment variable naming the file every record is appended to (one JSON line each)."""
OWNER_PID = "FSM_COVERAGE_PID"
"""The process that set :data:`RECORDS_FILE` (it watches in memory: it does not append too)."""

_watchers: list[Watcher] = []


def watch(watcher: Watcher) -> Callable[[], None]:
    """Tell ``watcher`` of every record written from now on; return what stops it."""
    _watchers.append(watcher)

    def stop() -> None:
        if watcher in _watchers:
            _watchers.remove(watcher)

    return stop


def watching() -> bool:
    """Whether any watcher is registered (a writer skips building what nobody reads)."""
    return bool(_watchers)


def journaled(machine: Machine, instance_id: str, records: Sequence[Record]) -> None:
    """Tell every watcher of ``records``, just written to ``instance_id``'s journal."""
    for watcher in tuple(_watchers):
        watcher(machine, instance_id, records)


def _appender(path: Path) -> Watcher:
    def append(machine: Machine, instance_id: str, records: Sequence[Record]) -> None:
        lines = "".join(
            json.dumps(
                {
                    "machine": machine.name,
                    "path": str(machine.path),
                    "id": instance_id,
                    "record": record.to_json(),
                },
                separators=(",", ":"),
            )
            + "\n"
            for record in records
        )
        # One write of whole lines in append mode: processes appending at once do not interleave
        # lines of this size (POSIX appends are atomic per write on a local file).
        with path.open("a", encoding="utf-8") as out:
            out.write(lines)

    return append


def _watch_from_environment() -> None:
    target = os.environ.get(RECORDS_FILE)
    if not target or os.environ.get(OWNER_PID) == str(os.getpid()):
        return
    watch(_appender(Path(target)))


_watch_from_environment()
