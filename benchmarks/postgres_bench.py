"""The PostgreSQL store and its workers (a server of its own, started here)::

    .venv/bin/python benchmarks/postgres_bench.py [--quick] [--repeat K] [--instances N]
    .venv/bin/python benchmarks/run.py --only postgres        # the same, as part of the table

Ratios in one run, on one server (fsync and synchronous_commit on, as a real server commits):

* steps/s of ``fsm worker --drain --jobs N`` over 1,000 counters (limit 3: the start, three
  counts and the finish, each one committed transaction) for N = 1, 2, 4, 8, against a bare
  loop of the same shape on the same server: N processes that each claim a row (``FOR UPDATE
  SKIP LOCKED``), update its document, insert a journal row and commit (goal: at least 0.5x at
  every N, that is the worker's time at most 2x the loop's);
* the same against the file store's ``fsm run --all --jobs N`` over the same counters (shown for
  information);
* pause latency: from a pause's commit to the worker letting the instance go (it sees the pause
  at the next step boundary), p50 and p95 of many pauses at random moments;
* claim latency with 100,000 finished instances in the table against an empty one (the claim
  looks only at runnable rows, through a partial index: no slowdown).

Each figure is measured ``--repeat`` times (3 by default), the worker and its baseline one
right after the other each time, and the pair with the median ratio is shown: the machine's
load moves both sides of a pair alike, and a busy moment moves no median. Without a PostgreSQL
server or psycopg, it says so in one line and measures nothing. Informs, never gates; exit code
0 whatever the figures.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from common import COUNTER, Result, command_env, fsm

JOBS = (1, 2, 4, 8)
LIMIT = 3
STEPS_PER_INSTANCE = LIMIT + 2  # the start, the counts, the finish
INSTANCES = 1000
FINISHED = 100_000


def missing() -> str | None:
    """Why this benchmark cannot run here (None: it can)."""
    try:
        import psycopg  # noqa: F401

        from fsm.testing.postgres_cluster import ClusterUnavailable, find_bindir
    except ImportError as exc:
        return f"psycopg is not installed ({exc}): pip install -e '.[postgres]'"
    try:
        find_bindir()
    except ClusterUnavailable as exc:
        return str(exc)
    return None


def postgres(folder: Path, rounds: int, *, instances: int = INSTANCES) -> list[Result]:
    """Every figure of this benchmark, each the pair with the median ratio of ``rounds``."""
    from fsm.testing.postgres_cluster import TemporaryCluster

    env = command_env(folder)
    pairs: dict[str, list[tuple[float, float]]] = {}
    files: dict[int, list[tuple[float, float]]] = {}
    steps = instances * STEPS_PER_INSTANCE
    with TemporaryCluster(settings={"fsync": "on", "full_page_writes": "on"}) as cluster:
        try:
            for round_number in range(rounds):
                for jobs in JOBS:
                    place = folder / f"round-{round_number}-{jobs}"
                    place.mkdir()
                    bare = _bare(cluster, instances, jobs)
                    worker = _workers(cluster, place, env, instances, jobs)
                    run_all = _files(place, env, instances, jobs)
                    if jobs > 1:
                        threads = _workers(cluster, place, env, instances, 1, jobs)
                        pairs.setdefault(f"threads {jobs}", []).append((threads, bare))
                    pairs.setdefault(f"jobs {jobs}", []).append((worker, bare))
                    files.setdefault(jobs, []).append((worker, run_all))
            pause = [_pauses(cluster, folder / f"pauses-{n}", 20) for n in range(rounds)]
            claims = [_claims(cluster, folder / f"claims-{n}", 100) for n in range(rounds)]
        finally:
            from fsm.postgres.database import close_all

            close_all()  # before the server goes
    results = []
    for jobs in JOBS:
        worker, bare = _median_pair(pairs[f"jobs {jobs}"])
        results.append(
            Result(
                f"worker {instances:,} counters, {_jobs(jobs)} vs bare loop",
                worker,
                bare,
                2.0,
                _rate(steps, worker),
                _rate(steps, bare),
            )
        )
    for jobs in JOBS[1:]:
        threads, bare = _median_pair(pairs[f"threads {jobs}"])
        results.append(
            Result(
                f"worker {instances:,} counters, 1 process x {jobs} threads vs bare loop",
                threads,
                bare,
                2.0,
                _rate(steps, threads),
                _rate(steps, bare),
            )
        )
    for jobs in JOBS:
        worker, run_all = _median_pair(files[jobs])
        results.append(
            Result(
                f"worker {instances:,} counters, {_jobs(jobs)} vs run --all",
                worker,
                run_all,
                None,
                _rate(steps, worker),
                _rate(steps, run_all),
            )
        )
    p95, p50 = _median_pair(pause)
    results.append(Result("pause seen by a worker, p95 vs p50", p95, p50, None, _ms(p95), _ms(p50)))
    full, empty = _median_pair(claims)
    results.append(
        Result(
            f"claim with {FINISHED:,} finished instances vs none",
            full,
            empty,
            1.25,
            _ms(full),
            _ms(empty),
        )
    )
    return results


def _median_pair(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The (value, baseline) pair whose ratio is the median (the lower middle of an even
    count)."""
    ordered = sorted(pairs, key=lambda pair: pair[0] / pair[1])
    return ordered[(len(ordered) - 1) // 2]


def _jobs(jobs: int) -> str:
    return "1 job" if jobs == 1 else f"{jobs} jobs"


def _rate(steps: int, seconds: float) -> str:
    return f"{steps / seconds:,.0f} steps/s"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 counters, one round")
    parser.add_argument("--repeat", type=int, default=None, metavar="K", help="rounds (3)")
    parser.add_argument("--instances", type=int, default=None)
    args = parser.parse_args(argv)
    reason = missing()
    if reason is not None:
        print(f"skip postgres: {reason}")
        return 0
    instances = args.instances or (200 if args.quick else INSTANCES)
    rounds = args.repeat or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory(prefix="fsm-pg-bench-") as temporary:
        print(
            f"{instances:,} counters, limit {LIMIT} ({STEPS_PER_INSTANCE} steps each), "
            f"the median of {rounds} rounds"
        )
        for result in postgres(Path(temporary), rounds, instances=instances):
            print(result.line(), flush=True)
    return 0


def _database(cluster: Any) -> str:
    import psycopg

    from fsm.postgres.schema import migrate

    url: str = cluster.new_database("fsm_bench")
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


def _counters(workspace: Path, count: int) -> None:
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    machine = load_machine(COUNTER)
    space = Workspace(workspace)
    for number in range(count):
        space.instance(machine, f"c{number:05d}").create({"limit": LIMIT})


def _workers(
    cluster: Any, folder: Path, env: dict[str, str], count: int, jobs: int, concurrency: int = 1
) -> float:
    """Seconds of ``fsm worker --drain --jobs N --concurrency K`` over ``count`` new counters
    (the process started, connected, drained and ended)."""
    from fsm.postgres.database import close_all

    url = _database(cluster)
    workspace = folder / f"workers-{jobs}-{concurrency}"
    workspace.mkdir()
    (workspace / "fsm.toml").write_text(f'[store]\nurl = "{url}"\n')
    _counters(workspace, count)
    close_all()
    argv = fsm("worker", str(COUNTER), "--drain", "--jobs", str(jobs))
    argv += ["--concurrency", str(concurrency)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count(": completed") == count, done.stdout[-2000:]
    return elapsed


def _files(folder: Path, env: dict[str, str], count: int, jobs: int) -> float:
    """Seconds of the file store's ``fsm run --all --jobs N`` over ``count`` counters."""
    workspace = folder / f"files-{jobs}"
    workspace.mkdir()
    _counters(workspace, count)
    argv = fsm("run", "--all", str(COUNTER), "--jobs", str(jobs))
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    return elapsed


_BARE_CLAIM = """
SELECT id, count FROM bench WHERE count < %s ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
"""


def _bare(cluster: Any, count: int, jobs: int) -> float:
    """Seconds of ``jobs`` processes that each loop: claim a row (FOR UPDATE SKIP LOCKED),
    update its document, insert a journal row, commit; until every row counted
    ``STEPS_PER_INSTANCE`` times. Processes are started and connected before the clock (the
    workers' own start is part of their figure)."""
    import psycopg

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
        "print('ready', flush=True)\n"
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
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(jobs)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        process.wait()
    elapsed = time.perf_counter() - start
    assert all(process.returncode == 0 for process in processes)
    return elapsed


def _pauses(cluster: Any, folder: Path, rounds: int) -> tuple[float, float]:
    """Pause a running counter at random moments while a worker drives it: the seconds from
    the pause's commit until the worker lets the instance go (p95, p50)."""
    import psycopg

    from fsm.engine.control import ControlPlane
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    url = _database(cluster)
    workspace = folder / "pauses"
    workspace.mkdir(parents=True)
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
                latencies.append(time.perf_counter() - paused)
                ControlPlane(instance).apply("resume")
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    return p95, statistics.median(latencies)


def _until(conn: Any, condition: str) -> None:
    while True:
        row = conn.execute(f"SELECT {condition} FROM fsm_instances WHERE id = 'p1'").fetchone()
        if row and row[0]:
            return
        time.sleep(0.0005)


def _claims(cluster: Any, folder: Path, rounds: int) -> tuple[float, float]:
    """Median seconds of a claim among 100 runnable instances with 100,000 finished instances
    in the table, and with none (full, empty)."""
    import psycopg

    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine
    from fsm.postgres.store import PostgresStore

    url = _database(cluster)
    workspace = folder / "claims"
    workspace.mkdir(parents=True)
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
            "FROM generate_series(1, %s) n",
            (store.space, store.machine, b'{"status": "done", "phase": "done"}\n', FINISHED),
        )
        conn.execute("ANALYZE fsm_instances")
    full = _claim_times(store, rounds)
    return full, empty


def _claim_times(store: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        claim = store.claim(None)
        times.append(time.perf_counter() - start)
        assert claim is not None
        claim.release()
    return statistics.median(times)


if __name__ == "__main__":
    os.environ.pop("FSM_STORE", None)
    threading.current_thread().name = "bench"
    sys.exit(main())
