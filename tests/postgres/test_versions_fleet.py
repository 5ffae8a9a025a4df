"""Workers of two versions of one machine on one database: each claims only the instances its
installed definition can run (its own version, or one its migrations start from)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from fsm.cli import main
from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import Machine, load_machine
from tests.postgres.fleet import MACHINE


def side(tmp_path: Path, url: str, name: str, version: int, migration: str = "") -> Workspace:
    """A workspace (``name``) sharing the database's space ``shared``, with its own copy of the
    worker counter at ``version`` (``counting`` renamed ``tally`` from version 2 on)."""
    folder = tmp_path / name
    shutil.copytree(MACHINE.parent, folder / "machine")
    path = folder / "machine" / "machine.yaml"
    text = path.read_text().replace("version: 1\n", f"version: {version}\n")
    if version > 1:
        text = text.replace("counting", "tally")
    path.write_text(text + migration)
    (folder / "fsm.toml").write_text(f'[store]\nurl = "{url}"\nspace = "shared"\nlease = 5\n')
    return Workspace(folder)


def machine_of(workspace: Workspace) -> Machine:
    return load_machine(workspace.path / "machine" / "machine.yaml")


def claims(workspace: Workspace) -> list[str]:
    """Every instance a worker of ``workspace`` claims (each held until the end)."""
    machine = machine_of(workspace)
    store = workspace.store_for(machine)
    claimed = []
    held = []
    while (claim := store.claim(None)) is not None:  # type: ignore[attr-defined]
        claimed.append(claim.instance_id)
        held.append(claim)
    for claim in held:
        claim.release()
    return sorted(claimed)


def test_v1_and_v2_workers_claim_only_what_they_can_run(
    tmp_path: Path, postgres_store_url: str
) -> None:
    v1 = side(tmp_path, postgres_store_url, "v1", 1)
    v2 = side(tmp_path, postgres_store_url, "v2", 2)
    migrating = side(
        tmp_path,
        postgres_store_url,
        "v2m",
        2,
        "migrations:\n  - {from: 1, states: {counting: tally}}\n",
    )
    for workspace, ids in ((v1, ("a1", "b1")), (v2, ("a2",))):
        machine = machine_of(workspace)
        for instance_id in ids:
            workspace.instance(machine, instance_id).create({"limit": 3})
    with psycopg.connect(postgres_store_url) as conn:
        rows = dict(conn.execute("SELECT id, definition FROM fsm_instances").fetchall())
    assert rows == {"a1": "1", "b1": "1", "a2": "2"}
    assert claims(v1) == ["a1", "b1"]
    assert claims(v2) == ["a2"]
    assert claims(migrating) == ["a1", "a2", "b1"]
    # A v1 instance in a renamed state, driven by the worker that can migrate it, is a v2
    # instance from then on.
    Engine(v1.instance(machine_of(v1), "a1")).run(max_steps=1)  # into v1's 'counting'
    from fsm.engine.worker import WorkerOptions, work

    driven = work(
        migrating, [machine_of(migrating)], WorkerOptions(drain=True, max_steps=1), lambda d: None
    )
    assert {d.id: d.outcome for d in driven} == dict.fromkeys(["a1", "a2", "b1"], "limit")
    with psycopg.connect(postgres_store_url) as conn:
        rows = dict(conn.execute("SELECT id, definition FROM fsm_instances").fetchall())
        kinds = [
            row[0]
            for row in conn.execute(
                "SELECT line::json->>'kind' FROM fsm_journal WHERE id = 'a1' ORDER BY position"
            ).fetchall()
        ]
        kept = conn.execute("SELECT count(*) FROM fsm_definitions").fetchone()
        migrated = conn.execute(
            "SELECT line::json->'migration'->'edges' FROM fsm_journal "
            "WHERE id = 'a1' AND line::json->>'kind' = 'migrate'"
        ).fetchone()
    assert rows == {"a1": "2", "b1": "2", "a2": "2"}
    assert kinds[-2:] == ["migrate", "transition"]
    # Both definitions are kept in the database: the migration found v1's transitions in it.
    assert kept == (2,)
    assert migrated == ({"0": 0, "1": 1},)  # (the migrating host has no file of v1)
    assert claims(v1) == []
    assert claims(v2) == ["a1", "a2", "b1"]


def test_ls_names_the_instances_no_live_worker_runs(
    tmp_path: Path, postgres_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a live worker running version 1 only, fsm ls flags the runnable instance of
    version 2 (and not the one of version 1)."""
    v1 = side(tmp_path, postgres_store_url, "v1", 1)
    v2 = side(tmp_path, postgres_store_url, "v2", 2)
    v1.instance(machine_of(v1), "a1").create({"limit": 3})
    v2.instance(machine_of(v2), "a2").create({"limit": 3})
    assert claims(v1) == ["a1"]  # the worker of version 1 says what it runs
    capsys.readouterr()
    machine_file = str(v1.path / "machine" / "machine.yaml")
    code = main(["-C", str(v1.path), "ls", machine_file])
    assert code == 0, capsys.readouterr()
    shown = capsys.readouterr().out
    lines = {line.split()[1]: line for line in shown.splitlines()}
    assert "a2" in lines, shown
    assert "no live worker runs worker-counter 2" in lines["a2"]
    assert "runs under worker-counter 2, newer than the installed 1" in lines["a2"]
    assert "[" not in lines["a1"]
