"""A workspace on a real PostgreSQL server, with ``fsm worker`` processes: what the worker
tests drive and check."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from fsm.engine.control import ControlPlane
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine, load_machine
from fsm.model.records import TransitionRecord
from fsm.view.inspect import check_replay

MACHINE = Path(__file__).with_name("worker_counter") / "machine.yaml"
FSM = Path(sys.executable).with_name("fsm")
FINAL = ("done", "failed")


class Fleet:
    """A workspace whose store is the database at ``url``, and the workers started in it."""

    def __init__(self, path: Path, url: str, lease: float = 2.0, concurrency: int = 1) -> None:
        self.path = path
        self.url = url
        self.concurrency = concurrency
        """Instances each worker process drives at a time (``--concurrency``)."""
        path.mkdir(parents=True, exist_ok=True)
        (path / "fsm.toml").write_text(
            f'[store]\nurl = "{url}"\nlease = {lease}\nspace = "project"\n'
        )
        self.machine: Machine = load_machine(MACHINE)
        self.workspace = Workspace(path)
        self.workers: list[subprocess.Popen[str]] = []
        self.lines: dict[int, list[str]] = {}
        """What each worker printed, by pid."""
        self._readers: list[threading.Thread] = []

    def instance(self, instance_id: str) -> Instance:
        """A handle on one instance (in this process)."""
        return self.workspace.instance(self.machine, instance_id)

    def create(self, count: int, *, limit: int, delay: float = 0.0, prefix: str = "c") -> list[str]:
        """``count`` counters, created (a worker starts them)."""
        ids = [f"{prefix}{n:03d}" for n in range(count)]
        for instance_id in ids:
            self.instance(instance_id).create({"limit": limit, "delay": delay})
        return ids

    def control(self, instance_id: str, command: str) -> None:
        """Apply ``command`` (ControlRefusedError when it is refused)."""
        ControlPlane(self.instance(instance_id)).apply(command, actor="test")

    def worker(self, *arguments: str) -> subprocess.Popen[str]:
        """Start ``fsm worker`` on the machine in the workspace."""
        threads = ["--concurrency", str(self.concurrency)] if self.concurrency > 1 else []
        process = subprocess.Popen(
            [str(FSM), "worker", str(MACHINE), *threads, *arguments],
            cwd=self.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "FSM_CACHE_DIR": str(self.path / ".cache")},
        )
        self.workers.append(process)
        self.lines[process.pid] = []
        for stream in (process.stdout, process.stderr):
            reader = threading.Thread(
                target=_read, args=(stream, self.lines[process.pid]), daemon=True
            )
            reader.start()
            self._readers.append(reader)
        return process

    def said(self, process: subprocess.Popen[str], text: str) -> bool:
        """True once ``process`` printed a line holding ``text``."""
        return any(text in line for line in self.lines[process.pid])

    def rows(self) -> dict[str, dict[str, Any]]:
        """The instances' rows: status, state, holder, fence, records."""
        with psycopg.connect(self.url) as conn:
            found = conn.execute(
                "SELECT id, status, state, holder, fence, records FROM fsm_instances "
                "WHERE raw IS NOT NULL"
            ).fetchall()
        keys = ("status", "state", "holder", "fence", "records")
        return {row[0]: dict(zip(keys, row[1:], strict=True)) for row in found}

    def wait_until(self, done: Any, what: str, timeout: float = 180.0) -> None:
        """Wait until ``done()`` (AssertionError naming ``what`` after ``timeout``: a hang)."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"still waiting for {what}: {self.rows()}; {self.outputs()}")
            if any(p.poll() not in (None, 0) for p in self.workers):
                raise AssertionError(f"a worker failed while waiting for {what}: {self.outputs()}")
            time.sleep(0.1)

    def settled(self, ids: list[str], statuses: tuple[str, ...] = FINAL) -> bool:
        """True when every one of ``ids`` has one of ``statuses`` and no holder."""
        rows = self.rows()
        return all(rows[i]["status"] in statuses and rows[i]["holder"] is None for i in ids)

    def counted(self) -> int:
        """How many count steps are committed, over every instance."""
        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                'SELECT count(*) FROM fsm_journal WHERE line LIKE \'%%"event":"count"%%\' '
                'AND line LIKE \'%%"kind":"transition"%%\''
            ).fetchone()
        return int(row[0]) if row else 0

    def stop_workers(self) -> list[str]:
        """SIGTERM every worker still running; return each one's output (stdout, stderr)."""
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        outputs = []
        for process in self.workers:
            process.wait(timeout=120)
        for reader in self._readers:
            reader.join(timeout=60)
        for process in self.workers:
            output = "".join(self.lines[process.pid])
            assert process.returncode == 0, (process.returncode, output)
            outputs.append(output)
        return outputs

    def kill(self, process: subprocess.Popen[str]) -> None:
        """SIGKILL ``process`` and forget it."""
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        self.workers.remove(process)

    def outputs(self) -> str:
        """What the workers printed so far."""
        return " | ".join("".join(lines) for lines in self.lines.values())

    def effects(self) -> Counter[tuple[str, int]]:
        """How many times each (instance, count) command finished its work."""
        path = self.path / "effects.log"
        lines = path.read_text().split() if path.exists() else []
        return Counter((lines[n], int(lines[n + 1])) for n in range(0, len(lines), 2))

    def check(self, instance_id: str, *, count: int | None = None) -> Instance:
        """The instance's journal replays to its document, its records are numbered without a
        gap, and it counted exactly as many steps as its journal says (``count``, when given)."""
        instance = self.instance(instance_id)
        check_replay(instance)
        with psycopg.connect(self.url) as conn:
            positions = [
                row[0]
                for row in conn.execute(
                    "SELECT position FROM fsm_journal WHERE id = %s ORDER BY position",
                    (instance_id,),
                ).fetchall()
            ]
        assert positions == list(range(1, len(positions) + 1)), positions
        records = instance.journal.records()
        counts = [r for r in records if isinstance(r, TransitionRecord) and r.event == "count"]
        data = instance.load().data
        assert data["count"] == len(counts), (instance_id, data["count"], len(counts))
        if count is not None:
            assert data["count"] == count, (instance_id, data)
        return instance


def _read(stream: Any, lines: list[str]) -> None:
    with stream:
        for line in stream:
            lines.append(line)
