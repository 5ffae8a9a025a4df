"""A shared database never mixes two projects' instances, and copies between files and the
database never replace newer work: the workspace's space is explicit (``fsm store init``
writes one), an instance records the workspace it was made in, a worker or a run never drives
another workspace's instance, and ``fsm store import``/``export`` compare journals first."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from fsm.cli import main
from fsm.postgres.schema import MIGRATIONS
from fsm.store import selection as stores
from tests.conftest import COUNTER

C = str(COUNTER)


@pytest.fixture(autouse=True)
def _no_store_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stores.ENVIRONMENT, raising=False)


def fsm(folder: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["-C", str(folder), "--log-level", "warning", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _status(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    code, out, err = fsm(folder, capsys, "ls", C, "--json")
    assert code == 0, err
    return {row["id"]: row["status"] for row in json.loads(out)}


def test_two_checkouts_named_alike_never_share_a_space(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: /a/app and /b/app on one database. Without a space, fsm refuses
    rather than guess one from the folder's name; ``fsm store init`` gives each its own (in
    fsm.toml), and a worker draining in A never runs B's instance."""
    a, b = tmp_path / "a" / "app", tmp_path / "b" / "app"
    for folder in (a, b):
        folder.mkdir(parents=True)
        settings = f'# the team\'s settings\n[store]\nurl = "{postgres_url}"\n'
        (folder / "fsm.toml").write_text(settings)
    code, _, err = fsm(b, capsys, "new", C, "--id", "c1", "--set", "limit=1")
    assert code == 2
    assert "names no space" in err and "fsm store init" in err
    spaces = []
    for folder in (a, b):
        code, out, err = fsm(folder, capsys, "store", "init")
        assert code == 0, err
        assert "wrote space" in out
        text = (folder / "fsm.toml").read_text()
        assert text.startswith("# the team's settings\n[store]\nspace = \"app-")
        spaces.append(text.split('space = "')[1].split('"')[0])
    assert spaces[0] != spaces[1]
    code, out, _ = fsm(a, capsys, "store", "init")
    assert (code, out.strip()) == (0, "the postgres store is up to date")
    assert fsm(b, capsys, "new", C, "--id", "c1", "--set", "limit=1")[0] == 0
    code, out, err = fsm(a, capsys, "worker", C, "--drain")
    assert "c1" not in out + err
    assert _status(a, capsys) == {}
    assert _status(b, capsys) == {"c1": "created"}
    code, out, err = fsm(b, capsys, "worker", C, "--drain")
    assert code == 0, err
    assert _status(b, capsys) == {"c1": "done"}


def _workspace(folder: Path, url: str, space: str = "app") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fsm.toml").write_text(f'[store]\nurl = "{url}"\nspace = "{space}"\n')
    return folder


