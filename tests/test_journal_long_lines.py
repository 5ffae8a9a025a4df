"""A journal line longer than any record can be (a torn 200 MB last line) is one unreadable
line to every reader, read past without being held in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsm.store import journal as journal_module
from fsm.store.journal import Journal

LIMIT = 4096


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines over 4 kB are too long, read 1 kB at a time: the same paths as 32 MB lines."""
    monkeypatch.setattr(journal_module, "MAX_LINE", LIMIT)
    monkeypatch.setattr(journal_module, "_BLOCK", 1024)


def _write(path: Path, *lines: bytes) -> None:
    path.write_bytes(b"".join(lines))


def _record(n: int) -> bytes:
    return json.dumps({"kind": "control", "n": n}).encode() + b"\n"


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("torn", [True, False], ids=["torn-last-line", "middle-line"])
def test_a_line_too_long_is_one_unreadable_line(tmp_path: Path, torn: bool) -> None:
    path = tmp_path / "journal.ndjson"
    huge = b'{"kind":"transition","x":"' + b"a" * (LIMIT * 5)
    if torn:
        _write(path, _record(1), _record(2), huge)
    else:
        _write(path, _record(1), huge + b'"}\n', _record(3))
    scanned = [(number, record) for number, _, record in Journal(path).scan()]
    assert [number for number, _ in scanned] == [1, 2, 3]
    unreadable = 3 if torn else 2
    assert [number for number, record in scanned if record is None] == [unreadable]
    backwards = [record["n"] for record in Journal(path).backwards()]
    assert backwards == ([2, 1] if torn else [3, 1])
