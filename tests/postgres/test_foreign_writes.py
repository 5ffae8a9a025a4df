"""Another program's write to the database (a script, an admin) is never overwritten
silently: an UPDATE of a document that leaves its version as it was gets a new version from
the database (a trigger), so the next step sees it and takes it in as it takes in a
dashboard's write to a file: its owned fields (the title) kept, a pause obeyed and journaled."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from fsm.cli import main
from fsm.store import selection as stores
from tests.conftest import COUNTER, fsm_process

C = str(COUNTER)


@pytest.fixture(autouse=True)
def _no_store_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stores.ENVIRONMENT, raising=False)


def fsm(folder: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["-C", str(folder), "--log-level", "warning", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _edit(url: str, change: dict[str, object]) -> None:
    """Change the document's fields by SQL, as a script would: the version left as it was."""
    with psycopg.connect(url, autocommit=True) as conn:
        raw, version = conn.execute("SELECT raw, version FROM fsm_instances").fetchone()
        data = json.loads(bytes(raw))
        data.update(change)
        conn.execute(
            "UPDATE fsm_instances SET raw = %s",
            (json.dumps(data, indent=2).encode() + b"\n",),
        )
        after = conn.execute("SELECT version FROM fsm_instances").fetchone()[0]
    assert after == version + 1


def _document(url: str) -> dict[str, object]:
    with psycopg.connect(url, autocommit=True) as conn:
        raw = conn.execute("SELECT raw FROM fsm_instances").fetchone()[0]
    data: dict[str, object] = json.loads(bytes(raw))
    return data


def _records(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM fsm_journal").fetchone()[0])


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def test_a_title_and_a_pause_written_by_sql_between_steps_are_kept_and_journaled(
    tmp_path: Path, postgres_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case, on a run in progress: a title, then a pause, written by SQL between
    two steps without a version bump. The run keeps the title, obeys the pause at the next
    boundary, the journal says who paused it (actor external), and replay agrees."""
    (tmp_path / "fsm.toml").write_text(f'[store]\nurl = "{postgres_store_url}"\nspace = "app"\n')
    assert fsm(tmp_path, capsys, "new", C, "--id", "c1", "--set", "limit=50")[0] == 0
    run = fsm_process(tmp_path, "run", C, "c1", "-q", "-o", "delay=0.3")
    try:
        _wait_for(lambda: _records(postgres_store_url) >= 4, "two steps were committed")
        _edit(postgres_store_url, {"title": "renamed by a script"})
        seen = _records(postgres_store_url)
        _wait_for(lambda: _records(postgres_store_url) >= seen + 2, "two more steps")
        _edit(postgres_store_url, {"status": "paused"})
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    document = _document(postgres_store_url)
    assert document["status"] == "paused", err
    assert document["title"] == "renamed by a script"
    assert 2 < int(document["count"]) < 50
    code, out, _ = fsm(tmp_path, capsys, "history", C, "c1")
    assert "by external" in out, out
    code, out, err = fsm(tmp_path, capsys, "replay", C, "c1")
    assert code == 0, err
