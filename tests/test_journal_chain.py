"""The journal is a chain: a record deleted, swapped, repeated or changed, a second creation, a
record of the wrong types or without its link is found by `fsm replay`, which names the first bad
line and exits 6; journals written before records were linked replay as before, and go on as a
chain once a newer fsm appends to them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from fsm.model.patch import applied
from fsm.store import chain
from fsm.store.journal import Journal
from fsm.store.memory import MemoryJournal
from fsm.view.inspect import replay
from tests.conftest import COUNTER, Cli

C = str(COUNTER)
OLD = Path(__file__).parent / "journal_v1"

Lines = list[bytes]


def _journal(tmp_path: Path) -> Path:
    return tmp_path / ".counters" / "c1.fsm" / "journal.ndjson"


def _edit(line: bytes, **changes: object) -> bytes:
    """``line`` with ``changes`` made to its object, written back as fsm writes it (its link
    kept as it was: a hand edit)."""
    data = json.loads(line)
    data.update(changes)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _second_create(lines: Lines) -> Lines:
    """A create record appended at the end, linked as fsm would link it."""
    create = chain.split(lines[0])
    assert create is not None
    tail = chain.split(lines[-1])
    assert tail is not None
    linked, _ = chain.chained(create[0], tail[1])
    return [*lines, linked]


def _core_patch_rehashed(lines: Lines, root: Path) -> Lines:
    """The patch of the first count changed (count set to 7), with the record's core hash
    worked out again for the document that patch now gives: only the chain tells."""
    at = 3
    edited = json.loads(lines[at])
    for op in edited["changes"]:
        if op["path"] == "/count":
            op["value"] = 7
    document: object = None
    for line in [*lines[:at], json.dumps(edited).encode()]:
        document, _ = applied(document, json.loads(line).get("changes", []))
    instance = Workspace(root).instance(load_machine(COUNTER), "c1")
    assert isinstance(document, dict)
    edited["core_hash"] = instance.core_hash(document)
    text = json.dumps(edited, ensure_ascii=False, separators=(",", ":")).encode()
    return [*lines[:at], text, *lines[at + 1 :]]


TAMPERING: dict[str, tuple[Callable[..., Lines], int, str]] = {
    "a middle record deleted": (lambda ls: [*ls[:2], *ls[3:]], 3, "chain breaks"),
    "two records swapped": (lambda ls: [*ls[:2], ls[3], ls[2], *ls[4:]], 3, "chain breaks"),
    "a record repeated": (lambda ls: [*ls[:3], ls[2], *ls[3:]], 4, "chain breaks"),
    "the last dest changed": (
        lambda ls: [*ls[:-1], _edit(ls[-1], dest="failed")],
        6,
        "chain breaks",
    ),
    "a second create record": (_second_create, 7, "second 'create'"),
    "a core patch changed, its core hash recomputed": (_core_patch_rehashed, 4, "chain breaks"),
    "the last line of the wrong types": (
        lambda ls: [*ls[:-1], _edit(ls[-1], state=5, duration_ms="slow")],
        6,
        "line 6",
    ),
    "a link removed": (
        lambda ls: [*ls[:2], _unlinked(ls[2]), *ls[3:]],
        3,
        "no chain link",
    ),
    "every link removed, the format kept": (
        lambda ls: [_unlinked(line) for line in ls],
        1,
        "no chain link",
    ),
}


def _unlinked(line: bytes) -> bytes:
    parts = chain.split(line)
    assert parts is not None
    return parts[0]


@pytest.mark.parametrize("case", list(TAMPERING), ids=list(TAMPERING))
def test_replay_names_the_first_bad_record_of_a_tampered_journal(
    case: str, cli: Cli, tmp_path: Path
) -> None:
    """Each way of tampering with a finished counter's journal makes `fsm replay` exit 6 with
    one error naming the line where the journal first goes wrong."""
    assert cli("new", C, "--id", "c1", "--set", "limit=3").code == 0
    assert cli("run", C, "c1").code == 0
    path = _journal(tmp_path)
    lines = path.read_bytes().splitlines()
    assert len(lines) == 6 and all(chain.split(line) for line in lines)
    assert cli("replay", C, "c1").code == 0
    tamper, line, words = TAMPERING[case]
    tampered = tamper(lines, tmp_path) if tamper is _core_patch_rehashed else tamper(lines)
    path.write_bytes(b"".join(line + b"\n" for line in tampered))
    result = cli("replay", C, "c1")
    assert result.code == 6, result.out
    assert result.err.count("\n") == 1, result.err  # one error line, no traceback
    assert f"line {line}" in result.err and words in result.err, result.err


def test_an_untouched_journal_is_a_chain_on_every_store(tmp_path: Path) -> None:
    """Each record written links to the one before, in the file journal and the memory one
    alike; a record rewritten from what was read gets a fresh link, never two."""
    records = [{"kind": "x", "n": n} for n in range(3)]
    file_journal = Journal(tmp_path / "journal.ndjson")
    memory = MemoryJournal()
    for record in records:
        file_journal.append(record)
        memory.append(record)
    written = file_journal.path.read_bytes().splitlines()
    assert [line.decode() for line in written] == memory.lines
    previous = chain.START
    for line in written:
        previous, fits = chain.link_of(line, previous)
        assert fits is True
    again = Journal(tmp_path / "again.ndjson")
    again.append(json.loads(written[0]))
    assert again.path.read_bytes().count(b'"chain"') == 1


def test_a_journal_truncated_by_a_swap_links_on_from_where_it_was(tmp_path: Path) -> None:
    """Records taken back (another writer was quicker) leave no trace in the chain: the next
    records link to the line that ends the journal again."""
    journal = Journal(tmp_path / "journal.ndjson")
    journal.append({"kind": "x", "n": 0})
    mark = journal.append({"kind": "x", "n": 1})
    journal.truncate(mark)
    journal.append({"kind": "x", "n": 2})
    previous = chain.START
    for line in journal.path.read_bytes().splitlines():
        previous, fits = chain.link_of(line, previous)
        assert fits is True


def test_another_journal_object_appends_after_the_last_line(tmp_path: Path) -> None:
    """Two processes append to one journal in turn (under the document lock): each links its
    record to the other's, whatever it remembered of the file."""
    one, two = Journal(tmp_path / "j.ndjson"), Journal(tmp_path / "j.ndjson")
    one.append({"kind": "x", "n": 0})
    two.append({"kind": "x", "n": 1})
    one.append({"kind": "x", "n": 2})
    previous = chain.START
    for line in one.path.read_bytes().splitlines():
        previous, fits = chain.link_of(line, previous)
        assert fits is True


