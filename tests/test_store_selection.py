"""Which store keeps a workspace's instances: files by default, else what ``[store]`` in fsm.toml
names, else what ``FSM_STORE`` names (it wins); an unknown name is one line, exit 2; stores
plug in by entry point; and every command reads through the store chosen."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.base.errors import OptionsError
from fsm.engine.instance import Workspace
from fsm.model.machine import Machine
from fsm.store import selection as stores
from fsm.store.file_store import FileStore
from fsm.store.memory import shared_storage
from fsm.testing import MemoryStore
from tests.conftest import COUNTER, Cli

C = str(COUNTER)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No FSM_STORE from outside; the process's memory stores emptied after each test."""
    monkeypatch.delenv(stores.ENVIRONMENT, raising=False)
    yield
    shared_storage.stores.clear()


def _toml(folder: Path, text: str) -> None:
    (folder / "fsm.toml").write_text(text)


@pytest.mark.parametrize(
    ("toml", "environment", "expected"),
    [
        pytest.param("", None, FileStore, id="default-files"),
        pytest.param('[store]\nname = "memory"\n', None, MemoryStore, id="toml-memory"),
        pytest.param("", "memory", MemoryStore, id="env-memory"),
        pytest.param('[store]\nname = "memory"\n', "files", FileStore, id="env-wins-over-toml"),
        pytest.param('[store]\nname = "files"\n', "memory", MemoryStore, id="env-wins-again"),
    ],
)
def test_the_store_is_chosen_in_one_place(
    tmp_path: Path,
    counter: Machine,
    monkeypatch: pytest.MonkeyPatch,
    toml: str,
    environment: str | None,
    expected: type,
) -> None:
    """The workspace's store is FSM_STORE's, else fsm.toml's ``[store] name``, else files."""
    _toml(tmp_path, toml)
    if environment is not None:
        monkeypatch.setenv(stores.ENVIRONMENT, environment)
    assert isinstance(Workspace(tmp_path).store_for(counter), expected)


def test_the_store_s_own_settings_reach_it(tmp_path: Path, counter: Machine) -> None:
    """The other keys of ``[store]`` are handed to the store as its settings."""
    _toml(tmp_path, '[store]\nname = "files"\naddress = "somewhere"\n')
    assert Workspace(tmp_path).layout_for(counter).settings == {"address": "somewhere"}


@pytest.mark.parametrize(
    ("toml", "environment", "says"),
    [
        pytest.param(
            "",
            "postgress",
            "unknown store 'postgress' (FSM_STORE=postgress); the stores available: ",
            id="env",
        ),
        pytest.param(
            '[store]\nname = "sqlite"\n',
            None,
            "unknown store 'sqlite' ([store] name = 'sqlite' in fsm.toml); the stores available: ",
            id="toml",
        ),
        pytest.param(
            "[store]\nname = 3\n", None, "[store] name must be a string", id="not-a-string"
        ),
        pytest.param('store = "files"\n', None, "[store] must be a table", id="not-a-table"),
    ],
)
def test_an_unknown_store_is_one_line_naming_those_available(
    tmp_path: Path,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    toml: str,
    environment: str | None,
    says: str,
) -> None:
    """A store no one registered is refused before anything is written: one line, exit 2,
    naming the stores that can be chosen."""
    _toml(tmp_path, toml)
    if environment is not None:
        monkeypatch.setenv(stores.ENVIRONMENT, environment)
    result = cli("new", C, "--id", "c1")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert line.startswith("fsm: error: ")
    assert says in line
    if "available" in says:
        assert line.endswith("files, memory, postgres, postgresql")
    assert not (tmp_path / ".counters").exists()


class _Point:
    """What importlib.metadata gives for an entry point (name and value)."""

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value


def test_a_store_registered_by_entry_point_is_found(
    tmp_path: Path, counter: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store another package registers in the group ``fsm.stores`` can be chosen by name,
    and is listed among the stores available."""
    points = [_Point("elsewhere", "fsm.store.memory:shared_store")]
    monkeypatch.setattr(stores, "_entry_points", lambda: points)
    monkeypatch.setenv(stores.ENVIRONMENT, "elsewhere")
    assert isinstance(Workspace(tmp_path).store_for(counter), MemoryStore)
    assert stores.available() == ["elsewhere", "files", "memory"]
    points[0] = _Point("elsewhere", "fsm.no_such_module:make")
    with pytest.raises(OptionsError, match="store 'elsewhere' cannot be loaded"):
        stores.factory("elsewhere")


def test_fsm_declares_its_stores_as_entry_points() -> None:
    """fsm's own stores are declared in the group other stores use (files and memory found
    without reading it; the PostgreSQL store, an optional extra, only through it)."""
    try:
        points = importlib.metadata.distribution("fsm").entry_points
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("fsm is not installed (run scripts/setup.sh)")
    declared = {p.name: p.value for p in points if p.group == stores.ENTRY_POINT_GROUP}
    if not declared:
        pytest.skip("the installed metadata predates the fsm.stores group (run scripts/setup.sh)")
    postgres = dict.fromkeys(("postgres", "postgresql"), "fsm.postgres:make_store")
    assert declared == {**stores.BUILT_IN, **postgres}


def test_every_command_reads_through_the_store_chosen(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the memory store chosen, create, start, run, status, history, replay, ls and
    recover all work, and no document or journal file is written in the workspace."""
    monkeypatch.setenv(stores.ENVIRONMENT, "memory")
    made = cli("new", C, "--id", "c1", "--set", "limit=2")
    assert made.code == 0
    # each command line is a process of its own: the memory store is said to keep nothing
    assert made.err.count("the memory store keeps nothing once this command ends") == 1
    assert cli("start", C, "c1").code == 0
    assert cli("run", C, "c1").code == 0
    status = cli("status", C, "c1", "--json")
    assert status.code == 0
    shown = json.loads(status.out)
    assert (shown["state"], shown["document"]) == ("done", "memory:counter/c1")
    history = cli("history", C, "c1")
    assert history.code == 0
    assert len(history.out.strip().splitlines()) == 5
    assert cli("replay", C, "c1").code == 0
    listed = cli("ls", C, "--json")
    assert [row["id"] for row in json.loads(listed.out)] == ["c1"]
    assert not (tmp_path / ".counters").exists()
    recovered = cli("recover", C, "c1")
    assert recovered.code == 0
    assert "nothing to recover" in recovered.out


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        pytest.param(
            '[store]\nurll = "postgresql://db/app"\n',
            "[store] has no setting 'urll' for the files store (its settings: name, space) "
            "(did you mean 'url'? it chooses the postgres store)",
            id="misspelt-url",
        ),
        pytest.param(
            '[store]\nname = "files"\npool = 4\n',
            "[store] has no setting 'pool' for the files store",
            id="a-database-setting",
        ),
    ],
)
def test_a_setting_the_file_store_does_not_have_is_an_error(
    tmp_path: Path, cli: Cli, toml: str, says: str
) -> None:
    """A misspelt ``url`` left the instances in files without a word: the file store, chosen
    by fsm.toml (or by default), refuses settings it does not have, in one line (exit 2)."""
    _toml(tmp_path, toml)
    result = cli("new", C, "--id", "c1")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert says in line
    assert not (tmp_path / ".counters").exists()
