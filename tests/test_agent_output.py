"""Reading agents' structured output: the final message, files changed, exit reason and usage of
each CLI's event format (transcripts in tests/agent_transcripts), and the error line of a
failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fsm.process.agent_output import error_line, read_output
from fsm.process.agents import OutputFormat

TRANSCRIPTS = Path(__file__).parent / "agent_transcripts"


@pytest.mark.parametrize(
    ("output", "transcript", "expected"),
    [
        pytest.param(
            "codex-json",
            "codex-fix.jsonl",
            {
                "final_message": "Added div to calc.py; the three tests pass.",
                "files_changed": ("calc.py", "tests/test_div.py"),
                "exit_reason": "completed",
                "failed": False,
                "usage": {"input_tokens": 4210, "cached_input_tokens": 1024, "output_tokens": 388},
                "events": 9,
            },
            id="codex-fix",
        ),
        pytest.param(
            "codex-json",
            "codex-failed.jsonl",
            {
                "final_message": None,
                "files_changed": (),
                "exit_reason": "stream disconnected before completion: network unreachable",
                "failed": True,
                "usage": {},
                "events": 4,
            },
            id="codex-turn-failed",
        ),
        pytest.param(
            "claude-stream-json",
            "claude-fix.jsonl",
            {
                "final_message": "div is in calc.py now; the tests pass.",
                "files_changed": ("/work/project/calc.py", "/work/project/NOTES.md"),
                "exit_reason": "completed",
                "failed": False,
                "usage": {
                    "input_tokens": 3000,
                    "cached_input_tokens": 2048,
                    "output_tokens": 112,
                    "cost_usd": 0.0421,
                    "turns": 3,
                },
                "events": 6,
            },
            id="claude-fix",
        ),
        pytest.param(
            "claude-stream-json",
            "claude-not-logged-in.jsonl",
            {
                "final_message": "Not logged in · Please run /login",
                "files_changed": (),
                "exit_reason": "Not logged in · Please run /login",
                "failed": True,
                "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0, "turns": 1},
                "events": 3,
            },
            id="claude-error-result",
        ),
        pytest.param(
            "claude-stream-json",
            "qwen-fix.jsonl",
            {
                "final_message": "calc.py has div.",
                "files_changed": ("/work/project/calc.py",),
                "exit_reason": "completed",
                "failed": False,
                "usage": {
                    "input_tokens": 1500,
                    "cached_input_tokens": 300,
                    "output_tokens": 58,
                    "turns": 2,
                },
                "events": 5,
            },
            id="qwen-fix",
        ),
        pytest.param(
            "claude-stream-json",
            "qwen-no-auth.jsonl",
            {
                "final_message": None,
                "files_changed": (),
                "exit_reason": (
                    "No auth type is selected. Configure one before running in non-interactive "
                    "mode."
                ),
                "failed": True,
                "usage": {"input_tokens": 0, "output_tokens": 0, "turns": 0},
                "events": 1,
            },
            id="qwen-error-result",
        ),
        pytest.param(
            "gemini-stream-json",
            "gemini-fix.jsonl",
            {
                "final_message": "Fixed div in calc.py.",
                "files_changed": ("/work/project/calc.py", "/work/project/test_more.py"),
                "exit_reason": "completed",
                "failed": False,
                "usage": {"input_tokens": 2400, "cached_input_tokens": 512, "output_tokens": 200},
                "events": 12,
            },
            id="gemini-fix",
        ),
        pytest.param(
            "gemini-stream-json",
            "gemini-error.jsonl",
            {
                "final_message": None,
                "files_changed": (),
                "exit_reason": "Quota exceeded for this project",
                "failed": True,
                "usage": {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0},
                "events": 3,
            },
            id="gemini-error-result",
        ),
    ],
)
def test_reader_reports_what_the_events_say(
    output: OutputFormat, transcript: str, expected: dict[str, Any]
) -> None:
    """Each format's reader finds the final message (the last answer after the last tool call),
    the files the agent's edits touched (failed edits of codex left out), how the run ended and
    its token and cost figures."""
    report = read_output(output, (TRANSCRIPTS / transcript).read_text(encoding="utf-8"))
    found = {key: getattr(report, key) for key in expected}
    assert found == expected
    assert report.format == output


def test_lines_that_are_not_events_are_kept_as_text() -> None:
    """A warning printed between the events is kept apart, and malformed JSON is text too."""
    stdout = (
        "WARNING: proceeding without PATH aliases\n"
        '{"type":"turn.started"}\n'
        '{"type": broken\n'
        '{"type":"item.completed","item":{"type":"agent_message","text":"done"}}\n'
    )
    report = read_output("codex-json", stdout)
    assert (report.final_message, report.events) == ("done", 2)
    assert report.text == 'WARNING: proceeding without PATH aliases\n{"type": broken'


@pytest.mark.parametrize(
    "output", ["codex-json", "claude-stream-json", "gemini-stream-json"], ids=str
)
def test_output_without_events_says_nothing(output: OutputFormat) -> None:
    """An agent that printed no event (it failed before starting) gets an empty report that
    keeps its text, so the failure is described from its own words."""
    report = read_output(output, "error: unexpected argument '--full-auto' found\n")
    assert (report.events, report.final_message, report.failed) == (0, None, False)
    assert report.text == "error: unexpected argument '--full-auto' found\n"


def test_unknown_events_and_odd_values_are_skipped() -> None:
    """Events of types the reader does not know, and fields of the wrong type, are skipped."""
    stdout = "\n".join(
        [
            '{"type":"item.plan.delta","item_id":"x","delta":"..."}',
            '{"type":"item.completed","item":"not an object"}',
            '{"type":"item.completed","item":{"type":"file_change","changes":[1,{"path":7}]}}',
            '{"type":"turn.completed","usage":{"input_tokens":"many","output_tokens":true}}',
            "[1, 2]",
        ]
    )
    report = read_output("codex-json", stdout)
    assert (report.files_changed, dict(report.usage), report.exit_reason) == ((), {}, "completed")
    assert report.events == 4


def test_text_output_is_its_own_final_message() -> None:
    """An agent configured without a format: its stdout is the final message, nothing else."""
    report = read_output("text", "  I changed calc.py\n")
    assert (report.final_message, report.events, report.files_changed) == (
        "I changed calc.py",
        0,
        (),
    )


QWEN_REJECTION = (
    "Usage: qwen [options] [command]\n\n"
    "Options:\n"
    "      --fallback-model   Fallback model(s) for capacity errors (429/503/529)  [array]\n"
    "  -h, --help           Show help  [boolean]\n"
    "\n"
    "Invalid values:\n"
    '  Argument: approval-mode, Given: "auto_edit", Choices: "plan", "default", "auto-edit"\n'
)


@pytest.mark.parametrize(
    ("stderr", "stdout", "line"),
    [
        pytest.param(
            QWEN_REJECTION,
            "",
            'Invalid values: Argument: approval-mode, Given: "auto_edit", Choices: "plan", '
            '"default", "auto-edit"',
            id="yargs-invalid-values-with-its-detail",
        ),
        pytest.param(
            "error: unexpected argument '--full-auto' found\n\n  tip: to pass it as a value\n"
            "Usage: codex exec [OPTIONS] [PROMPT]\n",
            "",
            "error: unexpected argument '--full-auto' found",
            id="clap-error",
        ),
        pytest.param(
            "Unknown argument: bogus\nUsage: gemini [options]\n  -h, --help  Show help\n",
            "",
            "Unknown argument: bogus",
            id="yargs-unknown-argument",
        ),
        pytest.param(
            "",
            "step 1\nTraceback (most recent call last):\n  File x\nValueError: bad input\n",
            "ValueError: bad input",
            id="exception-line-in-stdout",
        ),
        pytest.param("warming up\nquota exceeded\n", "", "quota exceeded", id="no-error-line-last"),
        pytest.param("", "", "", id="silent"),
    ],
)
def test_error_line_names_the_line_that_says_why(stderr: str, stdout: str, line: str) -> None:
    """The first line that reads as an error (with its indented detail under a line ending in
    a colon), standard error first, else the last line."""
    assert error_line(stderr, stdout) == line
