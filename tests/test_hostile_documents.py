"""Hostile instance documents and journal lines: a store error or a marked row, never a crash."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from types import FrameType

import pytest

from tests.conftest import COUNTER, Cli

C = str(COUNTER)

DEEP = "[" * 100_000 + "]" * 100_000


def _new(cli: Cli, instance_id: str = "c1") -> None:
    result = cli("new", C, "--id", instance_id, "--set", "limit=1")
    assert result.code == 0, result.err


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(DEEP, "nested deeper than 100 levels", id="100k-deep"),
        pytest.param('{"status": "created", "x": ' + DEEP + "}", "nested deeper", id="deep-field"),
        pytest.param(
            '{"status": "created", "x": ' + "[" * 101 + "]" * 101 + "}",
            "nested deeper than 100 levels",
            id="101-deep-field",
        ),
        pytest.param('{"limit": ' + "7" * 5000 + "}", "a number too long", id="5000-digits"),
        pytest.param('{"limit": NaN}', "NaN is not a JSON number", id="nan"),
        pytest.param(b'{"title": "\xff\xfe"}', "not UTF-8 text", id="not-utf8"),
        pytest.param("[1, 2]", "expected a JSON object, found list", id="not-an-object"),
    ],
)
@pytest.mark.parametrize("command", ["status", "run", "step", "pause"])
def test_hostile_document_is_a_store_error_and_untouched(
    cli: Cli, tmp_path: Path, content: str | bytes, reason: str, command: str
) -> None:
    """Every command that reads a hostile document exits 6 with one line naming the file and
    the reason, and leaves the file byte for byte as it was."""
    _new(cli)
    path = tmp_path / ".counters" / "c1.json"
    raw = content.encode() if isinstance(content, str) else content
    path.write_bytes(raw)
    result = cli(command, C, "c1")
    assert result.code == 6, result.err
    assert reason in result.err and str(path) in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "internal error" not in result.err
    assert path.read_bytes() == raw


def test_document_larger_than_the_limit_is_a_store_error(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document over the size limit is refused as corrupt (exit 6), not parsed."""
    _new(cli)
    monkeypatch.setattr("fsm.base.jsonio.MAX_BYTES", 64)
    path = tmp_path / ".counters" / "c1.json"
    path.write_text(json.dumps({"status": "created", "title": "x" * 100}))
    result = cli("status", C, "c1")
    assert result.code == 6 and "larger than the limit of 64 bytes" in result.err


HOSTILE_LINES = [
    pytest.param(DEEP, id="100k-deep"),
    pytest.param('{"kind": "control", "n": ' + "1" * 5000 + "}", id="5000-digits"),
    pytest.param('{"kind": "control", "x": NaN}', id="nan"),
    pytest.param('{"kind": "control", "x": ' + "[" * 101 + "]" * 101 + "}", id="101-deep"),
    pytest.param("[1, 2, 3]", id="not-an-object"),
]


@pytest.mark.parametrize("line", HOSTILE_LINES)
def test_hostile_journal_line_is_skipped_and_reported(cli: Cli, tmp_path: Path, line: str) -> None:
    """`fsm history` skips a hostile journal line with a warning naming it, prints the other
    records, and `fsm replay` reports it as an unreadable line (exit 6), not an internal error."""
    _new(cli)
    journal = tmp_path / ".counters" / "c1.fsm" / "journal.ndjson"
    create = journal.read_text().splitlines()[0]
    journal.write_text(f"{create}\n{line}\n{create}\n")
    history = cli("history", C, "c1")
    assert history.code == 0
    assert len(history.out.strip().splitlines()) == 2
    assert "journal line 2 is unreadable and was skipped" in history.err
    replay = cli("replay", C, "c1")
    assert replay.code == 6 and "unreadable journal lines: [2]" in replay.err


@pytest.mark.parametrize("line", HOSTILE_LINES)
def test_hostile_last_journal_line_does_not_stop_a_run(cli: Cli, tmp_path: Path, line: str) -> None:
    """A hostile last journal line reads like a torn one: the run goes on to the end."""
    _new(cli)
    journal = tmp_path / ".counters" / "c1.fsm" / "journal.ndjson"
    with journal.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    result = cli("run", C, "c1")
    assert result.code == 0, result.err
    assert "internal error" not in result.err


