"""Machine discovery: bundled machines, entry-point plugins and machine files named by path."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.base.errors import DefinitionError, UnknownMachineError
from fsm.model.discovery import BUNDLED, find_machine, open_machine, registered_machines
from tests.conftest import COUNTER, Cli


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An installed third-party distribution registering the counter as `my-counter`."""
    package = tmp_path / "my_counter_pkg"
    shutil.copytree(COUNTER.parent, package)
    (package / "__init__.py").write_text('"""A third-party machine."""\n')
    text = (package / "machine.yaml").read_text().replace("name: counter", "name: my-counter")
    (package / "machine.yaml").write_text(text)
    dist = tmp_path / "my_counter-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-counter\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[fsm.machines]\nmy-counter = my_counter_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    sys.modules.pop("my_counter_pkg", None)


def test_entry_point_machines_are_registered(plugin: Path) -> None:
    """A distribution's `fsm.machines` entry point makes its machine available by name."""
    entry = registered_machines()["my-counter"]
    assert entry.path == plugin / "machine.yaml"
    assert entry.source.startswith("entry point")
    assert open_machine("my-counter").name == "my-counter"


def test_a_path_names_a_machine_file_or_its_folder() -> None:
    """A machine may be named by its file or by the folder holding machine.yaml."""
    assert find_machine(str(COUNTER)).path == COUNTER
    assert find_machine(str(COUNTER.parent)).path == COUNTER


def test_unknown_machine_suggests_a_close_name() -> None:
    """An unknown name is an input error with a did-you-mean among registered machines."""
    with pytest.raises(UnknownMachineError, match="did you mean 'ccw-loop'"):
        find_machine("ccw-lop")


def test_bundled_machines_are_entry_points_of_fsm_itself() -> None:
    """The three bundled machines register through the same entry-point group as third-party
    ones, as packages of `fsm_machines` (not a generic top-level `machines`)."""
    import importlib.metadata

    points = {
        e.name: e.value
        for e in importlib.metadata.distribution("fsm").entry_points
        if e.group == "fsm.machines"
    }
    assert points == {
        "ccw-loop": "fsm_machines.ccw_loop",
        "issue-manager": "fsm_machines.issue_manager",
        "skill-tuning": "fsm_machines.skill_tuning",
    }
    assert points == BUNDLED  # what fsm finds without reading its metadata
    registered = registered_machines()
    assert {name: registered[name].source for name in points} == {
        name: f"bundled ({value})" for name, value in points.items()
    }


def test_registered_name_must_match_the_file(tmp_path: Path, plugin: Path) -> None:
    """A machine registered under one name whose file says another is a definition error."""
    text = (plugin / "machine.yaml").read_text().replace("name: my-counter", "name: other")
    (plugin / "machine.yaml").write_text(text)
    with pytest.raises(DefinitionError, match="registered as 'my-counter'"):
        open_machine("my-counter")


def _distribution(root: Path, name: str, points: str) -> None:
    """An installed distribution `name` whose `fsm.machines` entry points are `points`."""
    dist = root / f"{name.replace('-', '_')}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[fsm.machines]\n{points}\n")


def test_a_plugin_cannot_take_a_bundled_machines_name(
    tmp_path: Path, plugin: Path, cli: Cli
) -> None:
    """An entry point registering `ccw-loop` is ignored (the bundled machine stays what the
    name means), and `fsm check` and `fsm machines` say so."""
    from fsm.model.check import check_all

    _distribution(tmp_path, "impostor", "ccw-loop = my_counter_pkg")
    entry = find_machine("ccw-loop")
    assert entry.source == "bundled (fsm_machines.ccw_loop)"
    assert registered_machines()["ccw-loop"].source.startswith("bundled")
    clash = [r for r in check_all() if r.findings and r.findings[0].check == "name-clash"]
    assert [(r.target, r.exit_code) for r in clash] == [("ccw-loop", 1)]
    assert "'my_counter_pkg'" in clash[0].findings[0].message
    assert "is ignored" in clash[0].findings[0].message
    listed = cli("machines")
    assert listed.code == 0
    assert "fsm: warning: machine 'ccw-loop' is bundled with fsm" in listed.err
    assert "[bundled (fsm_machines.ccw_loop)]" in listed.out


def test_a_name_two_plugins_register_is_refused_where_it_is_used(
    tmp_path: Path, plugin: Path
) -> None:
    """Two distributions registering `my-counter` leave the name ambiguous: using it is a clear
    error naming both entry points, not whichever sys.path happened to list first."""
    _distribution(tmp_path, "other-counter", "my-counter = other_pkg.counter")
    assert "my-counter" not in registered_machines()
    with pytest.raises(DefinitionError, match="registered by 2 entry points") as caught:
        find_machine("my-counter")
    assert "'my_counter_pkg'" in str(caught.value)
    assert "'other_pkg.counter'" in str(caught.value)
    assert caught.value.exit_code == 2


def test_one_distribution_seen_twice_is_no_clash(tmp_path: Path, plugin: Path) -> None:
    """The same entry point found twice on sys.path (a package installed and also on the
    path) registers one machine."""
    second = tmp_path / "again"
    second.mkdir()
    _distribution(second, "my-counter", "my-counter = my_counter_pkg")
    sys.path.insert(0, str(second))
    try:
        assert find_machine("my-counter").path == plugin / "machine.yaml"
    finally:
        sys.path.remove(str(second))
