"""Journals read as streams: `fsm replay` and `fsm history` do not hold a journal in memory,
`history --tail N` reads only the end, and records split across read blocks read whole."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.engine.instance import Workspace
from fsm.model.records import TransitionRecord
from fsm.store import journal as journal_module
from fsm.store.journal import Journal, TypedRecords
from fsm.view.inspect import MAX_REPORTED, replay
from tests.conftest import COUNTER, Cli

C = str(COUNTER)


def _counted(cli: Cli, limit: int = 3) -> None:
    assert cli("new", C, "--id", "c1", "--set", f"limit={limit}").code == 0
    assert cli("run", C, "c1").code == 0


def _journal(tmp_path: Path) -> Path:
    return tmp_path / ".counters" / "c1.fsm" / "journal.ndjson"


def _lengthen(path: Path, copies: int) -> None:
    """Repeat the journal's first counting -> counting step ``copies`` times right after it, so
    the chain still holds and every version still rebuilds: each copy applies the same change
    to the same document, and the records after them are as they were."""
    lines = path.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"source":"counting","dest":"counting"' in line)
    path.write_bytes(b"".join([*lines[: at + 1], lines[at] * copies, *lines[at + 1 :]]))


def test_history_tail_prints_the_last_records_in_order(cli: Cli, tmp_path: Path) -> None:
    """`--tail 2` prints the last two records, oldest first, exactly as the full history does."""
    _counted(cli)
    full = cli("history", C, "c1").out.splitlines()
    tail = cli("history", C, "c1", "--tail", "2")
    assert tail.code == 0
    assert tail.out.splitlines() == full[-2:]
    as_json = cli("history", C, "c1", "--json", "--tail", "1").out.splitlines()
    assert [json.loads(line)["dest"] for line in as_json] == ["done"]
    assert cli("history", C, "c1", "--tail", "0").out == ""
    assert cli("history", C, "c1", "--tail", "99").out.splitlines() == full


def test_history_tail_must_not_be_negative(cli: Cli) -> None:
    """A negative --tail is bad input: one error line, exit 2."""
    _counted(cli)
    result = cli("history", C, "c1", "--tail", "-1")
    assert result.code == 2 and "--tail must be 0 or more" in result.err


def test_history_json_prints_records_as_the_journal_holds_them(cli: Cli, tmp_path: Path) -> None:
    """Each `--json` line is the journal's own line when nothing in it needs escaping."""
    _counted(cli)
    written = _journal(tmp_path).read_text().splitlines()
    assert cli("history", C, "c1", "--json").out.splitlines() == written


def test_records_split_across_read_blocks_read_whole(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With tiny read blocks every record still reads whole, with its line number; a torn last
    line is still reported as the last line."""
    _counted(cli)
    path = _journal(tmp_path)
    expected = Journal(path).read()
    with path.open("ab") as handle:
        handle.write(b'{"kind": "transi')
    monkeypatch.setattr(journal_module, "_BLOCK", 7)
    read = Journal(path).read()
    assert read.records == expected.records
    assert read.bad_lines == [expected.last_line + 1] and read.torn_tail


def test_replay_does_not_hold_the_journal_in_memory(cli: Cli, tmp_path: Path) -> None:
    """Replaying 20,000 records allocates far less than the records themselves take."""
    _counted(cli)
    path = _journal(tmp_path)
    before = len(Journal(path).read().records)
    _lengthen(path, 20_000)
    instance = Workspace(tmp_path).instance(C, "c1")
    tracemalloc.start()
    try:
        report = replay(instance)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.records == before + 20_000 and report.problems == []
    assert path.stat().st_size > 10_000_000
    # Blocks of 1 MiB are read at a time; the records as dicts would take about 50 MB.
    assert peak < 8_000_000, peak


def test_replay_reports_the_first_broken_links_and_counts_the_rest(
    cli: Cli, tmp_path: Path
) -> None:
    """A journal whose chain breaks many times names the first few breaks and counts the rest."""
    _counted(cli)
    path = _journal(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    stray = json.dumps(
        {"kind": "transition", "event": "x", "transition": 0, "source": "nowhere", "dest": "idle"}
    )
    broken = MAX_REPORTED + 5
    path.write_text("".join([*lines[:-1], (stray + "\n") * broken, lines[-1]]))
    result = cli("replay", C, "c1")
    assert result.code == 6
    assert result.err.count("starts in 'nowhere'") == MAX_REPORTED
    # the last five strays, and the last record (which starts where the strays did not end)
    assert "and 6 more records that break the chain" in result.err


@pytest.mark.parametrize(
    "record",
    [
        {"time": "2026-01-01T00:00:00.000Z", "kind": "transition", "transition": 3, "ok": True},
        {"reason": "é \u2028 \x00 \x1b[31m", "nested": {"list": [1, 2.5, None, 10**30]}},
        {"nan": float("nan"), "inf": float("-inf"), "tuple": (1, 2), "path": Path("/a/b")},
    ],
    ids=["plain", "text", "odd-values"],
)
def test_a_line_is_the_json_text_json_dumps_gives(record: dict[str, object]) -> None:
    """Lines are written by pydantic-core for speed: the text is the one ``json.dumps`` gives
    (no spaces, no ASCII escapes, ``str`` of what JSON does not know), one line per record."""
    expected = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    assert journal_module.line_bytes(record) == (expected + "\n").encode()


def test_a_line_with_a_lone_surrogate_keeps_it_visible_as_an_escape() -> None:
    """Text from outside (a file name, an argument) may hold a lone surrogate, which UTF-8
    cannot carry: the line is still written, the surrogate as a JSON escape, which reads back
    as the same text."""
    line = journal_module.line_bytes({"reason": "bad \udcff name"})
    assert line == b'{"reason":"bad \\udcff name"}\n'
    assert json.loads(line) == {"reason": "bad \udcff name"}


@pytest.mark.parametrize("kept", [1024, 1], ids=["texts-kept", "texts-forgotten"])
def test_history_shows_each_repeated_step_with_its_own_time_and_actor(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """The text of a repeated step is made once and reused: each line still shows its own
    record's time, actor and escapes, also when the kept texts are forgotten for new ones."""
    monkeypatch.setattr("fsm.view.history._MAX_STEP_TEXTS", kept)
    _counted(cli)
    path = _journal(tmp_path)
    step = {"kind": "transition", "event": "count", "source": "counting", "dest": "counting"}
    added = [
        {**step, "time": "T1", "transition": 0, "actor": "run"},
        {**step, "time": "T2", "transition": 0, "actor": "run"},
        {**step, "time": "T3\x1b[2J", "transition": 0, "actor": "agent"},
        {**step, "time": "T4", "transition": 0},
        {**step, "time": "T5", "transition": 0, "event": "go\u202e", "actor": "run"},
        {**step, "time": "T6", "transition": 0, "actor": "run"},
    ]
    with path.open("a") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in added)
    shown = cli("history", C, "c1")
    assert shown.code == 0 and shown.err == ""
    move = "counting -> counting"
    assert shown.out.splitlines()[-6:] == [
        f"T1 transition count        {move} by run",
        f"T2 transition count        {move} by run",
        f"T3\\x1b[2J transition count        {move} by agent",
        f"T4 transition count        {move}",
        f"T5 transition go\\u202e{' ' * 10}{move} by run",
        f"T6 transition count        {move} by run",
    ]
    assert cli("history", C, "c1", "--tail", "6").out.splitlines() == shown.out.splitlines()[-6:]


