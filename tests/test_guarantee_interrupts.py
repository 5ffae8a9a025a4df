"""An interrupted run never leaves a command of its own running, whenever the interrupt lands.

``fsm run`` turns SIGTERM and Ctrl-C into an interrupt; a command it started runs in its own
session, so only fsm can take it down. The interrupt may land at any moment after the command
started, including while fsm records it for :mod:`fsm.process.orphans` (found: a SIGTERM in that
moment left the command running and unrecorded, so not even the next run could reap it; it made
``test_terminated_run_takes_its_running_command_down`` fail under load).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fsm.process import orphans
from fsm.process.executor import SubprocessExecutor
from tests.guarantees.waiting import is_running, wait_until


def test_an_interrupt_while_the_command_is_recorded_takes_it_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interrupt arrives right after the command started, while fsm writes its record."""
    real = orphans.record

    def record_then_interrupted(*args: Any, **kwargs: Any) -> Path | None:
        wait_until(lambda: (tmp_path / "child.pid").exists(), "the command started its child")
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(orphans, "record", record_then_interrupted)
    executor = SubprocessExecutor(tmp_path, running_dir=tmp_path / "running")
    with pytest.raises(KeyboardInterrupt):
        executor.shell("sleep 60 & echo $! > child.pid; wait", timeout=120)
    wait_until(lambda: (tmp_path / "child.pid").read_text().strip(), "the pid was written")
    child = int((tmp_path / "child.pid").read_text())
    wait_until(lambda: not is_running(child), "the command's child was killed")
    assert orphans.reap(tmp_path / "running") == []  # nothing left for the next run to kill
    assert not list((tmp_path / "running").glob("*.json"))
