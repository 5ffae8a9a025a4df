"""What `pip install` puts on the machine: every package folder, under this project's names."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_installed() -> None:
    """pyproject's package list names every folder with an __init__.py under fsm/ and
    machines/ (installed as fsm_machines), and the web view's static files, and nothing else."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"fsm": ROOT / "fsm", "fsm_machines": ROOT / "machines"}
    assert config["package-dir"] == {"fsm_machines": "machines"}
    found = {
        ".".join((name, *init.parent.relative_to(folder).parts))
        for name, folder in folders.items()
        for init in folder.rglob("__init__.py")
    }
    assert sorted(config["packages"]) == sorted({*found, "fsm.serve.static"})
    assert config["package-data"]["fsm.serve.static"] == ["*.html", "*.css", "*.js"]


def test_no_top_level_machines_package_is_imported() -> None:
    """fsm and the bundled machines never import a top-level `machines` module (which would
    collide with other projects' modules of that name)."""
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("fsm", "machines")
        for path in (ROOT / folder).rglob("*.py")
        if "from machines" in path.read_text() or "import machines" in path.read_text()
    ]
    assert offenders == []
