"""Nothing waits for ever on the database store: a password or service file that is a FIFO is
refused before libpq would block on it, an error no retry can fix (a missing database, an
unknown host, a server never reached) is one line at once, and a row fsm cannot run is set
aside by the worker that claims it, not claimed for ever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import COUNTER

C = str(COUNTER)
BOUND = 60
"""Seconds after which a command is taken to hang (each case ends in a few)."""


def _fsm(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "FSM_STORE"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(folder), *argv],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
        env=environment,
    )


def _workspace(folder: Path, url: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fsm.toml").write_text(f'[store]\nurl = "{url}"\nspace = "app"\n')
    return folder


@pytest.mark.parametrize("where", ["url", "PGPASSFILE", "service"])
def test_a_fifo_for_a_libpq_file_is_refused_not_waited_on(
    tmp_path: Path, postgres_store_url: str, where: str
) -> None:
    fifo = tmp_path / "pgfile"
    os.mkfifo(fifo)
    env: dict[str, str] = {}
    url = postgres_store_url
    if where == "url":
        url += f"&passfile={fifo}"
    elif where == "PGPASSFILE":
        env["PGPASSFILE"] = str(fifo)
    else:
        url += "&service=fsm"
        env["PGSERVICEFILE"] = str(fifo)
    folder = _workspace(tmp_path / "app", url)
    done = _fsm(folder, "ls", C, **env)
    assert done.returncode == 2, done.stderr
    assert f"{fifo} is not a regular file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_missing_database_fails_at_once_in_one_line(
    tmp_path: Path, postgres_store_url: str
) -> None:
    missing = postgres_store_url.replace("/fsm_test_", "/no_such_db_", 1)
    folder = _workspace(tmp_path / "app", missing)
    done = _fsm(folder, "ls")
    assert done.returncode == 6
    assert "does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_never_reached_is_not_waited_for(tmp_path: Path) -> None:
    """No server on the socket: one line, exit 6, instead of a minute of retries (and an import
    stops at once instead of waiting for each instance)."""
    socket_dir = tmp_path / "nothing-here"
    socket_dir.mkdir()
    folder = _workspace(tmp_path / "app", f"postgresql://fsm@/db?host={socket_dir}")
    made = _fsm(folder, "new", C, "--id", "c1", FSM_STORE="files")
    assert made.returncode == 0, made.stderr
    for argv in (("ls", C), ("store", "import", C)):
        done = _fsm(folder, *argv)
        assert done.returncode == 6, done.stderr
        assert "cannot connect to the database" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_row_fsm_cannot_run_is_set_aside(tmp_path: Path, postgres_store_url: str) -> None:
    """A row with id '../x' (written by another program) is claimed once, marked not runnable,
    and the worker drains the valid instance and ends."""
    folder = _workspace(tmp_path / "app", postgres_store_url)
    assert _fsm(folder, "new", C, "--id", "c1", "--set", "limit=1").returncode == 0
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO fsm_instances (space, machine, id, raw, runnable, workspace, status) "
            "SELECT space, machine, '../x', raw, true, workspace, 'running' "
            "FROM fsm_instances WHERE id = 'c1'"
        )
        conn.execute(
            "UPDATE fsm_instances SET modified = now() - interval '1 hour' WHERE id = '../x'"
        )
    done = _fsm(folder, "worker", C, "--drain")
    assert done.returncode == 0, done.stderr
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        rows = dict(conn.execute("SELECT id, runnable FROM fsm_instances").fetchall())
    assert rows == {"c1": False, "../x": False}
