"""The issues file: strict reading, and status write-back that changes nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.issue_manager.issues_file import IssuesFileError, read_issues, write_statuses


def test_issues_are_read_in_file_order(sample: Any) -> None:
    """Every issue line becomes a record with id, title, status and optional description."""
    sample.add_issue("ISS-1", "First", description="why")
    sample.append_line("")
    sample.add_issue("ISS-2", "Second", status="planned")
    records = read_issues(sample.issues_path)
    assert [(r.id, r.title, r.status, r.description, r.line) for r in records] == [
        ("ISS-1", "First", "registered", "why", 1),
        ("ISS-2", "Second", "planned", None, 3),
    ]


@pytest.mark.parametrize(
    ("extra", "depends_on"),
    [
        pytest.param({}, (), id="none"),
        pytest.param({"depends_on": ["ISS-1"]}, ("ISS-1",), id="depends-on"),
        pytest.param(
            {"extended_context": {"notes": {"depends_on_issues": ["ISS-1", "ISS-0"]}}},
            ("ISS-1", "ISS-0"),
            id="ccw-depends-on-issues",
        ),
        pytest.param(
            {
                "depends_on": ["ISS-1"],
                "extended_context": {"notes": {"depends_on_issues": ["ISS-0", "ISS-1"]}},
            },
            ("ISS-1", "ISS-0"),
            id="both-joined",
        ),
        pytest.param({"extended_context": "free text"}, (), id="context-not-an-object"),
    ],
)
def test_dependencies_are_read_from_either_field(
    sample: Any, extra: dict[str, Any], depends_on: tuple[str, ...]
) -> None:
    """An issue's dependencies come from ``depends_on`` and from CCW's
    ``extended_context.notes.depends_on_issues``, joined in order, each id once."""
    sample.add_issue("ISS-2", **extra)
    (record,) = read_issues(sample.issues_path)
    assert record.depends_on == depends_on


def test_missing_issues_file_is_an_error_naming_the_path(sample: Any) -> None:
    """A missing issues file is an error naming the path looked for and how to give one, not
    an empty backlog."""
    path = sample.root / "nope.jsonl"
    with pytest.raises(IssuesFileError) as caught:
        read_issues(path)
    assert str(caught.value).startswith(f"no issues file at {path}: create it (")
    assert "-o issues_file=PATH" in str(caught.value)


def test_empty_issues_file_means_no_issues(sample: Any) -> None:
    """An issues file without a line (or only blank ones) is an empty backlog."""
    sample.issues_path.write_text("\n\n")
    assert read_issues(sample.issues_path) == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param('{"id": "ISS-2", "title": ', "not valid JSON", id="truncated"),
        pytest.param('["ISS-2"]', "expected a JSON object, got list", id="array"),
        pytest.param(
            '{"title": "t", "status": "registered"}', "'id' must be a non-empty string", id="no-id"
        ),
        pytest.param(
            '{"id": "ISS-2", "title": "t"}', "issue 'ISS-2' has no 'status' string", id="no-status"
        ),
        pytest.param(
            '{"id": "ISS-2", "title": 3, "status": "registered"}',
            "'title' must be a string",
            id="title-not-text",
        ),
        pytest.param(
            '{"id": "ISS-1", "title": "t", "status": "registered"}',
            "issue 'ISS-1' is already defined on line 1",
            id="duplicate",
        ),
        pytest.param(
            '{"id": "ISS-2", "status": "registered", "depends_on": "ISS-1"}',
            "issue 'ISS-2': 'depends_on' must be a list of issue ids",
            id="depends-on-text",
        ),
        pytest.param(
            '{"id": "ISS-2", "status": "registered", "depends_on": ["ISS-1", 3]}',
            "issue 'ISS-2': 'depends_on' must be a list of issue ids",
            id="depends-on-number",
        ),
        pytest.param(
            '{"id": "ISS-2", "status": "registered", '
            '"extended_context": {"notes": {"depends_on_issues": [""]}}}',
            "'extended_context.notes.depends_on_issues' must be a list of issue ids",
            id="depends-on-issues-empty-id",
        ),
    ],
)
def test_malformed_line_is_an_error_naming_file_and_line(
    sample: Any, line: str, message: str
) -> None:
    """A malformed line is an error naming the file and the line number."""
    sample.add_issue("ISS-1")
    sample.append_line(line)
    with pytest.raises(IssuesFileError) as caught:
        read_issues(sample.issues_path)
    assert str(caught.value).startswith(f"{sample.issues_path}:2: ")
    assert message in str(caught.value)


def test_write_back_changes_only_the_status_of_named_issues(sample: Any) -> None:
    """Writing statuses back keeps other fields, other lines, bad lines and line endings."""
    original = (
        '{"id":"ISS-1","title":"One","status":"registered","labels":["bug"],"priority":2}\n'
        "this line is not JSON\r\n"
        '{"id": "ISS-2", "title": "Two", "status": "registered"}\n'
        '{"id":"ISS-3","title":"Three","status":"registered"}'
    )
    sample.issues_path.write_text(original, encoding="utf-8", newline="")
    found = write_statuses(
        sample.issues_path, {"ISS-1": "completed", "ISS-2": "failed", "ISS-9": "completed"}
    )
    assert found == ["ISS-1", "ISS-2"]
    assert sample.issues_path.read_bytes().decode() == (
        '{"id":"ISS-1","title":"One","status":"completed","labels":["bug"],"priority":2}\n'
        "this line is not JSON\r\n"
        '{"id": "ISS-2", "title": "Two", "status": "failed"}\n'
        '{"id":"ISS-3","title":"Three","status":"registered"}'
    )


def test_write_back_without_change_leaves_the_file_alone(sample: Any) -> None:
    """A status that is already right does not rewrite the file."""
    sample.add_issue("ISS-1", status="completed")
    before = sample.issues_path.stat().st_mtime_ns
    assert write_statuses(sample.issues_path, {"ISS-1": "completed"}) == ["ISS-1"]
    assert sample.issues_path.stat().st_mtime_ns == before


def test_write_back_leaves_no_temporary_files(sample: Any) -> None:
    """The atomic write replaces the file and cleans up after itself."""
    sample.add_issue("ISS-1")
    write_statuses(sample.issues_path, {"ISS-1": "planned"})
    assert sorted(p.name for p in sample.issues_path.parent.iterdir()) == ["issues.jsonl"]
    assert json.loads(sample.issues_path.read_text())["status"] == "planned"


def test_an_issues_file_that_is_a_fifo_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A FIFO in the issues file's place is refused at once (reading it would wait for a
    writer for ever); writing statuses back refuses it too, and the lenient reading of known
    statuses skips it."""
    import os

    from fsm_machines.issue_manager.issues_file import known_statuses

    path = tmp_path / "issues.jsonl"
    os.mkfifo(path)
    with pytest.raises(IssuesFileError, match="not a regular file"):
        read_issues(path)
    with pytest.raises(IssuesFileError, match="not a regular file"):
        write_statuses(path, {"ISS-1": "completed"})
    assert known_statuses(path) == {}
