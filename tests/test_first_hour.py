"""What a newcomer meets first: a quiet terminal, options and inputs that can be found, and
mistakes answered with where things belong."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.cli import main
from tests.conftest import COUNTER, ENGINE_MACHINES, Cli, CliResult

C = str(COUNTER)
JUDGED = str(ENGINE_MACHINES / "judged" / "machine.yaml")


def _quiet_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    """The CLI with its default logging (the shared ``cli`` fixture sets a log level)."""
    capsys.readouterr()
    code = main(["-C", str(tmp_path), *argv])
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def test_new_prints_the_id_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsm new` prints the id on stdout and nothing on stderr, so `id=$(fsm new ...)` works."""
    result = _quiet_cli(tmp_path, capsys, "new", C, "--set", "limit=1")
    assert result.code == 0
    assert result.out.strip().startswith("counter-") and len(result.out.splitlines()) == 1
    assert result.err == ""


def test_run_is_quiet_by_default_and_verbose_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Engine events stay in the instance log unless -v asks for them on stderr."""
    assert _quiet_cli(tmp_path, capsys, "new", C, "--id", "c1", "--set", "limit=1").code == 0
    quiet = _quiet_cli(tmp_path, capsys, "run", C, "c1")
    assert quiet.code == 0 and "transition_applied" not in quiet.err
    log = (tmp_path / ".counters" / "c1.fsm" / "log.ndjson").read_text()
    assert "transition_applied" in log
    assert _quiet_cli(tmp_path, capsys, "new", C, "--id", "c2", "--set", "limit=1").code == 0
    loud = _quiet_cli(tmp_path, capsys, "-v", "run", C, "c2")
    assert "transition_applied" in loud.err and "run_completed" in loud.err


def test_library_use_prints_nothing(tmp_path: Path) -> None:
    """Used as a library without configuring logging, fsm writes nothing to stdout or stderr."""
    code = (
        "from fsm import Engine, Workspace\n"
        "from fsm.model.machine import load_machine\n"
        f"ws = Workspace({str(tmp_path)!r})\n"
        f"machine = load_machine({C!r})\n"
        "instance = ws.instance(machine, 'c1')\n"
        "instance.create({'limit': 2})\n"
        "assert Engine(instance).run().outcome == 'completed'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    assert (done.stdout, done.stderr) == ("", "")


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("statsu", "status"), ("lss", "ls"), ("optoins", "options"), ("hisotry", "history")],
)
def test_a_mistyped_command_gets_a_did_you_mean(cli: Cli, typed: str, meant: str) -> None:
    """A command that does not exist is one line naming the closest one."""
    result = cli(typed, "x")
    assert result.code == 2
    assert result.err.strip() == (
        f"fsm: error: unknown command '{typed}' (did you mean '{meant}'?); 'fsm --help' lists them"
    )


def test_every_flag_has_help_text() -> None:
    """Every option of every command says what it is for."""
    from fsm.cli.program import build_parser
    from fsm.cli.table import COMMANDS

    for name in COMMANDS:
        parser = build_parser(name)
        sub = next(a for a in parser._actions if a.dest == "command")
        command = sub.choices[name]  # type: ignore[index]
        for action in command._actions:
            if action.dest != "help":
                assert action.help, f"fsm {name}: {action.option_strings or action.dest}"


def test_options_lists_options_and_inputs_with_where_to_set_them(cli: Cli) -> None:
    """`fsm options MACHINE` shows each option and creation input: type, default, help, and
    where it is set."""
    result = cli("options", JUDGED)
    assert result.code == 0
    assert result.out.splitlines() == [
        "judged options: set in fsm.toml [machine.judged], or for one command with -o KEY=VALUE",
        "  retries  integer  default 0",
        "           How often a part whose program failed is run again before it counts as failed.",
        "",
        "judged creation inputs: fsm new judged --set KEY=VALUE (or --input FILE.json)",
        "  parts         list of object  default []",
        "                The parts to build, each with the program that builds it.",
        "  judge_raises  true|false      default false",
        "                Make the outcome hook fail (for tests).",
    ]
    as_json = cli("options", JUDGED, "--json").json()
    assert [o["name"] for o in as_json["options"]] == ["retries"]
    assert [i["name"] for i in as_json["inputs"]] == ["parts", "judge_raises"]


def test_an_input_given_as_an_option_says_to_use_set(cli: Cli) -> None:
    """`-o parts=...` is answered with where creation inputs go."""
    result = cli("-o", "judge_raises=true", "new", JUDGED)
    assert result.code == 2
    assert "'judge_raises' is a creation input of judged, not an option: give it to " in result.err
    assert "'fsm new judged --set judge_raises=...'" in result.err


def test_an_option_given_as_an_input_says_where_options_go(cli: Cli) -> None:
    """`--set retries=2` is answered with fsm.toml and -o."""
    result = cli("new", JUDGED, "--set", "retries=2")
    assert result.code == 2
    assert result.err.strip() == (
        "fsm: error: 'retries' is an option of judged, not a creation input: set it in "
        "fsm.toml [machine.judged] or with -o retries=..."
    )


def test_an_unknown_input_lists_the_inputs_with_a_did_you_mean(cli: Cli) -> None:
    """A mistyped creation input names the closest input and lists them all."""
    result = cli("new", JUDGED, "--set", "part=[]")
    assert result.code == 2
    assert result.err.strip() == (
        "fsm: error: unknown creation input 'part' of judged (did you mean 'parts'?); the "
        "inputs of judged are: parts, judge_raises ('fsm options judged')"
    )


def test_an_unknown_option_in_fsm_toml_lists_the_options(cli: Cli, tmp_path: Path) -> None:
    """A mistyped option in fsm.toml says where it came from, the closest option and the list."""
    (tmp_path / "fsm.toml").write_text("[machine.judged]\nretry = 2\n")
    result = cli("new", JUDGED)
    assert result.code == 2
    assert (
        "unknown option 'retry' (fsm.toml [machine.judged]) (did you mean 'retries'?); the "
        "options of judged are: retries" in result.err
    )


def test_a_bad_option_of_one_machine_does_not_break_listing_the_others(
    cli: Cli, tmp_path: Path
) -> None:
    """`fsm ls` still lists every machine's instances when one machine's options are wrong;
    that machine's row says why it is not listed."""
    (tmp_path / "fsm.toml").write_text('[machine.ccw-loop]\nfix_tool = "nope"\n')
    created = cli("new", "issue-manager", "--id", "im1")
    assert created.code == 0, created.err
    listed = cli("ls", "--json")
    assert listed.code == 0, listed.err
    rows = {row["machine"]: row for row in listed.json()}
    assert rows["issue-manager"]["id"] == "im1"
    assert "options of machine 'ccw-loop'" in rows["ccw-loop"]["error"]


