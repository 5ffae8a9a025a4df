"""Files fsm reads that are not files (a FIFO, a device, a folder) or are too large: refused at
once with one line naming the file and what it is, never a hang, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm.base.reading import FileTooLargeError, NotARegularFileError, read_limited
from tests.conftest import COUNTER

Make = Callable[[Path], None]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _folder(path: Path) -> None:
    path.mkdir()


KINDS = [
    pytest.param(_fifo, "is a FIFO (named pipe), not a regular file", id="fifo"),
    pytest.param(_device, "is a character device, not a regular file", id="dev-zero"),
    pytest.param(_folder, "is a folder, not a regular file", id="folder"),
]


def _fsm(workspace: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``fsm`` in its own process, so that a hang fails the test instead of the suite."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(workspace), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _one_error(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    # fsm check reports a file's problems as its result (`path: error: ...`), the others on stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("fsm: error:") or ": error:" in lines[0]
    for part in parts:
        assert part in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("make", "said"), KINDS)
def test_fsm_toml_that_is_not_a_file_is_refused(tmp_path: Path, make: Make, said: str) -> None:
    """An fsm.toml that is a FIFO, a device or a folder is one error line naming it."""
    make(tmp_path / "fsm.toml")
    _one_error(_fsm(tmp_path, "new", str(COUNTER)), "fsm.toml", said)
    assert [p.name for p in tmp_path.iterdir()] == ["fsm.toml"]


@pytest.mark.parametrize(("make", "said"), KINDS)
def test_machine_file_that_is_not_a_file_is_refused(tmp_path: Path, make: Make, said: str) -> None:
    """`fsm check` of a machine.yaml that is a FIFO, a device or a folder names it."""
    folder = tmp_path / "m"
    folder.mkdir()
    make(folder / "machine.yaml")
    done = _fsm(tmp_path, "check", str(folder / "machine.yaml"))
    _one_error(done, "machine.yaml", "cannot read machine file", said)


@pytest.mark.parametrize(("make", "said"), KINDS)
def test_input_file_that_is_not_a_file_is_refused(tmp_path: Path, make: Make, said: str) -> None:
    """`fsm new --input` of a FIFO, a device or a folder names it and creates nothing."""
    make(tmp_path / "in.json")
    done = _fsm(tmp_path, "new", str(COUNTER), "--input", str(tmp_path / "in.json"))
    _one_error(done, "in.json", said)
    assert [p.name for p in tmp_path.iterdir()] == ["in.json"]


def test_option_with_a_nul_character_is_bad_input(tmp_path: Path) -> None:
    """A NUL in an option value is refused by name (it would reach a path or an argv)."""
    (tmp_path / "fsm.toml").write_text('[machine.counter]\nlimit = "a\\u0000b"\n')
    done = _fsm(tmp_path, "new", str(COUNTER))
    _one_error(done, "option 'limit'", "contains a NUL character")


def test_read_limited_reads_a_file_up_to_its_limit(tmp_path: Path) -> None:
    """A regular file is read whole at its limit, and refused one byte over it."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_limited(path, 10) == b"x" * 10
    with pytest.raises(FileTooLargeError, match="larger than the limit of 9 bytes"):
        read_limited(path, 9)


def test_read_limited_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    """Reading a FIFO nobody writes to is refused at once, naming it."""
    os.mkfifo(tmp_path / "p")
    with pytest.raises(NotARegularFileError) as raised:
        read_limited(tmp_path / "p", 100)
    assert str(raised.value) == "is a FIFO (named pipe), not a regular file"
