"""A real PostgreSQL server for the tests of this folder: one cluster per test session, a fresh
database per test (``postgres_url``). ``scripts/postgres-deps.sh`` (run by ``scripts/test.sh``)
installs the server and psycopg; where they are missing the tests skip saying so, except on CI
as root, where the script installs them and a missing piece is a failure."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

from fsm.testing.postgres_cluster import ClusterUnavailable, TemporaryCluster


def _required_here() -> bool:
    """On CI as root on Debian, scripts/postgres-deps.sh installs everything: never skip there."""
    return bool(os.environ.get("CI")) and os.geteuid() == 0 and shutil.which("apt-get") is not None


def _unavailable(reason: str) -> None:
    reason = f"PostgreSQL tests need {reason}; run scripts/postgres-deps.sh"
    if _required_here():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[TemporaryCluster]:
    """A PostgreSQL cluster of this test session, on a Unix socket in a temporary folder."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg (pip install -e '.[postgres]')")
    try:
        cluster = TemporaryCluster().start()
    except ClusterUnavailable as exc:
        _unavailable(str(exc))
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def postgres_url(postgres_cluster: TemporaryCluster) -> str:
    """The URL of a new, empty database of its own for one test."""
    return postgres_cluster.new_database()


def initialized(url: str) -> str:
    """``url``, whose database has fsm's tables (as ``fsm store init`` makes them)."""
    import psycopg

    from fsm.postgres.schema import migrate

    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


@pytest.fixture
def postgres_store_url(postgres_url: str) -> str:
    """The URL of a new database of its own for one test, with fsm's tables."""
    return initialized(postgres_url)


@pytest.fixture(autouse=True)
def _close_connections() -> Iterator[None]:
    """Every test's connections (pools, lease holders, listeners) are closed after it, before
    its database or the cluster goes away."""
    yield
    database = sys.modules.get("fsm.postgres.database")
    if database is not None:
        database.close_all()
