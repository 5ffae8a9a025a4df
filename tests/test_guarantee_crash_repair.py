"""What the next command repairs after a crash, one case at a time (the crash tests found them:
``test_guarantee_crashes``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.base.files import atomic_write_text, write_temporary
from fsm.engine.control import ControlPlane
from fsm.engine.engine import Engine
from fsm.engine.instance import Instance
from fsm.store import file_swap as commit_module
from fsm.view.inspect import check_replay

Make = Callable[..., Instance]


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child ends at once
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def _left_by(pid: int, path: Path) -> Path:
    """A temporary file of ``path`` as a write by process ``pid`` killed midway leaves it."""
    tmp = write_temporary(path, b"half")
    left = tmp.with_name(tmp.name.replace(f".{os.getpid()}.", f".{pid}.", 1))
    tmp.rename(left)
    return left


def test_a_side_file_write_removes_what_killed_writes_of_it_left(tmp_path: Path) -> None:
    """A machine's side file written again (the killed step runs again) takes the temporary
    files of the killed writes away; a temporary of a live writer stays."""
    side = tmp_path / "report.md"
    dead = _left_by(_dead_pid(), side)
    alive = _left_by(os.getppid(), side)
    atomic_write_text(side, "done\n", root=tmp_path)
    assert side.read_text() == "done\n"
    assert not dead.exists()
    assert alive.exists()


def test_the_next_run_removes_side_temporaries_in_the_instances_own_folders(
    make_counter: Make,
) -> None:
    """Temporary files of killed side-file writes in the meta folder are removed by the next
    run, which says so in the journal."""
    instance = make_counter(limit=1)
    left = _left_by(_dead_pid(), instance.store.paths(instance.id).meta / "notes.json")
    assert Engine(instance).run().outcome == "completed"
    assert not left.exists()
    repairs = [r["reason"] for r in instance.journal.read().records if r["kind"] == "repair"]
    assert repairs == ["removed 1 temporary file(s) of killed side-file writes"]
    check_replay(instance)


def test_completing_a_killed_write_runs_its_after_save_hook(
    make_counter: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the journal record, before the document was replaced: the repair completes
    the write and runs the ``after_save`` hook the killed process never reached, once."""
    instance = make_counter(limit=3)
    ControlPlane(instance).apply("start")
    saved: list[int] = []

    def after_save(self: Instance, loaded: Any) -> None:
        saved.append(loaded.data["count"])

    monkeypatch.setattr(Instance, "after_save", after_save)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child dies
        monkeypatch.setattr(commit_module, "exchange", lambda *a: os.kill(os.getpid(), 9))
        Engine(instance).step()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WTERMSIG(status) == signal.SIGKILL
    assert saved == []
    Engine(instance).run(max_steps=0)
    assert saved == [1]
    check_replay(instance)
