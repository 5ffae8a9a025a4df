"""Shared fixtures: the engine's test machines, workspaces and an in-process CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog

from fsm.base.clock import SimulatedClock
from fsm.cli import main
from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine, load_machine

ENGINE_MACHINES = Path(__file__).parent / "engine_machines"
COUNTER = ENGINE_MACHINES / "counter" / "machine.yaml"
BARE = ENGINE_MACHINES / "bare" / "machine.yaml"


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """fsm's cache (checked definitions, ls indexes) in a folder of this test session, never
    the user's: processes the tests start inherit it."""
    previous = os.environ.get("FSM_CACHE_DIR")
    os.environ["FSM_CACHE_DIR"] = str(tmp_path_factory.mktemp("fsm-cache"))
    yield
    if previous is None:
        os.environ.pop("FSM_CACHE_DIR", None)
    else:
        os.environ["FSM_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    """Keep structlog's default console output out of test output."""
    structlog.configure(
        processors=[structlog.processors.KeyValueRenderer()],
        logger_factory=structlog.ReturnLoggerFactory(),
    )
    yield
    structlog.reset_defaults()


@pytest.fixture
def counter() -> Machine:
    """The counter test machine."""
    return load_machine(COUNTER)


@pytest.fixture
def bare() -> Machine:
    """The bare test machine (no control block, no error hook)."""
    return load_machine(BARE)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A workspace in a temporary folder with a simulated clock."""
    return Workspace(tmp_path, clock=SimulatedClock(tick=0.001))


@pytest.fixture
def make_counter(workspace: Workspace, counter: Machine) -> Callable[..., Instance]:
    """Create a counter instance with the given document values."""
    created = 0

    def make(instance_id: str | None = None, **values: Any) -> Instance:
        nonlocal created
        created += 1
        instance = workspace.instance(counter, instance_id or f"c{created}")
        instance.create(values)
        return instance

    return make


@dataclass
class CliResult:
    """Exit code and output of one in-process CLI call."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON."""
        return json.loads(self.out)


Cli = Callable[..., CliResult]
"""The type of the ``cli`` fixture."""


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``fsm`` in-process in the temporary workspace."""

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        code = main(["-C", str(tmp_path), "--log-level", "warning", *argv])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def fsm_process(workspace: Path, *argv: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start ``fsm`` as a separate process in ``workspace``."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    return subprocess.Popen(
        [sys.executable, "-m", "fsm", "-C", str(workspace), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,
    )


def read_json(path: Path) -> Any:
    """Parse a JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))
