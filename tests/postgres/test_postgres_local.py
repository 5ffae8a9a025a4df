"""scripts/postgres-local.sh: a private server for trying the PostgreSQL store, as
docs/scale-out.md's first section tells a newcomer to start one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.testing.postgres_cluster import ClusterUnavailable, find_bindir
from tests.conftest import COUNTER

ROOT = Path(__file__).parent.parent.parent
SCRIPT = ROOT / "scripts" / "postgres-local.sh"


def _script(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *argv], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder the server's account can reach (not pytest's, which only its user can)."""
    try:
        find_bindir()
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    made = Path(tempfile.mkdtemp(prefix="fsm-pglocal-"))
    try:
        yield made
    finally:
        _script("stop", str(made))
        shutil.rmtree(made, ignore_errors=True)


def _fsm(workspace: Path, url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FSM_STORE": url, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(workspace), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_start_prints_a_url_the_store_takes_and_stop_stops_it(folder: Path, tmp_path: Path) -> None:
    """`start` creates and starts a server and prints its URL; `fsm store init`, `fsm new` and
    `fsm run` work with it; `url` prints it again; `stop` stops it and `url` then says so."""
    pytest.importorskip("psycopg")
    started = _script("start", str(folder))
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    assert url.startswith("postgresql://fsm@/fsm?host=") and str(folder) in url
    assert f"export FSM_STORE='{url}'" in started.stderr
    assert _script("url", str(folder)).stdout.strip() == url
    assert _fsm(tmp_path, url, "store", "init").returncode == 0
    created = _fsm(tmp_path, url, "new", str(COUNTER), "--id", "c1", "--set", "limit=2")
    assert created.returncode == 0, created.stderr
    ran = _fsm(tmp_path, url, "run", str(COUNTER), "c1")
    assert ran.returncode == 0 and "completed" in ran.stdout, ran.stderr
    again = _script("start", str(folder))
    assert again.returncode == 0 and again.stdout.strip() == url  # already running: same URL
    assert _script("stop", str(folder)).returncode == 0
    gone = _script("url", str(folder))
    assert gone.returncode == 1 and "no server is running" in gone.stderr


def test_an_unknown_command_is_refused() -> None:
    """A mistyped command is one line, exit 2."""
    done = _script("strat")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "postgres-local: unknown command 'strat' (start, url or stop)",
    )
