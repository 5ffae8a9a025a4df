"""A workspace's own machines: ``[machines]`` in fsm.toml names machine files, which are then
known by name to every command, as installed machines are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fsm.engine.instance import Workspace
from fsm.model.discovery import find_machine, registered_machines
from tests.conftest import COUNTER, Cli


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The temporary workspace with the counter machine copied into machines/counter/."""
    shutil.copytree(COUNTER.parent, tmp_path / "machines" / "counter")
    return tmp_path


def _toml(workspace: Path, text: str) -> None:
    (workspace / "fsm.toml").write_text(text)


@pytest.mark.parametrize(
    "where", ["machines/counter", "machines/counter/machine.yaml"], ids=["folder", "file"]
)
def test_a_named_machine_is_created_listed_and_run_by_name(
    cli: Cli, workspace: Path, where: str
) -> None:
    """`fsm new counter`, `fsm ls` and `fsm run --all` know a machine the workspace names, by
    its file or its folder, as they know an installed one."""
    _toml(workspace, f'[machines]\ncounter = "{where}"\n')
    created = cli("new", "counter")
    assert created.code == 0, created.err
    instance_id = created.out.strip()
    listed = cli("ls")
    assert listed.code == 0 and instance_id in listed.out
    assert listed.out.splitlines()[1].split()[:1] == ["counter"]  # under the header
    ran = cli("run", "--all")
    assert ran.code == 0, ran.err
    assert f"counter {instance_id}: completed in state 'done'" in ran.out
    machines = cli("machines", "--json").json()
    (row,) = [row for row in machines if row["name"] == "counter"]
    assert row["source"].startswith("workspace (") and row["path"].endswith("machine.yaml")


def test_without_the_table_the_listing_does_not_know_the_machine(cli: Cli, workspace: Path) -> None:
    """A machine used only by path is not listed by name: the table is what makes it known
    (the difference the docs explain)."""
    created = cli("new", str(workspace / "machines" / "counter" / "machine.yaml"))
    assert created.code == 0
    assert created.out.strip() not in cli("ls").out
    assert cli("new", "counter").code == 2


def test_the_python_api_finds_the_workspace_machines(workspace: Path) -> None:
    """`Workspace(path).instance("counter", ...)` loads the machine the workspace names."""
    _toml(workspace, '[machines]\ncounter = "machines/counter"\n')
    instance = Workspace(workspace).instance("counter", "c1")
    assert instance.machine.path == workspace.resolve() / "machines/counter/machine.yaml"
    assert find_machine("counter", workspace).source.startswith("workspace (")
    assert "counter" not in registered_machines()  # no workspace named: installed ones only


def test_a_name_of_an_installed_machine_is_not_taken(cli: Cli, workspace: Path) -> None:
    """A workspace machine named like a bundled one never replaces it: `fsm machines` warns,
    `fsm check` fails naming both, and the name still means the bundled machine."""
    _toml(workspace, '[machines]\nccw-loop = "machines/counter"\n')
    machines = cli("machines")
    assert machines.code == 0
    assert "has the name of an installed machine" in machines.err
    assert "bundled (" in next(line for line in machines.out.splitlines() if "ccw-loop" in line)
    checked = cli("check")
    assert checked.code == 1
    assert "machine 'ccw-loop' of workspace" in checked.out
    assert find_machine("ccw-loop", workspace).source.startswith("bundled")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('counter = "nosuch"', "machine 'counter' of workspace ("),
        ("counter = {limit = 3}", "options go in [machine.counter]"),
        ("counter = 3", "[machines] counter must be the path of a machine file (a string)"),
        ('"1x" = "machines/counter"', "'1x' is not a machine name"),
        ('count = "machines/counter"', "name: is 'counter', registered as 'count'"),
    ],
    ids=["missing-file", "options-table", "not-a-string", "bad-name", "name-mismatch"],
)
def test_a_bad_entry_is_one_error_line(cli: Cli, workspace: Path, table: str, message: str) -> None:
    """Each kind of bad `[machines]` entry stops a command naming it with one error line
    saying what is wrong, exit 2, and creates nothing."""
    _toml(workspace, f"[machines]\n{table}\n")
    name = table.split(maxsplit=1)[0].strip('"')
    result = cli("new", name)
    assert result.code == 2
    assert result.err.startswith("fsm: error: ") and result.err.count("\n") == 1
    assert message in result.err
    assert not (workspace / ".counters").exists()


def test_a_broken_entry_does_not_hide_the_other_machines(cli: Cli, workspace: Path) -> None:
    """`fsm ls` lists the instances of the machines that load and one row naming the machine
    that does not."""
    _toml(workspace, '[machines]\ncounter = "machines/counter"\nbroken = "nowhere"\n')
    instance_id = cli("new", "counter").out.strip()
    listed = cli("ls")
    assert listed.code == 0
    assert instance_id in listed.out
    assert "broken" in listed.out and "is not there" in listed.out


def test_a_fifo_entry_does_not_hide_the_other_machines(cli: Cli, workspace: Path) -> None:
    """`fsm machines` lists every machine when one [machines] entry is a FIFO: that one is a
    row saying it cannot be loaded (and the error line names it), never a wait or an error
    hiding the rest."""
    import os

    os.mkfifo(workspace / "fifo.yaml")
    _toml(workspace, '[machines]\ncounter = "machines/counter"\nbroken = "fifo.yaml"\n')
    listed = cli("machines")
    assert listed.code == 1
    names = [line.split()[0] for line in listed.out.splitlines()]
    assert {"broken", "counter", "ccw-loop"} <= set(names)
    assert "cannot be loaded: broken" in listed.err
