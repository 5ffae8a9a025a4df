"""The PostgreSQL store and its workers, on demand (a server of its own, started here)::

    .venv/bin/python benchmarks/postgres_bench.py [--quick] [--instances N]

Ratios in one run, on one server (fsync and synchronous_commit on, as a real server commits):

* steps/s of ``fsm worker --drain --jobs N`` over 1,000 counters (limit 3: the start, three
  counts and the finish, each one committed transaction) for N = 1, 2, 4, 8, against a bare
  loop of the same shape on the same server: N processes that each claim a row (``FOR UPDATE
  SKIP LOCKED``), update its document, insert a journal row and commit (goal: at least 0.5x at
  every N);
* the same against the file store's ``fsm run --all --jobs N`` over the same counters;
* pause latency: from a pause's commit to the worker letting the instance go (it sees the pause
  at the next step boundary), p50 and p95 of many pauses at random moments;
* claim latency with 100,000 finished instances in the table against an empty one (the claim
  looks only at runnable rows, through a partial index: goal 1.0x).

Informs, never gates; exit code 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import psycopg
from common import COUNTER, command_env, fsm

from fsm.engine.control import ControlPlane
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from fsm.postgres.schema import migrate
from fsm.testing.postgres_cluster import TemporaryCluster

JOBS = (1, 2, 4, 8)
LIMIT = 3
STEPS_PER_INSTANCE = LIMIT + 2  # the start, the counts, the finish


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 counters, fewer pauses")
    parser.add_argument("--instances", type=int, default=None)
    args = parser.parse_args(argv)
    instances = args.instances or (200 if args.quick else 1000)
    with tempfile.TemporaryDirectory(prefix="fsm-pg-bench-") as temporary:
        folder = Path(temporary)
        with TemporaryCluster(settings={"fsync": "on", "full_page_writes": "on"}) as cluster:
            env = command_env(folder)
            print(f"{instances:,} counters, limit {LIMIT} ({STEPS_PER_INSTANCE} steps each)")
            for jobs in JOBS:
                bare = _bare(cluster, instances, jobs)
                workers = _workers(cluster, folder, env, instances, jobs)
                files = _files(folder, env, instances, jobs)
                print(
                    f"jobs {jobs}: fsm worker {workers:8,.0f} steps/s | bare loop {bare:8,.0f} "
                    f"steps/s | ratio {workers / bare:4.2f}x (goal >= 0.5x) | files run --all "
                    f"{files:8,.0f} steps/s ({workers / files:4.2f}x)"
                )
            p50, p95, count = _pauses(cluster, folder, 20 if args.quick else 60)
            print(f"pause latency over {count} pauses: p50 {p50:6.1f} ms, p95 {p95:6.1f} ms")
            empty, full = _claims(cluster, folder, 100 if args.quick else 300)
            from fsm.postgres.database import close_all

            close_all()  # before the server goes
            print(
                f"claim latency: {full:5.2f} ms with 100,000 finished instances, {empty:5.2f} ms "
                f"with none: ratio {full / empty:4.2f}x (goal ~1.0x)"
            )
    return 0


def _database(cluster: TemporaryCluster) -> str:
    url = cluster.new_database("fsm_bench")
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


def _counters(workspace: Path, count: int) -> None:
    machine = load_machine(COUNTER)
    space = Workspace(workspace)
    for number in range(count):
        space.instance(machine, f"c{number:05d}").create({"limit": LIMIT})


def _workers(
    cluster: TemporaryCluster, folder: Path, env: dict[str, str], count: int, jobs: int
) -> float:
    """Steps per second of ``fsm worker --drain --jobs N`` over ``count`` new counters."""
    url = _database(cluster)
    workspace = folder / f"workers-{jobs}"
    workspace.mkdir()
    (workspace / "fsm.toml").write_text(f'[store]\nurl = "{url}"\n')
    _counters(workspace, count)
    from fsm.postgres.database import close_all

    close_all()
    argv = fsm("worker", str(COUNTER), "--drain", "--jobs", str(jobs))
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count(": completed") == count, done.stdout[-2000:]
    return count * STEPS_PER_INSTANCE / elapsed


def _files(folder: Path, env: dict[str, str], count: int, jobs: int) -> float:
    """Steps per second of the file store's ``fsm run --all --jobs N`` over ``count`` counters."""
    workspace = folder / f"files-{jobs}"
    workspace.mkdir()
    _counters(workspace, count)
    argv = fsm("run", "--all", str(COUNTER), "--jobs", str(jobs))
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    return count * STEPS_PER_INSTANCE / elapsed


_BARE_CLAIM = """
SELECT id, count FROM bench WHERE count < %s ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
"""


