"""`fsm status` and `fsm ls` start quickly because they import only what they use: no engine
kernel, Graphviz, terminal toolkit or logging library, no YAML parser once a machine file has
been checked, and for `fsm ls` of unchanged documents not even pydantic or the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import COUNTER

NEVER = ("transitions", "pygraphviz", "rich", "structlog", "subprocess", "asyncio")
"""Modules neither command may import."""


def _imported(workspace: Path, argv: list[str], watched: tuple[str, ...]) -> list[str]:
    """The ``watched`` modules loaded by ``fsm *argv`` run in a fresh process."""
    code = (
        "import contextlib, io, json, sys\n"
        "from fsm.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        "assert code == 0, code\n"
        f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=workspace,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(result.stdout)
    return loaded


@pytest.mark.parametrize("machine", [str(COUNTER), "ccw-loop"], ids=["counter", "ccw-loop"])
def test_status_imports_neither_kernel_graphviz_toolkit_nor_yaml(
    tmp_path: Path, machine: str
) -> None:
    """`fsm status` needs the machine and pydantic, nothing heavier; the second time a machine
    file is read, its checked definition comes from the cache, without YAML."""
    new = ["new", machine, "--id", "i1", "--set", "title=t", "--set", "description=d"]
    if machine == str(COUNTER):
        new = ["new", machine, "--id", "i1"]
    _imported(tmp_path, new, ())
    assert _imported(tmp_path, ["status", machine, "i1"], (*NEVER, "yaml")) == []


def test_a_bundled_machine_is_found_without_distribution_metadata() -> None:
    """fsm's own machines are found without importlib.metadata (and the email parser it reads
    metadata with): that import was a tenth of `fsm status`'s start-up."""
    code = (
        "import sys\n"
        "from fsm.model.discovery import find_machine\n"
        "print(find_machine('ccw-loop').path.is_file(), 'importlib.metadata' in sys.modules)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    assert found.stdout.split() == ["True", "False"], found.stderr


def test_ls_of_unchanged_documents_imports_neither_pydantic_nor_the_machine(
    tmp_path: Path,
) -> None:
    """Once the listed documents have settled, `fsm ls` answers from its index: it imports
    neither pydantic nor the machine's module (nor anything `fsm status` avoids)."""
    for instance_id in ("i1", "i2"):
        inputs = ["--set", "title=t", "--set", "description=d"]
        _imported(tmp_path, ["new", "ccw-loop", "--id", instance_id, *inputs], ())
    time.sleep(2.1)  # the index keeps rows of documents left alone for two seconds
    watched = (*NEVER, "yaml", "pydantic", "fsm_machines.ccw_loop.functions", "fsm.model.records")
    first = _imported(tmp_path, ["ls", "ccw-loop"], watched)
    assert "pydantic" in first  # the first listing reads and validates the documents
    assert _imported(tmp_path, ["ls", "ccw-loop"], watched) == []
    assert _imported(tmp_path, ["ls", "ccw-loop", "--status", "created"], watched) == []


def test_ls_of_every_machine_with_an_fsm_toml_imports_no_pydantic(tmp_path: Path) -> None:
    """`fsm ls` of every machine in a workspace whose fsm.toml names no machine of its own
    answers from its indexes without the configuration module (nor pydantic): the workspace's
    `[machines]` are looked for without parsing a file that cannot hold them."""
    (tmp_path / "fsm.toml").write_text('[machine.ccw-loop]\ntest_command = "true"\n')
    inputs = ["--set", "title=t", "--set", "description=d"]
    _imported(tmp_path, ["new", "ccw-loop", "--id", "i1", *inputs], ())
    time.sleep(2.1)  # the index keeps rows of documents left alone for two seconds
    watched = (*NEVER, "pydantic", "fsm.model.config")
    _imported(tmp_path, ["ls"], watched)
    assert _imported(tmp_path, ["ls"], watched) == []


def test_history_imports_neither_the_control_plane_nor_the_replay_check(tmp_path: Path) -> None:
    """`fsm history` (whole, or its tail) needs the instance and its journal: not the control
    plane and replay check of fsm.view.inspect, nor anything `fsm status` avoids."""
    _imported(tmp_path, ["new", str(COUNTER), "--id", "i1"], ())
    _imported(tmp_path, ["run", str(COUNTER), "i1"], ())
    watched = (*NEVER, "yaml", "fsm.engine.control", "fsm.view.inspect")
    assert _imported(tmp_path, ["history", str(COUNTER), "i1"], watched) == []
    assert _imported(tmp_path, ["history", str(COUNTER), "i1", "--tail", "2"], watched) == []
