"""Errors right about their cause: `--set` values typed for the field they set, every input
problem of a command in one line, a did-you-mean for mistyped options and filter values, errors
on stderr with the documented exit code, and one line for a failing action."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsm.cli import main
from tests.conftest import BARE, COUNTER, ENGINE_MACHINES, Cli

C = str(COUNTER)
RELEASE = str(ENGINE_MACHINES / "release_checklist" / "machine.yaml")


@pytest.mark.parametrize(
    ("assignment", "field", "stored"),
    [
        pytest.param("version=1.0", "version", "1.0", id="a-number-for-a-text-field"),
        pytest.param("version=1.10", "version", "1.10", id="text-kept-as-written"),
        pytest.param("version=true", "version", "true", id="a-boolean-for-a-text-field"),
        pytest.param('version="2.0"', "version", '"2.0"', id="quotes-are-text-too"),
        pytest.param("channel=beta", "channel", "beta", id="a-literal-of-texts"),
        pytest.param('items=["a", "b"]', "items", ["a", "b"], id="json-for-a-list"),
    ],
)
def test_set_values_are_parsed_for_the_field_they_set(
    cli: Cli, tmp_path: Path, assignment: str, field: str, stored: object
) -> None:
    """A text field gets the text as written; other fields get the value as JSON."""
    extra = [] if field == "version" else ["--set", "version=1.0"]
    result = cli("new", RELEASE, "--id", "r1", "--set", assignment, *extra)
    assert (result.code, result.err) == (0, "")
    document = json.loads((tmp_path / ".releases" / "r1.json").read_text())
    assert document[field] == stored


def test_a_number_still_reaches_a_number_field(cli: Cli, tmp_path: Path) -> None:
    """`--set limit=3` gives a number field the number 3."""
    assert cli("new", C, "--id", "c1", "--set", "limit=3").code == 0
    assert json.loads((tmp_path / ".counters" / "c1.json").read_text())["limit"] == 3


@pytest.mark.parametrize(
    ("argv", "parts"),
    [
        pytest.param(
            ["new", "ccw-loop", "--set", "max_iterations=lots"],
            ["a loop needs a title", "max_iterations must be a number, got 'lots'"],
            id="type-error-and-missing-title",
        ),
        pytest.param(
            ["new", "ccw-loop", "--set", "titel=x", "--set", "priority=urgent"],
            ["unknown creation input 'titel'", "did you mean 'title'?", "priority must be one"],
            id="unknown-key-and-bad-value",
        ),
        pytest.param(
            ["new", RELEASE, "--set", "channel=nightly", "--set", "items=3"],
            ["version: Field required", "channel: Input should be", "items: Input should be"],
            id="missing-and-two-bad-values",
        ),
        pytest.param(
            ["new", C, "--set", "status=done", "--set", "phase=done", "--set", "limt=2"],
            ["'status' cannot be given", "'phase' cannot be given", "did you mean 'limit'?"],
            id="owned-fields-and-a-typo",
        ),
    ],
)
def test_every_input_problem_of_a_command_is_in_its_one_error_line(
    cli: Cli, tmp_path: Path, argv: list[str], parts: list[str]
) -> None:
    """All the problems of one `fsm new` come together in one line on stderr (exit 2), and
    nothing is created."""
    result = cli(*argv)
    assert result.code == 2 and result.out == ""
    [line] = result.err.splitlines()
    assert line.startswith("fsm: error: ")
    assert all(part in line for part in parts), line
    assert not any(tmp_path.glob(".*/*.json"))


@pytest.mark.parametrize(
    ("argv", "typed", "meant", "where"),
    [
        pytest.param(["run", C, "c1", "--maxsteps", "3"], "--maxsteps", "--max-steps", "run"),
        pytest.param(["ls", "--stauts", "running"], "--stauts", "--status", "ls"),
        pytest.param(["new", C, "--sett", "limit=1"], "--sett", "--set", "new"),
        pytest.param(["history", C, "c1", "--tial=3"], "--tial", "--tail", "history"),
        pytest.param(["--worksapce", ".", "ls"], "--worksapce", "--workspace", ""),
    ],
)
def test_a_mistyped_option_gets_a_did_you_mean(
    cli: Cli, argv: list[str], typed: str, meant: str, where: str
) -> None:
    """An unknown option is one fsm line naming the closest option of that command (exit 2),
    not argparse's usage block."""
    result = cli(*argv)
    command = f"fsm {where}".strip()
    assert result.code == 2
    assert result.err.splitlines() == [
        f"fsm: error: unknown option '{typed}' of {command} (did you mean '{meant}'?); "
        f"'{command} --help' lists them"
    ]


