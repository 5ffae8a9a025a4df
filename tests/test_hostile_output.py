"""Terminal safety: text from documents, journals and arguments never reaches the terminal raw."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fsm.view.terminal import json_text, one_line, printable
from tests.conftest import COUNTER, Cli

C = str(COUNTER)

HOSTILE = "a\x1b[31mred\x1b[0m\x07\rb\x9b2J\u202egnp.exe\ttab\x7f\udcff\u2028z"
# What a terminal acts on: C0 controls but newline, DEL, C1, separators, bidi controls, surrogates.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("plain text, é ü 字", "plain text, é ü 字", id="plain-unchanged"),
        pytest.param("\x1b[31mred", "\\x1b[31mred", id="esc-csi"),
        pytest.param("ring\x07", "ring\\x07", id="bel"),
        pytest.param("hidden\roverwrite", "hidden\\roverwrite", id="carriage-return"),
        pytest.param("a\tb", "a\\tb", id="tab"),
        pytest.param("\x9b2J", "\\x9b2J", id="c1-csi"),
        pytest.param("\x7f", "\\x7f", id="del"),
        pytest.param("\u202egnp.exe", "\\u202egnp.exe", id="bidi-override"),
        pytest.param("\u2066x\u2069", "\\u2066x\\u2069", id="bidi-isolate"),
        pytest.param("a\u2028b", "a\\u2028b", id="line-separator"),
        pytest.param("\udcff", "\\udcff", id="lone-surrogate"),
        pytest.param("\x00", "\\x00", id="nul"),
    ],
)
def test_printable_escapes_what_a_terminal_acts_on(text: str, shown: str) -> None:
    """Each unsafe character is shown as a visible escape; other text is unchanged."""
    assert printable(text) == shown
    assert one_line(text) == shown


def test_printable_keeps_newlines_and_one_line_escapes_them() -> None:
    """printable keeps intended line breaks; one_line keeps a record on one line."""
    assert printable("one\ntwo") == "one\ntwo"
    assert one_line("one\ntwo") == "one\\ntwo"


def test_json_text_is_exact_json_without_raw_controls() -> None:
    """JSON output parses back to the same value, keeps non-ASCII text, and holds no character
    a terminal acts on."""
    value = {"reason": HOSTILE, "title": "é 字", HOSTILE: [HOSTILE]}
    text = json_text(value, indent=2)
    assert RAW_CONTROL.search(text) is None
    assert json.loads(text) == value
    assert "é 字" in text


def _start_with_reason(cli: Cli, reason: str) -> None:
    assert cli("new", C, "--id", "c1").code == 0
    assert cli("start", C, "c1", "--reason", reason).code == 0


def test_history_escapes_a_hostile_reason(cli: Cli) -> None:
    """`fsm history` prints a reason holding escape sequences as visible escapes, on one line."""
    _start_with_reason(cli, HOSTILE + "\nfake 2026-01-01 record")
    result = cli("history", C, "c1")
    assert result.code == 0
    assert RAW_CONTROL.search(result.out) is None
    lines = result.out.strip().split("\n")
    assert len(lines) == 2  # create and start: the newline in the reason made no third line
    assert "(a\\x1b[31mred\\x1b[0m\\x07\\rb\\x9b2J\\u202egnp.exe" in lines[1]
    assert "\\nfake 2026-01-01 record" in lines[1]


def test_history_json_is_exact_and_terminal_safe(cli: Cli) -> None:
    """`fsm history --json` gives the exact reason back as JSON, with nothing raw in it."""
    _start_with_reason(cli, HOSTILE)
    result = cli("history", C, "c1", "--json")
    assert RAW_CONTROL.search(result.out) is None
    records = [json.loads(line) for line in result.out.split("\n") if line]
    assert records[-1]["reason"] == HOSTILE


def test_ls_escapes_a_hostile_state(cli: Cli, tmp_path: Path) -> None:
    """A document whose state holds escape sequences is listed as invalid, escaped."""
    assert cli("new", C, "--id", "c1").code == 0
    path = tmp_path / ".counters" / "c1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "phase": "\x1b]0;pwned\x07\n"}))
    result = cli("ls", C)
    assert RAW_CONTROL.search(result.out) is None
    assert result.out.count("\n") == 2  # the header and the row
    assert "invalid: unknown state '\\x1b]0;pwned\\x07\\n'" in result.out
    assert RAW_CONTROL.search(cli("ls", C, "--json").out) is None


def test_status_escapes_a_hostile_title(cli: Cli, tmp_path: Path) -> None:
    """`fsm status` output and errors carry no raw control characters from the document."""
    assert cli("new", C, "--id", "c1", "--set", "title=\x1b[2J\x1b[Hcleared").code == 0
    assert RAW_CONTROL.search(cli("status", C, "c1").out) is None
    assert RAW_CONTROL.search(cli("status", C, "c1", "--json").out) is None
    path = tmp_path / ".counters" / "c1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "phase": "\x1b[2Jx"}))
    result = cli("status", C, "c1")
    assert result.code == 6
    assert "unknown state '\\x1b[2Jx'" in result.err
    assert RAW_CONTROL.search(result.err) is None


def test_error_messages_escape_arguments(cli: Cli) -> None:
    """An argument echoed in an error message is escaped (one line, no raw escape)."""
    result = cli("new", "\x1b[31mnope\rx")
    assert result.code == 2
    assert RAW_CONTROL.search(result.err) is None
    assert "\\x1b[31mnope" in result.err