def _bare(cluster: TemporaryCluster, count: int, jobs: int) -> float:
    """Steps per second of ``jobs`` processes that each loop: claim a row (FOR UPDATE SKIP
    LOCKED), update its document, insert a journal row, commit; until every row counted
    ``STEPS_PER_INSTANCE`` times. Processes are started before the clock, as workers are
    part of their own figure (their start is timed there)."""
    url = cluster.new_database("fsm_bare")
    document = b'{"status": "running", "phase": "counting", "count": 0, "limit": 3}\n' * 2
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench (id int PRIMARY KEY, raw bytea, count int)")
        conn.execute("CREATE TABLE journal (id int, position int, line text)")
        conn.execute(f"CREATE INDEX ON bench (id) WHERE count < {STEPS_PER_INSTANCE}")
        conn.execute(
            "INSERT INTO bench SELECT n, %s, 0 FROM generate_series(1, %s) n", (document, count)
        )
    program = (
        "import sys, psycopg\n"
        "conn = psycopg.connect(sys.argv[1], autocommit=True)\n"
        "sys.stdin.readline()\n"
        "while True:\n"
        "    with conn.transaction():\n"
        f"        row = conn.execute('''{_BARE_CLAIM}''', ({STEPS_PER_INSTANCE},)).fetchone()\n"
        "        if row is None:\n"
        "            break\n"
        "        conn.execute('UPDATE bench SET raw = %s, count = count + 1 WHERE id = %s',"
        " (sys.argv[2].encode() * 2, row[0]))\n"
        "        conn.execute('INSERT INTO journal VALUES (%s, %s, %s)',"
        ' (row[0], row[1] + 1, \'{"kind":"transition","event":"count"}\'))\n'
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", program, url, document.decode()[: len(document) // 2]],
            stdin=subprocess.PIPE,
            text=True,
        )
        for _ in range(jobs)
    ]
    time.sleep(1.0)  # connected
    start = time.perf_counter()
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        process.wait()
    elapsed = time.perf_counter() - start
    return count * STEPS_PER_INSTANCE / elapsed


def _pauses(cluster: TemporaryCluster, folder: Path, rounds: int) -> tuple[float, float, int]:
    """Pause a running counter at random moments while a worker drives it: the milliseconds
    from the pause's commit until the worker lets the instance go (p50, p95)."""
    url = _database(cluster)
    workspace = folder / "pauses"
    workspace.mkdir()
    (workspace / "fsm.toml").write_text(f'[store]\nurl = "{url}"\n')
    machine = load_machine(COUNTER)
    instance = Workspace(workspace).instance(machine, "p1")
    instance.create({"limit": 10_000_000})
    ControlPlane(instance).apply("start")
    worker = subprocess.Popen(
        fsm("worker", str(COUNTER)),
        cwd=workspace,
        env=command_env(folder),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    latencies: list[float] = []
    chosen = random.Random(1)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(rounds):
                _until(conn, "holder IS NOT NULL")
                time.sleep(chosen.uniform(0.05, 0.2))
                ControlPlane(instance).apply("pause")
                paused = time.perf_counter()
                _until(conn, "holder IS NULL")
                latencies.append((time.perf_counter() - paused) * 1000)
                ControlPlane(instance).apply("resume")
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    return statistics.median(latencies), p95, len(latencies)


def _until(conn: psycopg.Connection, condition: str) -> None:
    while True:
        row = conn.execute(f"SELECT {condition} FROM fsm_instances WHERE id = 'p1'").fetchone()
        if row and row[0]:
            return
        time.sleep(0.0005)


def _claims(cluster: TemporaryCluster, folder: Path, rounds: int) -> tuple[float, float]:
    """Median milliseconds of a claim (and its release) among 100 runnable instances, with no
    finished instance in the table, then with 100,000."""
    from fsm.postgres.store import PostgresStore

    url = _database(cluster)
    workspace = folder / "claims"
    workspace.mkdir()
    (workspace / "fsm.toml").write_text(f'[store]\nurl = "{url}"\n')
    machine = load_machine(COUNTER)
    space = Workspace(workspace)
    for number in range(100):
        space.instance(machine, f"r{number:03d}").create({"limit": 3})
    store = space.store_for(machine)
    assert isinstance(store, PostgresStore)
    empty = _claim_times(store, rounds)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO fsm_instances (space, machine, id, raw, version, state, status, "
            "runnable, records) SELECT %s, %s, 'done-' || n, %s, 1, 'done', 'done', false, 5 "
            "FROM generate_series(1, 100000) n",
            (store.space, store.machine, b'{"status": "done", "phase": "done"}\n'),
        )
        conn.execute("ANALYZE fsm_instances")
    full = _claim_times(store, rounds)
    return empty, full


def _claim_times(store: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        claim = store.claim(None)  # type: ignore[attr-defined]
        times.append((time.perf_counter() - start) * 1000)
        assert claim is not None
        claim.release()
    return statistics.median(times)


if __name__ == "__main__":
    os.environ.pop("FSM_STORE", None)
    threading.current_thread().name = "bench"
    sys.exit(main())
