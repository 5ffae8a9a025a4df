"""``list_instances``, the Python API: what it shows, and the quicker readings it relies on."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsm.base.clock import iso_utc
from fsm.base.jsonio import JsonError, loads, loads_quick
from fsm.engine.instance import Workspace
from fsm.model.machine import Machine, load_machine
from fsm.view.listing import _updated, list_instances
from tests.conftest import COUNTER


def _twin(tmp_path: Path) -> Machine:
    """The counter under another name: the same storage layout."""
    folder = tmp_path / "twin"
    folder.mkdir()
    (folder / "machine.yaml").write_text(COUNTER.read_text().replace("name: counter", "name: twin"))
    (folder / "functions.py").write_text((COUNTER.parent / "functions.py").read_text())
    return load_machine(folder / "machine.yaml")


def test_machines_sharing_a_layout_list_their_own_and_journal_less_documents(
    tmp_path: Path, workspace: Workspace, counter: Machine
) -> None:
    """An instance another machine created (its journal says so) is not listed; a document
    another program wrote, with no meta folder beside it, is listed by every machine."""
    twin = _twin(tmp_path)
    workspace.instance(counter, "mine").create({"limit": 1})
    workspace.instance(twin, "theirs").create({"limit": 1})
    document = workspace.store_for(counter).paths("dashboard").document  # type: ignore[attr-defined]
    document.write_text(json.dumps({"status": "running", "phase": "counting", "limit": 3}))
    assert not document.with_suffix(".fsm").exists()
    assert {row.id for row in list_instances(workspace, [counter])} == {"mine", "dashboard"}
    assert {row.id for row in list_instances(workspace, [twin])} == {"theirs", "dashboard"}
    listed = {row.id: row for row in list_instances(workspace, [counter])}
    assert listed["dashboard"].error is None and listed["dashboard"].state == "counting"


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1, "a": 2, "b": [1.5, -0, -0.0, 1e400, 5e-324, true, null]}',
        b'{"n": ' + b"9" * 4300 + b"}",
        b'{"n": ' + b"9" * 4301 + b"}",
        b'{"s": "\\ud800 \\ud83d\\ude00 \\u0000"}',
        b'{"s": "\xed\xa0\x80"}',
        b'{"s": "\xff"}',
        b'{"s": "a\x01b"}',
        b'\xef\xbb\xbf{"bom": 1}',
        b'{"a": NaN}',
        b'{"a": [1, 2,]}',
        b"[" * 101 + b"]" * 101,
        b"[" * 100 + b"]" * 100,
        b'"just a string"',
        b"",
    ],
)
def test_quick_reading_agrees_with_the_careful_one(text: bytes) -> None:
    """Same value, or the same refusal with the same reason, as :func:`fsm.base.jsonio.loads`."""
    assert _reading(loads_quick, text) == _reading(loads, text)
    decoded = text.decode("utf-8", errors="replace")
    assert _reading(loads_quick, decoded) == _reading(loads, decoded)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=25,
    )
)
def test_quick_reading_of_any_json(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert _reading(loads_quick, text) == _reading(loads, text)


def _reading(read: Any, text: bytes | str) -> tuple[str, str]:
    try:
        return "value", repr(read(text))
    except JsonError as exc:
        return "refused", str(exc)


@given(st.floats(min_value=-1e10, max_value=4e9, allow_nan=False))
def test_modification_times_read_as_datetime_reads_them(mtime: float) -> None:
    assert _updated(mtime) == iso_utc(datetime.fromtimestamp(mtime, UTC))


@pytest.mark.parametrize(
    "mtime", [0.0, 1.0, 1_700_000_000.9995, 1_700_000_000.9999995, 1_699_999_999.0004999, 59.99999]
)
def test_modification_times_at_the_edges_of_a_millisecond(mtime: float) -> None:
    assert _updated(mtime) == iso_utc(datetime.fromtimestamp(mtime, UTC))


def test_a_document_listed_shows_its_modification_time(
    workspace: Workspace, counter: Machine
) -> None:
    instance = workspace.instance(counter, "c1")
    instance.create({"limit": 1})
    os.utime(instance.store.paths(instance.id).document, ns=(0, 1_700_000_000_123_456_789))
    (row,) = list_instances(workspace, [counter])
    assert row.updated == "2023-11-14T22:13:20.123Z"