def test_an_old_journal_replays_and_is_chained_from_the_first_new_record(
    tmp_path: Path, cli: Cli
) -> None:
    """A journal written before records were linked (format 1) replays without a problem; the
    records a newer fsm appends are linked, the first to the old last line's bytes, and a later
    edit of an old line is found by the link that follows it."""
    shutil.copytree(OLD / ".counters", tmp_path / ".counters")
    instance = Workspace(tmp_path).instance(load_machine(COUNTER), "old")
    report = replay(instance)
    assert report.problems == []
    path = instance.journal.path
    old_lines = path.read_bytes().splitlines()
    assert not any(chain.split(line) for line in old_lines)
    assert cli("new", C, "--id", "c1", "--set", "limit=1").code == 0  # unrelated instance
    instance.journal.append({"kind": "note", "source": None, "format": 3})
    assert replay(instance).problems == []
    lines = path.read_bytes().splitlines()
    assert chain.split(lines[-1]) is not None
    path.write_bytes(b"".join(line + b"\n" for line in [*old_lines[:-1], b"{}", lines[-1]]))
    problems = replay(instance).problems
    assert any("line 13" in problem and "chain breaks" in problem for problem in problems)


def test_a_torn_last_line_is_a_note_not_a_broken_chain(cli: Cli, tmp_path: Path) -> None:
    """A crash mid-append leaves a torn last line: skipped and noted, the chain before it whole."""
    assert cli("new", C, "--id", "c1", "--set", "limit=1").code == 0
    path = _journal(tmp_path)
    with path.open("ab") as handle:
        handle.write(b'{"kind":"transi')
    result = cli("replay", C, "c1")
    assert result.code == 0 and "torn" in result.out
