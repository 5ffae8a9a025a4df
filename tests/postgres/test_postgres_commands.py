"""The PostgreSQL store through the command line and its own guarantees: chosen by an address,
its tables made by ``fsm store init`` (idempotent), files imported and exported byte-exact,
an append-only journal, queues, every reader on it, and one clear line for what is missing."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from fsm.base.errors import LeaseLostError
from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from fsm.postgres.store import PostgresStore
from fsm.store import selection as stores
from tests.conftest import COUNTER, Cli
from tests.postgres.fleet import MACHINE, Fleet

C = str(COUNTER)


@pytest.fixture(autouse=True)
def _no_store_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stores.ENVIRONMENT, raising=False)


def _use(folder: Path, url: str) -> None:
    (folder / "fsm.toml").write_text(f'[store]\nurl = "{url}"\nspace = "app"\n')


def test_store_init_makes_the_tables_once(tmp_path: Path, postgres_url: str, cli: Cli) -> None:
    """Before ``fsm store init`` a command says to run it (exit 6); init applies the schema
    once, and again says it is up to date."""
    _use(tmp_path, postgres_url)
    before = cli("ls", C)
    assert before.code == 6
    assert "has no fsm tables: run 'fsm store init' first" in before.err
    first, second = cli("store", "init"), cli("store", "init")
    assert (first.code, second.code) == (0, 0)
    assert "applied migration 1" in first.out
    assert second.out.strip() == "the postgres store is up to date"
    assert cli("ls", C).code == 0


def test_store_init_refuses_a_newer_schema(tmp_path: Path, postgres_url: str, cli: Cli) -> None:
    """A database upgraded by a newer fsm is not called up to date by an older one: store init
    says so (exit 6) and changes nothing; misspelt settings of the postgres store are named."""
    _use(tmp_path, postgres_url)
    assert cli("store", "init").code == 0
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO fsm_schema (version, description) VALUES (99, 'future')")
    done = cli("store", "init")
    assert done.code == 6
    assert "fsm tables of version 99, made by a newer fsm" in done.err
    (tmp_path / "fsm.toml").write_text(f'[store]\nurl = "{postgres_url}"\nspace = "a"\nleese = 3\n')
    done = cli("ls", C)
    assert done.code == 2
    assert "no setting 'leese' for the postgres store" in done.err
    assert "(did you mean 'lease'?)" in done.err


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_an_address_in_the_environment_chooses_the_store(
    tmp_path: Path,
    postgres_store_url: str,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    scheme: str,
) -> None:
    """``FSM_STORE=postgresql://...`` (or postgres://) keeps the instances in that database:
    created, started, run, listed, shown, journaled, replayed and drawn from there, with no
    file written but the instance's log."""
    url = scheme + postgres_store_url.removeprefix("postgresql")
    monkeypatch.setenv(stores.ENVIRONMENT, url)
    (tmp_path / "fsm.toml").write_text('[store]\nspace = "app-1"\n')
    assert stores.chosen({})[0] == scheme
    assert cli("new", C, "--id", "c1", "--set", "limit=2").code == 0
    assert cli("run", C, "c1", "-q").code == 0
    listed = cli("ls", C, "--json").json()
    assert [(row["id"], row["status"]) for row in listed] == [("c1", "done")]
    status = cli("status", C, "c1")
    assert "progress: 2/2" in status.out and "in postgresql://" in status.out
    assert "c1: journal of 5 records reproduces state 'done'" in cli("replay", C, "c1").out
    assert len(cli("history", C, "c1").out.splitlines()) == 5
    drawn = tmp_path.parent / f"{tmp_path.name}-c1.dot"
    assert cli("diagram", C, "--run", "c1", "-o", str(drawn)).code == 0
    assert "instance in state done" in drawn.read_text()
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["fsm.toml", "log.ndjson"]


def test_files_imported_and_exported_are_byte_exact(
    tmp_path: Path, postgres_store_url: str, cli: Cli
) -> None:
    """``fsm store import`` copies a file workspace's documents and journals into the
    database; ``fsm store export`` writes them back byte for byte (the files the dashboard
    reads); an instance imported twice is left as it is."""
    for instance_id in ("a1", "a2"):
        assert cli("new", C, "--id", instance_id, "--set", "limit=2").code == 0
    assert cli("run", C, "a1", "-q").code == 0
    written = {
        p: p.read_bytes() for p in tmp_path.rglob("*") if p.name.endswith(("json", "ndjson"))
    }
    kept = {p: data for p, data in written.items() if p.name != "log.ndjson"}
    _use(tmp_path, postgres_store_url)
    imported = cli("store", "import", C)
    assert imported.code == 0, imported.err
    assert "a1: imported, 5 records" in imported.out
    again = cli("store", "import", C)
    assert again.out.count("the store has it already") == 2
    for path in kept:
        path.unlink()
    exported = cli("store", "export", C)
    assert exported.code == 0, exported.err
    assert {p: p.read_bytes() for p in kept} == kept
    listed = cli("ls", C, "--json").json()
    assert sorted((row["id"], row["status"]) for row in listed) == [
        ("a1", "done"),
        ("a2", "created"),
    ]


