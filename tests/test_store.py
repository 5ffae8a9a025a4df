"""The file store: safe ids, atomic writes, tolerant reads, instance listing and locks."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from fsm.base.errors import (
    CorruptDocumentError,
    InvalidIdError,
    LockHeldError,
    OptionsError,
    UnknownInstanceError,
)
from fsm.store.file_store import FileLock, FileStore, atomic_write_text, validate_id

SCRATCHPAD = ".workflow/.scratchpad/{id}/state.json"


def _store(
    workspace: Path, *, read_retries: int = 3, retry_interval: float = 0.05, indent: int = 2
) -> FileStore:
    """A store of the counter layout, ``{folder}/{id}.json`` with ``folder = .counters``."""
    return FileStore(
        workspace,
        "{folder}/{id}.json",
        None,
        {"folder": ".counters"},
        read_retries=read_retries,
        retry_interval=retry_interval,
        indent=indent,
    )


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize(
    "instance_id",
    [
        pytest.param("../x", id="parent-escape"),
        pytest.param("../../etc/passwd", id="deep-escape"),
        pytest.param("a/b", id="slash"),
        pytest.param("..", id="dot-dot"),
        pytest.param("a..b", id="inner-dot-dot"),
        pytest.param("a\\b", id="backslash"),
        pytest.param("a\x00b", id="nul"),
        pytest.param(".hidden", id="leading-dot"),
        pytest.param("-flag", id="leading-dash"),
        pytest.param("", id="empty"),
        pytest.param("a" * 129, id="over-long"),
        pytest.param("abc\n", id="trailing-newline"),
        pytest.param("a b", id="space"),
    ],
)
def test_validate_id_rejects_unsafe_ids(instance_id: str) -> None:
    """Ids that could escape the folder or confuse a shell are refused with a clear error."""
    with pytest.raises(InvalidIdError, match="invalid instance id"):
        validate_id(instance_id)


@pytest.mark.parametrize(
    "instance_id",
    [
        "loop-v2-20260122T100000-abcdef12",
        "issue-manager-20260122T100000-0123abcd",
        "counter-20260101T000000-ffffffff",
        "c1",
        "v1.2_final",
        "a" * 128,
    ],
)
def test_validate_id_accepts_generated_and_plain_ids(instance_id: str) -> None:
    """Generated ids and ordinary names pass unchanged."""
    assert validate_id(instance_id) == instance_id


def test_store_paths_refuse_an_unsafe_id(tmp_path: Path) -> None:
    """The store validates the id before building any path."""
    with pytest.raises(InvalidIdError):
        _store(tmp_path).paths("../x")


def test_paths_follow_the_templates(tmp_path: Path) -> None:
    """Options fill the templates; the meta folder defaults to ``<stem>.fsm`` beside it."""
    paths = _store(tmp_path).paths("c1")
    assert paths.document == tmp_path / ".counters" / "c1.json"
    assert paths.meta == tmp_path / ".counters" / "c1.fsm"
    assert paths.journal == paths.meta / "journal.ndjson"
    explicit = FileStore(tmp_path, "{id}.json", "meta/{id}", {}).paths("c1")
    assert explicit.meta == tmp_path / "meta" / "c1"


def test_unknown_template_value_is_an_options_error(tmp_path: Path) -> None:
    """A storage path naming an option nobody gave is an OptionsError naming the template."""
    with pytest.raises(OptionsError, match=r"\{nowhere\}/\{id\}\.json"):
        FileStore(tmp_path, "{nowhere}/{id}.json", None, {}).paths("c1")


def test_atomic_write_replaces_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    """Writing twice leaves exactly the second text and no temporary file."""
    path = tmp_path / "sub" / "doc.json"
    atomic_write_text(path, "first")
    atomic_write_text(path, "second")
    assert path.read_text(encoding="utf-8") == "second"
    assert _leftovers(path.parent) == []
    assert [p.name for p in path.parent.iterdir()] == ["doc.json"]


def test_crash_during_replace_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the write fails before the rename, the old document is intact and no temp file remains."""
    path = tmp_path / "doc.json"
    path.write_text("old", encoding="utf-8")

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(path, "new")
    assert path.read_text(encoding="utf-8") == "old"
    assert _leftovers(tmp_path) == []


def test_write_and_read_round_trip(tmp_path: Path) -> None:
    """A written document reads back equal, with the exact bytes written."""
    store = _store(tmp_path)
    raw = store.write("c1", {"count": 2, "title": "é"})
    snapshot = store.read("c1")
    assert snapshot.data == {"count": 2, "title": "é"}
    assert snapshot.raw == raw
    assert store.exists("c1")


def test_read_retries_until_another_writer_fixes_the_file(tmp_path: Path) -> None:
    """A document that is half-written at first is read once the other writer finishes."""
    # retries for up to 10 s: the writer thread may be scheduled late on a busy machine
    store = _store(tmp_path, read_retries=500, retry_interval=0.02)
    path = store.paths("c1").document
    path.parent.mkdir(parents=True)
    path.write_text('{"count": ', encoding="utf-8")

    def finish_writing() -> None:
        time.sleep(0.02)
        path.write_text('{"count": 7}', encoding="utf-8")

    writer = threading.Thread(target=finish_writing)
    writer.start()
    try:
        snapshot = store.read("c1")
    finally:
        writer.join()
    assert snapshot.data == {"count": 7}


