"""The store's credentials are never shown: an address that cannot be parsed is reported
without its password, a key=value ``FSM_STORE`` is not echoed, and tasks and agents do not
inherit ``FSM_STORE`` or libpq's ``PG*`` variables (unless given them explicitly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm.process.executor import SubprocessExecutor
from fsm.store import selection as stores
from tests.conftest import COUNTER, Cli

C = str(COUNTER)

pytest.importorskip("psycopg")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("postgresql://u:pa%zzSECRET@db.example/app", "invalid percent-encoded token"),
        ("postgresql://u:pa SECRET@db.example/app", "unexpected spaces found in"),
        ("postgresql://u:SECRET@db.example:70000000000000000000/app", ""),
    ],
)
def test_an_address_that_does_not_parse_is_shown_without_its_password(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, address: str, problem: str
) -> None:
    (tmp_path / "fsm.toml").write_text('[store]\nspace = "app-1"\n')
    monkeypatch.setenv(stores.ENVIRONMENT, address)
    done = cli("ls", C)
    assert "SECRET" not in done.out + done.err
    assert "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) == 1
    if problem:
        assert done.code == 2
        assert f"url postgresql://db.example/... is not a valid address: {problem}" in done.err


def test_a_key_value_address_in_the_environment_is_not_echoed(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(stores.ENVIRONMENT, "host=db.example password=SECRET dbname=app")
    done = cli("ls", C)
    assert done.code == 2
    assert "SECRET" not in done.err
    assert "holds neither a store's name nor an address" in done.err


def test_an_address_naming_nothing_is_refused_at_once(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "fsm.toml").write_text('[store]\nspace = "app-1"\n')
    monkeypatch.setenv(stores.ENVIRONMENT, "postgresql://")
    done = cli("ls", C)
    assert done.code == 2
    assert "names no host and no database" in done.err


def test_tasks_do_not_inherit_the_stores_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task that prints its environment shows neither FSM_STORE nor PGPASSWORD (nor any
    PG* variable); one given explicitly to the task is kept."""
    monkeypatch.setenv("FSM_STORE", "postgresql://u:SECRET1@db/app")
    monkeypatch.setenv("PGPASSWORD", "SECRET2")
    monkeypatch.setenv("PGSERVICEFILE", "/etc/SECRET3")
    executor = SubprocessExecutor(tmp_path)
    printed = executor.shell("env", timeout=10).stdout
    assert "SECRET" not in printed
    assert "PATH=" in printed
    given = executor.shell("env", timeout=10, env={"PGPASSWORD": "mine"}).stdout
    assert "PGPASSWORD=mine" in given


def test_a_key_value_address_in_fsm_toml_is_not_echoed(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "fsm.toml").write_text('[store]\nurl = "host=db password=SECRET"\nspace = "a"\n')
    done = cli("ls", C)
    assert done.code == 2
    assert "SECRET" not in done.err
    assert "[store] url is not an address of a store fsm knows" in done.err