def test_a_run_refuses_an_instance_of_another_workspace(
    tmp_path: Path, postgres_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row whose recorded workspace is not its space (moved by hand) is neither claimed by a
    worker nor run by ``fsm run``, which names both workspaces (exit 3)."""
    folder = _workspace(tmp_path / "app", postgres_store_url)
    assert fsm(folder, capsys, "new", C, "--id", "c1", "--set", "limit=1")[0] == 0
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("UPDATE fsm_instances SET workspace = 'other-1234'")
    code, out, err = fsm(folder, capsys, "worker", C, "--drain")
    assert "c1" not in out
    code, out, err = fsm(folder, capsys, "run", C, "c1", "-q")
    assert code == 3
    assert "belongs to workspace 'other-1234', not to this one ('app'" in err
    assert _status(folder, capsys) == {"c1": "created"}


def test_instances_of_an_older_fsm_wait_for_adoption(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database of schema 2 (spaces guessed from folder names) is migrated: its instances
    have no workspace, so no worker claims them and ``fsm run`` refuses them, saying how to
    adopt them; ``fsm store adopt`` in their checkout makes them its own."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE fsm_schema (version integer PRIMARY KEY, description text NOT NULL, "
            "applied timestamptz NOT NULL DEFAULT now())"
        )
        for number, description, sql in MIGRATIONS[:2]:
            conn.execute(sql)
            conn.execute("INSERT INTO fsm_schema VALUES (%s, %s)", (number, description))
        # an instance of that older fsm, in the space it guessed from the folder's name
        conn.execute(
            "INSERT INTO fsm_instances (space, machine, id, raw) VALUES ('app', 'x', 'y', 'z')"
        )
    folder = _workspace(tmp_path / "app", postgres_url)
    code, out, err = fsm(folder, capsys, "store", "init")
    assert code == 0, err
    assert "applied migration 3" in out
    assert "space 'app': 1 instances made before spaces were explicit wait for" in out
    assert fsm(folder, capsys, "new", C, "--id", "c1", "--set", "limit=1")[0] == 0
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE fsm_instances SET workspace = NULL")  # as the migration leaves it
    code, out, _ = fsm(folder, capsys, "worker", C, "--drain")
    assert "c1" not in out
    code, _, err = fsm(folder, capsys, "run", C, "c1", "-q")
    assert code == 3
    assert "its workspace is not known" in err and "fsm store adopt" in err
    code, out, err = fsm(folder, capsys, "store", "adopt", C)
    assert code == 0, err
    assert "c1: adopted by space 'app'" in out
    assert fsm(folder, capsys, "worker", C, "--drain")[0] == 0
    assert _status(folder, capsys) == {"c1": "done"}


def _on(folder: Path, url: str | None) -> None:
    store = f'url = "{url}"\n' if url else 'name = "files"\n'
    (folder / "fsm.toml").write_text(f'[store]\n{store}space = "app"\n')


def test_export_never_replaces_newer_local_work(
    tmp_path: Path, postgres_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: run on files, import, run further on files, export. The export is
    refused (exit 6, the conflict listed) and the files are untouched; ``--overwrite``
    replaces them, keeping them in the meta folder first; running further in the database and
    exporting again brings the files up to date."""
    folder = tmp_path / "app"
    folder.mkdir()
    _on(folder, None)
    assert fsm(folder, capsys, "new", C, "--id", "c1", "--set", "limit=5")[0] == 0
    assert fsm(folder, capsys, "run", C, "c1", "-q", "--max-steps", "1")[0] in (0, 5)
    _on(folder, postgres_store_url)
    code, out, err = fsm(folder, capsys, "store", "import", C)
    assert code == 0, err
    _on(folder, None)
    assert fsm(folder, capsys, "run", C, "c1", "-q", "--max-steps", "2")[0] in (0, 5)
    document = next(folder.rglob("c1.json"))
    journal = next(p for p in folder.rglob("*.ndjson") if p.name != "log.ndjson")
    local = (document.read_bytes(), journal.read_bytes())
    _on(folder, postgres_store_url)
    code, out, err = fsm(folder, capsys, "store", "export", C)
    assert code == 6
    assert "c1: conflict: the files have work the store lacks: it has 2 records more" in err
    assert "--overwrite" in err
    assert (document.read_bytes(), journal.read_bytes()) == local
    # the other way, the store is behind: brought up to date, nothing lost
    code, out, err = fsm(folder, capsys, "store", "import", C)
    assert code == 0, err
    assert "c1: brought up to date (2 records added)" in out
    code, out, err = fsm(folder, capsys, "store", "export", C)
    assert (code, "the files have it already, the same" in out) == (0, True)
    # the store runs further; the files' title is changed by another program meanwhile
    assert fsm(folder, capsys, "run", C, "c1", "-q", "--max-steps", "1")[0] in (0, 5)
    data = json.loads(document.read_text())
    data["title"] = "edited by the dashboard"
    document.write_text(json.dumps(data, indent=2) + "\n")
    edited = document.read_bytes()
    code, out, err = fsm(folder, capsys, "store", "export", C)
    assert code == 6
    assert "changed after its journal's last record" in err
    code, out, err = fsm(folder, capsys, "store", "export", C, "--overwrite")
    assert code == 0, err
    assert "the files' copy kept in" in out
    kept = next(folder.rglob("replaced/*/document.json"))
    assert kept.read_bytes() == edited
    assert document.read_bytes() != edited


def test_import_never_replaces_newer_work_in_the_store(
    tmp_path: Path, postgres_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import whose files are older than the store's copy is refused with the conflict
    listed; ``--overwrite`` replaces the store's copy, kept first in fsm_kept."""
    folder = tmp_path / "app"
    folder.mkdir()
    _on(folder, None)
    assert fsm(folder, capsys, "new", C, "--id", "c1", "--set", "limit=5")[0] == 0
    _on(folder, postgres_store_url)
    assert fsm(folder, capsys, "store", "import", C)[0] == 0
    assert fsm(folder, capsys, "run", C, "c1", "-q", "--max-steps", "2")[0] in (0, 5)
    code, out, err = fsm(folder, capsys, "store", "import", C)
    assert code == 6
    assert "c1: conflict: the store's copy has work the files lack: it has" in err
    code, out, err = fsm(folder, capsys, "history", C, "c1")
    before = out
    code, out, err = fsm(folder, capsys, "store", "import", C, "--overwrite")
    assert code == 0, err
    assert "replaced (the store's copy kept as fsm_kept row" in out
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        kept = conn.execute("SELECT kind, journal FROM fsm_kept").fetchall()
        count = conn.execute("SELECT count(*) FROM fsm_journal").fetchone()
    assert [kind for kind, _ in kept] == ["replaced"]
    assert len(kept[0][1].splitlines()) == len(before.splitlines())
    assert count == (1,)
    code, out, err = fsm(folder, capsys, "replay", C, "c1")
    assert code == 0, err