def test_import_needs_a_store_other_than_files(tmp_path: Path, cli: Cli) -> None:
    """``fsm store import`` with the file store chosen is one line and exit 2."""
    done = cli("store", "import")
    assert done.code == 2
    assert "the store chosen is 'files'" in done.err


def test_the_journal_is_append_only(postgres_store_url: str, tmp_path: Path) -> None:
    """The database itself refuses to change or delete a journal record."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    fleet.create(1, limit=1)
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        for sql in ("UPDATE fsm_journal SET line = '{}'", "DELETE FROM fsm_journal"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql)
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("TRUNCATE fsm_journal")
        assert conn.execute("SELECT count(*) FROM fsm_journal").fetchone() == (1,)


@pytest.mark.parametrize(
    ("queue", "served", "claimed"),
    [
        pytest.param(None, None, True, id="default-queue-default-worker"),
        pytest.param("gpu", None, False, id="other-queue-not-served"),
        pytest.param("gpu", ["gpu"], True, id="queue-named"),
        pytest.param("gpu", ["cpu", "gpu"], True, id="one-of-the-queues"),
    ],
)
def test_a_worker_claims_only_the_queues_it_serves(
    tmp_path: Path,
    postgres_store_url: str,
    queue: str | None,
    served: list[str] | None,
    claimed: bool,
) -> None:
    """An instance created with ``--queue`` is claimed only by a worker serving that queue;
    without one, it is in its workspace's queue (the space)."""
    fleet = Fleet(tmp_path / "project", postgres_store_url)
    instance = fleet.instance("q1")
    instance.create({"limit": 1}, queue=queue)
    store = instance.store
    assert isinstance(store, PostgresStore)
    queues = served if served is not None else [fleet.workspace.space]
    claim = store.claim(queues)
    assert (claim is not None) == claimed
    if claim is not None:
        assert claim.instance_id == "q1"
        assert store.claim(queues) is None  # claimed once only
        claim.release()


def test_machines_that_need_no_workspace_run_in_any_queue(
    tmp_path: Path, postgres_store_url: str
) -> None:
    """The instances of a machine declaring ``needs_workspace: false`` have no queue: a worker
    serving any queue of the space claims them."""
    folder = tmp_path / "project"
    folder.mkdir()
    _use(folder, postgres_store_url)
    counter = load_machine(Path(__file__).parents[2] / "examples" / "counter" / "machine.yaml")
    assert counter.spec.needs_workspace is False
    instance = Workspace(folder).instance(counter, "k1")
    instance.create({"limit": 1})
    store = instance.store
    assert isinstance(store, PostgresStore)
    claim = store.claim(["somewhere-else"])
    assert claim is not None and claim.instance_id == "k1"
    claim.release()


def test_without_psycopg_the_store_is_one_error_line(tmp_path: Path, postgres_url: str) -> None:
    """With psycopg missing, choosing the postgres store is one line naming what to install
    (exit 2), and fsm without it never imports psycopg."""
    program = (
        "import sys; sys.modules['psycopg'] = None; from fsm.cli import main; "
        "code = main(['-C', sys.argv[1], 'ls', sys.argv[2]]); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path), C],
        capture_output=True,
        text=True,
        check=False,
        env={"FSM_STORE": postgres_url, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "fsm: error: the postgres store cannot run: psycopg is not installed: "
        "pip install 'fsm[postgres]'"
    ]
    plain = (
        "import sys; from fsm.cli import main; main(['-C', sys.argv[1], 'ls', sys.argv[2]]); "
        "print('psycopg' in sys.modules)"
    )
    files = subprocess.run(
        [sys.executable, "-c", plain, str(tmp_path), C],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert files.stdout.strip() == "False"


@pytest.mark.slow
def test_a_lost_lease_kills_the_commands_of_the_run(
    tmp_path: Path, postgres_store_url: str
) -> None:
    """When the heartbeat learns that the run's lease expired, the command its step runs is
    killed (its work never done), and the run's commit is refused: nothing is journaled of
    the step."""
    fleet = Fleet(tmp_path / "project", postgres_store_url, lease=1.5)
    (instance_id,) = fleet.create(1, limit=1, delay=60)
    instance = fleet.instance(instance_id)
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(Engine(instance).run())
        except BaseException as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    running = instance.running_folder
    deadline = time.monotonic() + 60
    while not any(running.glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(running.glob("*.json")), "the command never started"
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("UPDATE fsm_holders SET expires = statement_timestamp() - interval '1s'")
    runner.join(timeout=60)
    assert not runner.is_alive(), "the command was not killed"
    assert len(outcome) == 1 and isinstance(outcome[0], LeaseLostError), outcome
    assert fleet.effects() == {}
    records = [r.kind for r in fleet.instance(instance_id).journal.records()]
    assert records == ["create", "control"]  # created, started; the step left no record


def test_the_worker_counter_machine_is_valid() -> None:
    """The machine the worker tests drive loads and checks clean."""
    from fsm.model.check import check_target

    report = check_target(str(MACHINE))
    assert report.findings == [], [f.render() for f in report.findings]