_STEP = (
    b'{"kind":"transition","event":"go","source":"a","dest":"b","transition":0,'
    b'"reason":"%s","format":2}'
)


def _nested(depth: int) -> bytes:
    return b'{"kind":"control","x":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


TRICKY_LINES = [
    _STEP % b"plain",
    _STEP % b"not UTF-8 \xff here",
    _STEP % b"a surrogate encoded \xed\xa0\x80",
    _STEP % b"overlong \xc0\xaf",
    _STEP % b"an escaped lone surrogate \\ud800",
    b"\xef\xbb\xbf" + _STEP % b"after a byte-order mark",
    _STEP % b"separators \xe2\x80\xa8 \xc2\x85",
    _STEP % b"ends with a carriage return" + b"\r",
    _STEP % ("é" * 3000).encode(),  # more bytes than the digit limit, fewer characters
    b'{"kind":"control","n":' + b"1" * 5000 + b"}",
    b'{"kind":"control","x":NaN}',
    _nested(100),
    _nested(101),
    _nested(150),
    _nested(202),
    _nested(300),
    b"[1, 2]",
    b" \t\x0c",
    b"",
    b'{"kind":"transi',
]


def test_the_fast_reader_gives_every_line_the_careful_readers_verdict(tmp_path: Path) -> None:
    """`fsm history` and `fsm replay` read the journal's lines with pydantic-core, from their
    bytes: every line gets the verdict (a record, the same record; unreadable; not a record,
    the same reason) of the careful reader that decodes each line and checks it within fsm's
    JSON limits (nested deeper than 100 levels: unreadable)."""
    path = tmp_path / "journal.ndjson"
    path.write_bytes(b"\n".join(TRICKY_LINES))  # the last line torn: no newline
    journal = Journal(path)

    def verdicts(entries: Iterator[tuple[int, object]]) -> list[tuple[int, object]]:
        return [(n, str(r) if isinstance(r, Exception) else r) for n, r in entries]

    fast = verdicts(journal.entries())
    assert fast == verdicts(TypedRecords.entries(journal))
    unreadable = [n for n, r in fast if r is None]
    assert unreadable == [6, 10, 11, 13, 14, 15, 16, 17, 20]  # 6: JSON has no BOM
    assert [n for n, _ in fast] == [n for n in range(1, 21) if n not in (18, 19)]
    assert isinstance(fast[1][1], TransitionRecord)
    assert fast[1][1].extra == {"reason": "not UTF-8 \ufffd here"}


def test_a_run_diagram_and_a_version_do_not_hold_the_journal_in_memory(
    cli: Cli, tmp_path: Path
) -> None:
    """`fsm diagram --run` and fsm serve's version of a record (and its diagram) count visits
    as they read: 20,000 records allocate far less than the records themselves take."""
    from fsm.serve.travel import version_at
    from fsm.view import diagram

    _counted(cli)
    path = _journal(tmp_path)
    _lengthen(path, 20_000)
    instance = Workspace(tmp_path).instance(C, "c1")
    last = path.read_bytes().count(b"\n")
    tracemalloc.start()
    try:
        overlay = diagram.overlay_from_journal(diagram.journal_records(instance.journal), "done")
        version = version_at(instance, last)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(overlay.edge_visits.values()) > 20_000
    assert version.visits.edge_visits == overlay.edge_visits
    assert version.check.verdict == "exact"
    # The records as objects would take about 50 MB.
    assert peak < 8_000_000, peak
