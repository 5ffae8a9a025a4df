"""Cases an adversarial run found, kept by category so that each class stays fixed: nothing fsm
reads can hang it, what it rewrites stays as private as it was, and a failure no retry can mend
ends a run at once with one line and its exit code (other categories: test_hostile_files.py,
test_hostile_yaml.py, test_hostile_inputs.py, test_guarantee_disk_full.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import COUNTER, Cli

C = str(COUNTER)


def _fsm(workspace: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``fsm`` in its own process with a deadline: a hang fails the test, not the suite."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(workspace), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _fifo_instead(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


# --- hangs: a FIFO in place of a file the store reads -----------------------------------------


def _document(workspace: Path) -> Path:
    return workspace / ".counters" / "c1.json"


def _journal(workspace: Path) -> Path:
    return workspace / ".counters" / "c1.fsm" / "journal.ndjson"


FIFOS = [
    pytest.param(command, where, id=f"{command}-{where.__name__.strip('_')}")
    for where in (_document, _journal)
    for command in ("status", "replay", "history", "run")
    if (command, where) != ("history", _document)  # history reads the journal alone
]


@pytest.mark.parametrize(("command", "where"), FIFOS)
def test_a_fifo_in_place_of_a_store_file_is_a_store_error(
    cli: Cli, tmp_path: Path, command: str, where: Callable[[Path], Path]
) -> None:
    """A FIFO where the document or the journal should be is refused at once, one line naming
    it (exit 6): no command waits for someone to write to it."""
    assert cli("new", C, "--id", "c1").code == 0
    _fifo_instead(where(tmp_path))
    done = _fsm(tmp_path, command, C, "c1")
    assert done.returncode == 6, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "is a FIFO (named pipe), not a regular file" in lines[0]


def test_a_fifo_in_place_of_the_log_stops_a_run_not_a_reader(cli: Cli, tmp_path: Path) -> None:
    """A FIFO where the instance's log should be: `fsm status` reads on (it writes no log),
    `fsm run` ends with one line naming the FIFO (exit 6)."""
    assert cli("new", C, "--id", "c1").code == 0
    log = tmp_path / ".counters" / "c1.fsm" / "log.ndjson"
    if log.exists():
        log.unlink()
    os.mkfifo(log)
    assert _fsm(tmp_path, "status", C, "c1").returncode == 0
    done = _fsm(tmp_path, "run", C, "c1")
    assert done.returncode == 6, done.stderr
    assert "log.ndjson" in done.stderr and "FIFO" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# --- privacy: what fsm rewrites keeps the document's mode --------------------------------------


def test_recover_keeps_a_private_document_private(tmp_path: Path) -> None:
    """`fsm recover` of a corrupt `chmod 600` document writes the rebuilt one 0600 too (it was
    rewritten 0644, readable by everyone)."""
    new = _fsm(tmp_path, "new", "ccw-loop", "--set", "title=private")
    assert new.returncode == 0, new.stderr
    loop_id = new.stdout.strip()
    document = tmp_path / ".workflow" / ".loop" / f"{loop_id}.json"
    document.chmod(0o600)
    document.write_text("{not json")
    done = _fsm(tmp_path, "recover", "ccw-loop", loop_id)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(document.stat().st_mode) == 0o600
    kept = [p for p in document.parent.iterdir() if ".corrupt-" in p.name]
    assert [stat.S_IMODE(p.stat().st_mode) for p in kept] == [0o600]


# --- failures no retry can mend -----------------------------------------------------------------


def test_a_progress_folder_linked_out_of_the_workspace_ends_the_run_at_once(
    tmp_path: Path,
) -> None:
    """ccw-loop whose progress folder is a link out of the workspace: nothing is written through
    it, and the run ends after the one failed step with one line (exit 6), not after 100."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "tasks.jsonl").write_text(
        '{"task_id": "t1", "description": "d", "tool": "bash", "command": "true"}\n'
    )
    (workspace / "fsm.toml").write_text(
        '[machine.ccw-loop]\ntask_list = "tasks.jsonl"\nfix_tool = "none"\n'
        'test_command = "python -m pytest -q"\n'
    )
    loop_id = _fsm(workspace, "new", "ccw-loop", "--set", "title=x").stdout.strip()
    (workspace / ".workflow" / ".loop" / f"{loop_id}.progress").symlink_to(outside)
    done = _fsm(workspace, "run", "ccw-loop", loop_id, "-q")
    assert done.returncode == 6, (done.stdout, done.stderr)
    assert done.stderr.strip().splitlines() == [
        f"fsm: error: {workspace}/.workflow/.loop/{loop_id}.progress is a symbolic link to "
        f"{outside}, outside the workspace {workspace}: fsm does not write through it"
    ]
    assert list(outside.iterdir()) == []
    history = _fsm(workspace, "history", "ccw-loop", loop_id).stdout.splitlines()
    assert sum(" error " in line for line in history) == 1


def test_a_failure_its_bookkeeping_cannot_count_stops_the_run(cli: Cli, tmp_path: Path) -> None:
    """When a step fails and the machine's on_error hook fails too, no error limit can count it:
    the run stops after that step (exit 1) saying both, instead of repeating it 100 times."""
    machine = tmp_path / "m"
    shutil.copytree(COUNTER.parent, machine)
    functions = machine / "functions.py"
    functions.write_text(
        functions.read_text().replace(
            '    """Append the failure to ``errors``."""\n',
            '    """Append the failure to ``errors``."""\n'
            '    raise RuntimeError("the error log is full")\n',
        )
    )
    path = str(machine / "machine.yaml")
    assert cli("new", path, "--id", "c1", "--set", "fail_at=0").code == 0
    result = cli("run", path, "c1")
    assert result.code == 1, result.err
    assert "after 1 steps" in result.out
    assert "increment failed: RuntimeError: cannot count past 0" in result.out
    assert "its error bookkeeping (on_error) failed too, so the run stops" in result.out
    assert "the error log is full" in result.out