def test_schema_prints_the_document_and_options_schemas(cli: Cli) -> None:
    """`fsm schema` prints JSON Schema that other tools can validate documents with."""
    document = cli("schema", "ccw-loop")
    assert document.code == 0
    schema = json.loads(document.out)
    assert schema["title"] == "LoopState" and "skill_state" in schema["properties"]
    options = cli("schema", "ccw-loop", "--options").json()
    assert "test_command" in options["properties"]


def test_run_shows_plain_lines_for_the_first_steps_when_not_on_a_terminal(cli: Cli) -> None:
    """Off a terminal, `fsm run` writes one plain progress line for each of the first steps on
    stderr; stdout keeps only the result line."""
    assert cli("new", C, "--id", "c1", "--set", "limit=2").code == 0
    result = cli("run", C, "c1")
    assert result.code == 0
    assert len(result.out.splitlines()) == 1
    lines = result.err.splitlines()
    assert [line.split(" [")[0] for line in lines] == [
        "step 1: idle -> counting (count)",
        "step 2: counting -> counting (count)",
        "step 3: counting -> done (finish)",
    ]
    assert lines[0].endswith("progress 1/2")  # the machine's summary of the document


def test_run_quiet_shows_no_progress(cli: Cli) -> None:
    """`fsm run --quiet` writes nothing on stderr for a run that works."""
    assert cli("new", C, "--id", "c1", "--set", "limit=2").code == 0
    result = cli("run", C, "c1", "--quiet")
    assert (result.code, result.err) == (0, "")


def test_live_progress_redraws_one_line(make_counter: Callable[..., Any]) -> None:
    """On a terminal the progress is one line (redrawn by rich after each step) naming the
    step, state, elapsed time, the machine's summary, machine and instance; it stays when the
    run ends."""
    import io

    from fsm.engine.engine import Engine
    from fsm.view.progress import RunProgress

    instance = make_counter(limit=2)
    stream = io.StringIO()
    progress = RunProgress(instance, stream, live=True)
    Engine(instance).run(on_step=progress)
    progress.close()
    shown = stream.getvalue()
    last = shown.splitlines()[-1]
    assert re.fullmatch(
        r"step 3 \| done \(finish\) \| 00:0\d \| progress 2/2 \| counter c1 *", last
    )


def test_a_narrow_terminal_keeps_the_step_state_and_elapsed_time(
    make_counter: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 40 columns the live line is cut at its end: the step, state and elapsed time stay
    (a long step no longer looks frozen because its timer was cut off)."""
    import io

    from fsm.engine.engine import Engine
    from fsm.view.progress import RunProgress

    monkeypatch.setenv("COLUMNS", "40")
    instance = make_counter(limit=2)
    stream = io.StringIO()
    progress = RunProgress(instance, stream, live=True)
    Engine(instance).run(on_step=progress)
    progress.close()
    last = stream.getvalue().splitlines()[-1]
    assert len(last.rstrip()) <= 40
    assert re.match(r"step 3 \| done \(finish\) \| 00:0\d \| ", last)
