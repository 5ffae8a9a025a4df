"""Files fsm reads that are FIFOs (or devices) are refused or skipped at once, never waited on:
reading a FIFO blocks until some program writes into it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import COUNTER

C = str(COUNTER)


def _fsm(folder: Path, cache: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "FSM_STORE"}
    environment["FSM_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "fsm", "-C", str(folder), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environment,
    )


def test_a_listing_cache_entry_that_is_a_fifo_is_not_read(tmp_path: Path) -> None:
    """fsm ls keeps an index of its rows in the cache folder; an entry replaced by a FIFO is
    ignored (the rows are read anew) instead of blocking the listing."""
    folder, cache = tmp_path / "app", tmp_path / "cache"
    folder.mkdir()
    assert _fsm(folder, cache, "new", C, "--id", "c1").returncode == 0
    first = _fsm(folder, cache, "ls", C)
    assert first.returncode == 0, first.stderr
    entries = [p for p in (cache / "listings").iterdir() if p.is_file()]
    assert entries
    for entry in entries:
        entry.unlink()
        os.mkfifo(entry)
    again = _fsm(folder, cache, "ls", C)
    assert again.returncode == 0, again.stderr
    assert "c1" in again.stdout
