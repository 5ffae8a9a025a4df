"""Nothing is lost when the disk fills: a run whose writes are refused part way (a file-size
limit, a full file system) ends with one line and exit 6, and its journal and document still
agree (replay passes, the count is the number of counting steps journaled)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.base.files import append_bytes
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from fsm.view.inspect import check_replay
from tests.conftest import COUNTER, fsm_process

C = str(COUNTER)


def _fsm(workspace: Path, *argv: str, file_limit: int | None = None) -> tuple[int, str]:
    """Run ``fsm`` in a process of its own (with at most ``file_limit`` bytes per file it
    writes); return its exit code and stderr."""

    def limited() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    process = fsm_process(workspace, "--log-level", "error", *argv, preexec_fn=limited)
    _, err = process.communicate(timeout=600)
    return process.returncode, err


def _assert_agree(workspace: Path) -> int:
    """Journal and document agree; return the count."""
    instance = Workspace(workspace).instance(load_machine(COUNTER), "c1")
    check_replay(instance)
    counted = [
        line
        for line in instance.store.paths(instance.id).journal.read_text().splitlines()
        if '"event":"count"' in line and '"kind":"transition"' in line
    ]
    count = int(json.loads(instance.store.paths(instance.id).document.read_text())["count"])
    assert count == len(counted)
    return count


def _one_error_line(err: str) -> None:
    """The run's end is one error line (after its progress lines), and no traceback."""
    lines = err.strip().splitlines()
    assert [line for line in lines if line.startswith("fsm:")] == lines[-1:], err
    assert lines[-1].startswith("fsm: error: "), err
    assert "Traceback" not in err


def test_a_file_size_limit_reached_by_the_journal_loses_no_record(tmp_path: Path) -> None:
    """`ulimit -f` reached while a step's journal record is appended: the record is taken back,
    the step is not committed, the run ends with one line and exit 6, and the next run goes on
    from where the document is."""
    assert _fsm(tmp_path, "new", C, "--id", "c1", "--set", "limit=100000")[0] == 0
    assert _fsm(tmp_path, "run", C, "c1", "--max-steps", "300")[0] == 5
    meta = tmp_path / ".counters" / "c1.fsm"
    (meta / "log.ndjson").unlink()  # the journal, not the log, reaches the limit first
    limit = (meta / "journal.ndjson").stat().st_size + 20_000
    code, err = _fsm(tmp_path, "run", C, "c1", file_limit=limit)
    assert code == 6, err
    _one_error_line(err)
    assert (meta / "journal.ndjson").stat().st_size <= limit
    counted = _assert_agree(tmp_path)
    assert counted > 300
    assert _fsm(tmp_path, "run", C, "c1", "--max-steps", "5")[0] == 5
    assert _assert_agree(tmp_path) == counted + 5


@contextlib.contextmanager
def _small_file_system(folder: Path, size: str) -> Iterator[None]:
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small file system needs root to mount a tmpfs (run the suite as root)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'refused'}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_file_system_loses_no_record(tmp_path: Path) -> None:
    """A run on a file system that fills up ends with one line and exit 6; its journal and
    document agree, and once space is freed the next run goes on."""
    workspace = tmp_path / "small"
    with _small_file_system(workspace, "1m"):
        assert _fsm(workspace, "new", C, "--id", "c1", "--set", "limit=100000")[0] == 0
        code, err = _fsm(workspace, "run", C, "c1")
        assert code == 6, err
        _one_error_line(err)
        counted = _assert_agree(workspace)
        assert counted > 0
        (workspace / ".counters" / "c1.fsm" / "log.ndjson").unlink()
        assert _fsm(workspace, "run", C, "c1", "--max-steps", "3")[0] == 5
        assert _assert_agree(workspace) == counted + 3


def test_a_short_append_is_completed_or_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that stores only part of a line is finished with the rest; when the rest is
    refused, the part written is taken back: no torn line is ever left."""
    path = tmp_path / "lines"
    path.write_bytes(b"first\n")
    real_write = os.write
    calls = []

    def half_then(fail: bool):  # type: ignore[no-untyped-def]
        def write(fd: int, data: bytes) -> int:
            calls.append(len(data))
            if len(calls) == 1:
                return real_write(fd, bytes(data[: len(data) // 2]))
            if fail:
                raise OSError(27, "File too large")
            return real_write(fd, data)

        return write

    monkeypatch.setattr(os, "write", half_then(fail=False))
    assert append_bytes(path, b"second line\n") == 6
    assert path.read_bytes() == b"first\nsecond line\n"
    calls.clear()
    monkeypatch.setattr(os, "write", half_then(fail=True))
    with pytest.raises(OSError, match="File too large"):
        append_bytes(path, b"third line\n")
    assert path.read_bytes() == b"first\nsecond line\n"