def test_read_of_a_document_that_stays_corrupt_names_the_file(tmp_path: Path) -> None:
    """A document that never parses raises CorruptDocumentError naming it, and is not modified."""
    store = _store(tmp_path, read_retries=2, retry_interval=0.001)
    path = store.paths("c1").document
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"count": 1,,}')
    before = path.stat().st_mtime_ns
    with pytest.raises(CorruptDocumentError, match="not valid JSON") as caught:
        store.read("c1")
    assert str(path) in str(caught.value)
    assert path.read_bytes() == b'{"count": 1,,}'
    assert path.stat().st_mtime_ns == before


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"[1, 2]", id="array"),
        pytest.param(b'"text"', id="string"),
        pytest.param(b"null", id="null"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\xff\xfe{", id="not-utf8"),
    ],
)
def test_a_document_that_is_not_a_json_object_is_corrupt(tmp_path: Path, content: bytes) -> None:
    """Only a JSON object is a document; anything else is CorruptDocumentError."""
    store = _store(tmp_path, read_retries=0)
    path = store.paths("c1").document
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(CorruptDocumentError, match=str(path)):
        store.read("c1")


def test_read_of_a_missing_document_is_unknown_instance(tmp_path: Path) -> None:
    """A missing document is UnknownInstanceError naming the id."""
    with pytest.raises(UnknownInstanceError, match="'c1'"):
        _store(tmp_path).read("c1")
    assert _store(tmp_path).read_bytes("c1") is None


def test_list_ids_in_a_flat_folder(tmp_path: Path) -> None:
    """``{folder}/{id}.json`` lists ids of documents only, skipping other and unsafe names."""
    folder = tmp_path / ".counters"
    folder.mkdir()
    for name in ["b.json", "a.json", "notes.txt", ".hidden.json", "x..y.json", "bad name.json"]:
        (folder / name).write_text("{}", encoding="utf-8")
    (folder / "a.fsm").mkdir()
    (folder / ".a.json.1.2.tmp").write_text("{", encoding="utf-8")
    assert _store(tmp_path).list_ids() == ["a", "b"]


def test_list_ids_in_a_folder_per_instance(tmp_path: Path) -> None:
    """``.workflow/.scratchpad/{id}/state.json`` lists folders holding a state file."""
    root = tmp_path / ".workflow" / ".scratchpad"
    for name in ["loop-v2-20260122T100000-abcdef12", "loop-2", ".hidden", "a..b"]:
        (root / name).mkdir(parents=True)
        (root / name / "state.json").write_text("{}", encoding="utf-8")
    (root / "empty").mkdir()
    (root / "other").mkdir()
    (root / "other" / "notes.json").write_text("{}", encoding="utf-8")
    store = FileStore(tmp_path, SCRATCHPAD, None, {})
    assert store.list_ids() == ["loop-2", "loop-v2-20260122T100000-abcdef12"]


def test_list_ids_without_a_folder_is_empty(tmp_path: Path) -> None:
    """A workspace with no instances yet lists none."""
    assert _store(tmp_path).list_ids() == []


def test_second_run_lock_is_refused_until_released(tmp_path: Path) -> None:
    """A second run lock, even from this process, is refused while the first is held."""
    store = _store(tmp_path)
    first = store.lease("c1")
    assert first.held()
    with pytest.raises(LockHeldError, match="already being run"):
        store.lease("c1")
    first.release()
    assert not first.held()
    second = store.lease("c1")
    second.release()


def test_run_locks_of_different_instances_are_independent(tmp_path: Path) -> None:
    """Holding one instance's run lock does not block another instance."""
    store = _store(tmp_path)
    first = store.lease("c1")
    other = store.lease("c2")
    other.release()
    first.release()


def test_document_lock_waits_for_the_holder(tmp_path: Path) -> None:
    """A document lock request blocks until the current holder releases it."""
    store = _store(tmp_path)
    holder = FileLock(store.paths("c1").document_lock)
    assert holder.acquire(blocking=True)
    releaser = threading.Timer(0.1, holder.release)
    started = time.monotonic()
    releaser.start()
    try:
        with store.lock("c1", timeout=60.0):
            waited = time.monotonic() - started
    finally:
        releaser.join()
    assert waited >= 0.09


def test_document_lock_times_out(tmp_path: Path) -> None:
    """A document lock that is never released raises LockHeldError after the timeout."""
    store = _store(tmp_path)
    holder = FileLock(store.paths("c1").document_lock)
    assert holder.acquire(blocking=False)
    started = time.monotonic()
    try:
        with pytest.raises(LockHeldError, match="document lock"), store.lock("c1", 0.1):
            pass
    finally:
        holder.release()
    assert time.monotonic() - started >= 0.1


def test_non_blocking_acquire_reports_a_held_lock(tmp_path: Path) -> None:
    """``acquire(blocking=False)`` returns False instead of waiting."""
    path = tmp_path / "x.lock"
    holder = FileLock(path)
    assert holder.acquire(blocking=False)
    contender = FileLock(path)
    assert contender.acquire(blocking=False) is False
    assert not contender.held
    holder.release()
    assert contender.acquire(blocking=False)
    contender.release()


def test_write_uses_the_configured_indent(tmp_path: Path) -> None:
    """Documents are written as indented JSON ending in a newline; indent 0 means one line."""
    text = _store(tmp_path, indent=2).write("c1", {"a": 1}).decode("utf-8")
    assert text == '{\n  "a": 1\n}\n'
    flat = _store(tmp_path, indent=0).write("c2", {"a": 1}).decode("utf-8")
    assert flat == '{"a": 1}\n'
    assert json.loads(flat) == {"a": 1}
