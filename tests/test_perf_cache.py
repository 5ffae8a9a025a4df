"""The cache of checked definitions and of `fsm ls` rows: used while what they were derived
from is unchanged, never after, and never a reason for a command to fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fsm.base import cache
from fsm.model.definition import read_definition
from fsm.store import file_store as store_module
from fsm.view import listing_index
from fsm.view.listing import row_of
from tests.conftest import COUNTER, Cli


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test alone."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("FSM_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def machine_copy(tmp_path: Path) -> Path:
    """A copy of the counter machine that a test may edit."""
    folder = tmp_path / "counter-machine"
    shutil.copytree(COUNTER.parent, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder / "machine.yaml"


def test_a_definition_is_parsed_once_then_read_back(cache_dir: Path, machine_copy: Path) -> None:
    """The second process to read a machine file needs no YAML parser: it reads the check."""
    code = (
        "import sys; from pathlib import Path; from fsm.model.definition import read_definition; "
        f"spec, _ = read_definition(Path({str(machine_copy)!r})); "
        "print(spec.name, 'yaml' in sys.modules)"
    )
    env = {**os.environ, "FSM_CACHE_DIR": str(cache_dir)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    assert [run.stdout.split() for run in runs] == [["counter", "True"], ["counter", "False"]]


def test_a_changed_definition_is_parsed_again(cache_dir: Path, machine_copy: Path) -> None:
    """Editing the machine file takes effect at once (the cache is keyed by its text)."""
    assert read_definition(machine_copy)[0].description.startswith("Counts up")
    text = machine_copy.read_text().replace("Counts up to a limit", "Counts to a bound")
    machine_copy.write_text(text)
    assert read_definition(machine_copy)[0].description.startswith("Counts to a bound")


def test_a_damaged_cache_entry_is_parsed_again(cache_dir: Path, machine_copy: Path) -> None:
    """An entry that does not unpickle (another version, a torn write) is ignored."""
    read_definition(machine_copy)
    (entry,) = (cache_dir / "definitions").iterdir()
    entry.write_bytes(b"not a pickle")
    spec, lines = read_definition(machine_copy)
    assert spec.name == "counter" and lines.line_of(("initial",)) is not None


def test_an_empty_cache_setting_turns_the_cache_off(
    tmp_path: Path, machine_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FSM_CACHE_DIR set empty: nothing is written anywhere."""
    monkeypatch.setenv("FSM_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    read_definition(machine_copy)
    assert cache.folder() is None
    assert not (tmp_path / "xdg").exists()


def test_an_unwritable_cache_changes_nothing(
    tmp_path: Path, machine_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder that cannot be created (a file is in its way) is no error."""
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("FSM_CACHE_DIR", str(blocker / "cache"))
    assert read_definition(machine_copy)[0].name == "counter"


# --- fsm ls --------------------------------------------------------------------------------


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are kept however recently their files changed (tests do not wait two seconds)."""
    monkeypatch.setattr(store_module, "SETTLED_NS", -(10**18))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the instances whose documents a listing reads."""
    seen: list[str] = []

    def counting(machine, store, instance_id, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(instance_id)
        return row_of(machine, store, instance_id, **kwargs)

    monkeypatch.setattr(listing_index, "row_of", counting)
    return seen


def _ls(cli: Cli, machine: str, *extra: str) -> list[dict[str, object]]:
    result = cli("ls", machine, "--json", *extra)
    assert result.code == 0, result.err
    rows: list[dict[str, object]] = result.json()
    return rows


def _new(cli: Cli, machine: str, *ids: str) -> None:
    for instance_id in ids:
        assert cli("new", machine, "--id", instance_id, "--set", "limit=2").code == 0


def test_ls_reads_only_the_documents_that_changed(
    cli: Cli, cache_dir: Path, settled: None, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second listing reads no document; after a run, only the one that ran is read again,
    and the rows are what a listing without the index shows."""
    machine = str(COUNTER)
    _new(cli, machine, "a1", "a2", "a3")
    first = _ls(cli, machine)
    assert sorted(reads) == ["a1", "a2", "a3"]
    reads.clear()
    assert _ls(cli, machine) == first and reads == []
    assert cli("run", machine, "a2").code == 0
    after = _ls(cli, machine)
    assert reads == ["a2"]
    monkeypatch.setenv("FSM_CACHE_DIR", "")
    assert _ls(cli, machine) == after  # as listed without an index
    monkeypatch.setenv("FSM_CACHE_DIR", str(cache_dir))
    assert {row["id"]: row["status"] for row in after}["a2"] == "done"
    assert [row["id"] for row in _ls(cli, machine, "--status", "done")] == ["a2"]


def test_ls_forgets_removed_instances_and_finds_new_ones(
    cli: Cli, tmp_path: Path, cache_dir: Path, settled: None, reads: list[str]
) -> None:
    """A deleted document leaves the listing; a new one is read and listed."""
    machine = str(COUNTER)
    _new(cli, machine, "a1", "a2")
    _ls(cli, machine)
    (tmp_path / ".counters" / "a1.json").unlink()
    _new(cli, machine, "a3")
    reads.clear()
    assert sorted(row["id"] for row in _ls(cli, machine)) == ["a2", "a3"]  # type: ignore[type-var]
    assert reads == ["a3"]


def test_ls_reads_everything_again_when_the_machine_changes(
    cli: Cli, machine_copy: Path, settled: None, reads: list[str], cache_dir: Path
) -> None:
    """Editing the machine's Python module (or its file) makes the index stale."""
    machine = str(machine_copy)
    _new(cli, machine, "a1", "a2")
    _ls(cli, machine)
    reads.clear()
    functions = machine_copy.parent / "functions.py"
    functions.write_text(functions.read_text() + "\n# edited\n")
    _ls(cli, machine)
    assert sorted(reads) == ["a1", "a2"]


def test_ls_reads_everything_again_when_the_options_change(
    cli: Cli, tmp_path: Path, settled: None, reads: list[str], cache_dir: Path
) -> None:
    """fsm.toml or -o options decide where documents are: another value, another listing."""
    machine = str(COUNTER)
    _new(cli, machine, "a1")
    _ls(cli, machine)
    reads.clear()
    assert _ls(cli, machine, "-o", "folder=elsewhere") == []
    (tmp_path / "fsm.toml").write_text("[machine.counter]\nstep_size = 2\n")
    assert [row["id"] for row in _ls(cli, machine)] == ["a1"]
    assert reads == ["a1"]


def test_ls_rereads_documents_changed_within_the_settling_time(
    cli: Cli, cache_dir: Path, reads: list[str]
) -> None:
    """A document written in the last two seconds is read again at the next listing: it may
    have been rewritten since within the same tick of the file system clock."""
    machine = str(COUNTER)
    _new(cli, machine, "a1")
    _ls(cli, machine)
    _ls(cli, machine)
    assert reads == ["a1", "a1"]


def test_a_damaged_index_is_made_again(
    cli: Cli, cache_dir: Path, settled: None, reads: list[str]
) -> None:
    """An index that is not JSON, or not what an index holds, is ignored and replaced."""
    machine = str(COUNTER)
    _new(cli, machine, "a1")
    expected = _ls(cli, machine)
    for damaged in (b"{", json.dumps({"key": 1}).encode()):
        for index in (cache_dir / "listings").iterdir():
            index.write_bytes(damaged)
        assert _ls(cli, machine) == expected
