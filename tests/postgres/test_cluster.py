"""The test cluster itself: a real server whose committed data survives a crash restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fsm.testing.postgres_cluster import TemporaryCluster

pytestmark = pytest.mark.slow


def _psycopg() -> Any:
    """psycopg, imported once a test runs (the fixtures say what is missing before that)."""
    import psycopg

    return psycopg


def test_each_test_gets_an_empty_database_of_its_own(postgres_cluster: TemporaryCluster) -> None:
    """Two databases of one cluster do not see each other's tables."""
    psycopg = _psycopg()
    first, second = postgres_cluster.new_database(), postgres_cluster.new_database()
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
    with psycopg.connect(second) as conn:
        found = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 't'").fetchone()
    assert found == (0,)


def test_committed_rows_survive_an_immediate_stop(postgres_cluster: TemporaryCluster) -> None:
    """A commit is kept through a crash of the server (pg_ctl -m immediate) and its recovery,
    while an open transaction is lost: the cluster behaves as a real server does."""
    psycopg = _psycopg()
    url = postgres_cluster.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
    open_conn = psycopg.connect(url)
    open_conn.execute("INSERT INTO t VALUES (2)")
    postgres_cluster.restart("immediate")
    with pytest.raises(psycopg.OperationalError):
        open_conn.execute("SELECT 1")
    open_conn.close()
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT x FROM t ORDER BY x").fetchall()
    assert rows == [(1,)]


def test_the_server_stops_when_its_test_process_is_killed(
    postgres_cluster: TemporaryCluster, tmp_path: Path
) -> None:
    """A test run cut short by SIGKILL (nothing of it runs again) leaves no server running:
    its cluster's watchdog stops the server and deletes the cluster's folder."""
    program = (
        "import sys, time\n"
        "from fsm.testing.postgres_cluster import TemporaryCluster\n"
        "cluster = TemporaryCluster().start()\n"
        "pid = (cluster.data / 'postmaster.pid').read_text().split()[0]\n"
        "print(cluster.folder, pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    started = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert started.stdout is not None
        folder, pid = started.stdout.readline().split()
        assert _alive(int(pid))
        os.kill(started.pid, signal.SIGKILL)
        started.wait(timeout=30)
        deadline = time.monotonic() + 60
        while (_alive(int(pid)) or Path(folder).exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(int(pid)), "the server outlived its test process"
        assert not Path(folder).exists()
    finally:
        if started.poll() is None:
            started.kill()
            started.wait()
        if started.stdout is not None:
            started.stdout.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