def test_hostile_first_journal_line_keeps_ls_working(cli: Cli, tmp_path: Path) -> None:
    """`fsm ls` reads each journal's first line to tell machines apart; a hostile one is
    ignored (the instance is listed), never a crash."""
    _new(cli)
    (tmp_path / ".counters" / "c1.fsm" / "journal.ndjson").write_text(DEEP + "\n")
    result = cli("ls", C, "--json")
    assert result.code == 0, result.err
    assert [row["id"] for row in result.json()] == ["c1"]


def test_journal_record_holding_line_separators_reads_back(cli: Cli) -> None:
    """A reason holding U+2028, U+0085 or a form feed stays one journal record (only a newline
    ends a line), so `fsm history` shows it and reports nothing unreadable."""
    _new(cli)
    reason = "first\u2028second\x85third\x0cfourth"
    assert cli("start", C, "c1", "--reason", reason).code == 0
    history = cli("history", C, "c1", "--json")
    assert history.code == 0 and history.err == ""
    records = [json.loads(line) for line in history.out.split("\n") if line]
    assert records[-1]["reason"] == reason


INVALID = [
    pytest.param({"limit": "many"}, "invalid: limit: Input should be a valid integer", id="type"),
    pytest.param(
        {"count": -1}, "invalid: count: Input should be greater than or equal to 0", id="range"
    ),
    pytest.param({"status": "bogus"}, "invalid: status: Input should be 'created'", id="status"),
    pytest.param({"phase": "nowhere"}, "invalid: unknown state 'nowhere'", id="state"),
]


@pytest.mark.parametrize(("change", "error"), INVALID)
def test_ls_marks_documents_that_do_not_validate(
    cli: Cli, tmp_path: Path, change: dict[str, object], error: str
) -> None:
    """`fsm ls` shows a document that would not load as invalid, with the reason, in human and
    JSON output; valid instances beside it are listed as usual."""
    _new(cli, "good")
    _new(cli, "bad")
    path = tmp_path / ".counters" / "bad.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    rows = {row["id"]: row for row in cli("ls", C, "--json").json()}
    assert rows["good"]["error"] is None and rows["good"]["status"] == "created"
    assert rows["bad"]["error"].startswith(error)
    human = cli("ls", C).out.splitlines()
    assert any(line.split()[1] == "bad" and error in line for line in human)
    assert any(line.split()[1] == "good" and "created" in line for line in human)


@pytest.mark.parametrize(("change", "error"), INVALID)
def test_ls_status_filter_skips_invalid_documents(
    cli: Cli, tmp_path: Path, change: dict[str, object], error: str
) -> None:
    """`fsm ls --status created` lists only the documents that validate with that status."""
    _new(cli, "good")
    _new(cli, "bad")
    path = tmp_path / ".counters" / "bad.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    rows = cli("ls", C, "--status", "created", "--json").json()
    assert [row["id"] for row in rows] == ["good"]


def test_ls_marks_hostile_json_unreadable(cli: Cli, tmp_path: Path) -> None:
    """A document nested 100,000 deep is listed as unreadable with the reason, not a crash."""
    _new(cli)
    (tmp_path / ".counters" / "c1.json").write_text(DEEP)
    result = cli("ls", C, "--json")
    assert result.code == 0
    assert result.json()[0]["error"] == "unreadable: nested deeper than 100 levels"


class _Expired(Exception):
    # Not TimeoutError: that is an OSError, which fsm catches and reports as a store error.
    """Raised by the alarm when reading does not end."""


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_first_journal_line_is_read_only_to_the_limit(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal that is one endless line (here /dev/zero) does not stop `fsm ls`: its first
    line is read only up to the JSON size limit, and the instance is listed."""
    _new(cli)
    monkeypatch.setattr("fsm.base.jsonio.MAX_BYTES", 64 * 1024)
    journal = tmp_path / ".counters" / "c1.fsm" / "journal.ndjson"
    journal.unlink()
    journal.symlink_to("/dev/zero")

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _Expired("fsm ls still reading the journal")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    try:
        result = cli("ls", C, "--json")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert result.code == 0, result.err
    assert [row["id"] for row in result.json()] == ["c1"]