def test_other_usage_errors_are_one_fsm_line(cli: Cli) -> None:
    """A malformed value or a missing argument is one `fsm: error:` line saying where the
    usage is (exit 2)."""
    result = cli("run", C, "c1", "--max-steps", "many")
    assert result.code == 2
    assert result.err.splitlines() == [
        "fsm: error: argument --max-steps: invalid int value: 'many' (fsm run); "
        "'fsm run --help' shows its usage"
    ]
    missing = cli("new", C, "--id")
    assert missing.code == 2 and len(missing.err.splitlines()) == 1
    assert missing.err.startswith("fsm: error: option --id of fsm new needs a value")


def test_a_value_that_reads_as_an_option_says_how_to_give_it(cli: Cli) -> None:
    """`--id -x` (argparse takes -x for an option) says how a value starting with '-' is
    written; written so, the id is judged by fsm's own rule for ids."""
    dashed = cli("new", C, "--id", "-x")
    assert dashed.code == 2
    assert dashed.err.splitlines() == [
        "fsm: error: option --id of fsm new needs a value (a value that starts with '-' is "
        "written --id=VALUE); 'fsm new --help' shows its usage"
    ]
    joined = cli("new", C, "--id=-x")
    assert joined.code == 2
    assert "invalid instance id '-x'" in joined.err


def test_an_unknown_status_filter_is_an_error_with_a_suggestion(cli: Cli) -> None:
    """`fsm ls --status faild` is refused with the closest status (exit 2), not an empty
    listing with exit 0."""
    assert cli("new", C, "--id", "c1", "--set", "limit=1").code == 0
    result = cli("ls", C, "--status", "faild")
    assert (result.code, result.out) == (2, "")
    [line] = result.err.splitlines()
    assert line.startswith(
        "fsm: error: unknown status 'faild' for --status (did you mean 'failed'?)"
    )
    assert "created, " in line or "created" in line


@pytest.mark.parametrize("status", ["failed", "paused", "done"])
def test_a_known_status_without_instances_lists_nothing(cli: Cli, status: str) -> None:
    """A status the machine declares is a fair question even when no instance has it."""
    assert cli("new", C, "--id", "c1", "--set", "limit=1").code == 0
    result = cli("ls", C, "--status", status)
    assert (result.code, result.out) == (0, "")
    assert result.err.startswith(f"fsm: no instances of {C} with status {status} in ")


def test_check_of_a_missing_file_writes_its_error_on_stderr(cli: Cli, tmp_path: Path) -> None:
    """`fsm check ./nosuch/machine.yaml` is an error on stderr with exit 2, nothing on stdout."""
    result = cli("check", str(tmp_path / "nosuch" / "machine.yaml"))
    assert (result.code, result.out) == (2, "")
    [line] = result.err.splitlines()
    assert line.startswith("fsm: error: ") and "no machine file" in line


def test_a_failing_action_ends_a_run_with_one_line(cli: Cli) -> None:
    """A run whose action raises prints its one result line (exit 1): no log event and no
    second error line on stderr, only the step's progress line (none with -q)."""
    assert cli("new", str(BARE), "--id", "b1", "--set", "explode=true").code == 0
    result = cli("run", str(BARE), "b1")
    assert result.code == 1
    assert result.out.splitlines() == [
        "b1: error in state 'open' after 1 steps: do_work failed: ValueError: the work exploded"
    ]
    assert [line.split(" [")[0] for line in result.err.splitlines()] == [
        "step 1: open -> open (work)"
    ]
    quiet = cli("run", str(BARE), "b1", "-q")
    assert (quiet.code, quiet.err, len(quiet.out.splitlines())) == (1, "", 1)


def test_a_failing_step_is_one_error_line(cli: Cli) -> None:
    """`fsm step` of a failing action prints one `fsm: error:` line on stderr (exit 1)."""
    assert cli("new", str(BARE), "--id", "b1", "--set", "explode=true").code == 0
    result = cli("step", str(BARE), "b1")
    assert (result.code, result.out) == (1, "")
    assert result.err.splitlines() == ["fsm: error: do_work failed: ValueError: the work exploded"]


def test_the_failing_action_is_in_the_log_file_and_on_stderr_with_v(
    cli: Cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine's event of a failed action stays in the instance's log file (level error),
    and reaches stderr with -v."""
    assert cli("new", str(BARE), "--id", "b1", "--set", "explode=true").code == 0
    assert cli("run", str(BARE), "b1", "-q").code == 1
    log = (tmp_path / "tickets" / "b1.fsm" / "log.ndjson").read_text().splitlines()
    [event] = [json.loads(line) for line in log if "action_failed" in line]
    assert event["level"] == "error" and "traceback" in event
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "-v", "run", str(BARE), "b1", "-q"]) == 1
    assert "action_failed" in capsys.readouterr().err
