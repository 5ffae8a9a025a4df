"""Nothing is created, written or locked outside the workspace, whatever is a symbolic link."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from fsm.base.errors import UnsafePathError
from fsm.base.files import atomic_write_text, ensure_folder
from tests.conftest import COUNTER, ENGINE_MACHINES, Cli

C = str(COUNTER)


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` with its content."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the workspace, holding one file."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "keep.txt").write_text("untouched")
    return folder


def _link(path: Path, target: Path) -> None:
    """Replace ``path`` (file or folder) by a symbolic link to ``target``."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize(
    "linked",
    [
        ".counters/c1.fsm",
        ".counters/c1.fsm/journal.ndjson",
        ".counters/c1.fsm/log.ndjson",
        ".counters/c1.fsm/run.lock",
        ".counters/c1.fsm/document.lock",
        ".counters/c1.json",
    ],
)
def test_a_linked_instance_file_or_folder_is_refused(
    cli: Cli, tmp_path: Path, outside: Path, linked: str
) -> None:
    """A meta folder, journal, log, lock or document that is a link to outside the workspace
    makes the run fail with one line (exit 6) and nothing outside changes."""
    assert cli("new", C, "--id", "c1", "--set", "limit=2").code == 0
    target = outside / "target"
    if linked.endswith(".fsm"):
        target.mkdir()
    else:
        target.write_text("outside file\n")
    _link(tmp_path / linked, target)
    before = _snapshot(outside)

    result = cli("run", C, "c1")
    assert result.code == 6, result
    assert len(result.err.strip().splitlines()) == 1
    assert "symbolic link" in result.err and "Traceback" not in result.err
    assert _snapshot(outside) == before


def test_a_storage_folder_linking_out_of_the_workspace_is_refused(
    cli: Cli, tmp_path: Path, outside: Path
) -> None:
    """A storage folder shipped as a link to elsewhere (a cloned repository's `.workflow`) is
    never written through: creating an instance there fails and nothing is created outside."""
    (tmp_path / ".counters").symlink_to(outside)
    before = _snapshot(outside)
    result = cli("new", C, "--id", "c1")
    assert result.code == 6
    assert "outside the workspace" in result.err
    assert _snapshot(outside) == before


def test_a_link_that_stays_inside_the_workspace_is_fine(cli: Cli, tmp_path: Path) -> None:
    """A storage folder that links to another folder of the same workspace is used."""
    (tmp_path / "real-counters").mkdir()
    (tmp_path / ".counters").symlink_to(tmp_path / "real-counters")
    assert cli("new", C, "--id", "c1", "--set", "limit=1").code == 0
    assert cli("run", C, "c1").code == 0
    assert (tmp_path / "real-counters" / "c1.json").is_file()


def test_commands_are_not_recorded_through_a_linked_running_folder(
    cli: Cli, tmp_path: Path, outside: Path
) -> None:
    """The folder recording running commands being a link out does not make fsm write there;
    the command still runs."""
    machine = str(ENGINE_MACHINES / "judged" / "machine.yaml")
    program = tmp_path / "ok.sh"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "in.json").write_text(f'{{"parts": [{{"name": "a", "program": "{program}"}}]}}')
    assert cli("new", machine, "--id", "b1", "--input", str(tmp_path / "in.json")).code == 0
    meta = tmp_path / "builds" / "b1.fsm"
    meta.mkdir(exist_ok=True)
    (meta / "running").symlink_to(outside)
    before = _snapshot(outside)
    assert cli("run", machine, "b1").code == 0
    assert _snapshot(outside) == before


def test_atomic_writes_refuse_to_replace_a_link(tmp_path: Path, outside: Path) -> None:
    """Machines' side files written with atomic_write_text never replace or follow a link."""
    (tmp_path / "side.md").symlink_to(outside / "keep.txt")
    with pytest.raises(UnsafePathError):
        atomic_write_text(tmp_path / "side.md", "new text", root=tmp_path)
    assert (outside / "keep.txt").read_text() == "untouched"
    assert (tmp_path / "side.md").is_symlink()


def test_ensure_folder_refuses_a_path_outside_its_root(tmp_path: Path, outside: Path) -> None:
    """A folder that is not below the root is refused outright."""
    with pytest.raises(UnsafePathError):
        ensure_folder(outside / "x", tmp_path)
    assert not (outside / "x").exists()
    assert os.listdir(outside) == ["keep.txt"]


def test_a_workspace_that_does_not_exist_yet_is_created(tmp_path: Path) -> None:
    """The Python API may name a workspace folder that is not there yet: it is created."""
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    workspace = Workspace(tmp_path / "new" / "project")
    instance = workspace.instance(load_machine(COUNTER), "c1")
    instance.create({"limit": 1})
    assert Engine(instance).run().outcome == "completed"
