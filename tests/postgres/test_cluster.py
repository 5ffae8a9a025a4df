"""The test cluster itself: a real server whose committed data survives a crash restart."""

from __future__ import annotations

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
