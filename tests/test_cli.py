"""The `fsm` command line: every command, its output and its exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsm.cli.table import COMMANDS
from tests.conftest import BARE, COUNTER, Cli

C = str(COUNTER)


def new_counter(cli: Cli, *values: str, instance_id: str = "c1") -> str:
    """Create a counter instance through the CLI."""
    sets = [arg for value in values for arg in ("--set", value)]
    result = cli("new", C, "--id", instance_id, *sets)
    assert result.code == 0, result.err
    return result.out.strip()


def test_new_prints_a_generated_id(cli: Cli, tmp_path: Path) -> None:
    """`fsm new` without --id prints a fresh `<prefix>-YYYYMMDDTHHMMSS-<hex>` id."""
    result = cli("new", C, "--set", "limit=2")
    assert result.code == 0
    instance_id = result.out.strip()
    assert instance_id.startswith("counter-") and len(instance_id.split("-")[-1]) == 8
    assert (tmp_path / ".counters" / f"{instance_id}.json").exists()


def test_new_reads_input_file_and_dotted_sets(cli: Cli, tmp_path: Path) -> None:
    """--input gives initial values and --set overrides them; JSON values are parsed."""
    (tmp_path / "in.json").write_text(json.dumps({"limit": 7, "title": "from file"}))
    result = cli("new", C, "--id", "x", "--input", str(tmp_path / "in.json"), "--set", "limit=2")
    assert result.code == 0
    document = json.loads((tmp_path / ".counters" / "x.json").read_text())
    assert (document["limit"], document["title"]) == (2, "from file")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["new", "nope"], "unknown machine 'nope'", id="unknown-machine"),
        pytest.param(["new", "countr"], "unknown machine", id="typo-machine"),
        pytest.param(["new", C, "--id", "../../etc/passwd"], "invalid instance id", id="unsafe-id"),
        pytest.param(["new", C, "--id", ".hidden"], "invalid instance id", id="leading-dot"),
        pytest.param(["new", C, "--set", "limit"], "expected KEY=VALUE", id="malformed-set"),
        pytest.param(["new", C, "--set", "limit=-1"], "limit", id="invalid-value"),
        pytest.param(["new", C, "--input", "missing.json"], "cannot read", id="missing-input"),
        pytest.param(
            ["-o", "bogus=1", "new", C],
            "unknown option 'bogus' (-o); the options of counter are: folder, step_size, delay",
            id="unknown-option",
        ),
        pytest.param(
            ["status", C, "nobody"], "no counter instance 'nobody'", id="unknown-instance"
        ),
        pytest.param(["status", C, "a/b"], "invalid instance id", id="slash-id"),
        pytest.param(["diagram", "-f", "gif"], "unknown diagram format", id="bad-format"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli: Cli, argv: list[str], message: str) -> None:
    """Bad input gets one clear line on stderr, exit 2, and no traceback."""
    result = cli(*argv)
    assert result.code == 2
    assert message in result.err
    assert "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_malformed_input_json_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    """An --input file that is not JSON is refused with its name."""
    (tmp_path / "bad.json").write_text("{nope")
    result = cli("new", C, "--input", str(tmp_path / "bad.json"))
    assert result.code == 2 and "bad.json is not valid JSON" in result.err


def test_run_to_success_exits_0(cli: Cli) -> None:
    """`fsm run` drives a created instance to its success state."""
    new_counter(cli, "limit=2")
    result = cli("run", C, "c1")
    assert result.code == 0
    assert "completed in state 'done' after 3 steps" in result.out


def test_run_to_failure_exits_4(cli: Cli) -> None:
    """A run that ends in a failure final state exits 4."""
    new_counter(cli, "limit=3", "fail_at=0", "max_errors=1")
    assert cli("run", C, "c1").code == 4


def test_run_with_step_limit_exits_5(cli: Cli) -> None:
    """--max-steps stops the run before a final state with exit 5."""
    new_counter(cli, "limit=9")
    result = cli("run", C, "c1", "--max-steps", "2")
    assert result.code == 5
    assert result.out.strip().endswith("after 2 steps: reached the step limit of 2")


def test_run_of_paused_instance_exits_5(cli: Cli) -> None:
    """A paused instance is not stepped; run exits 5."""
    new_counter(cli, "limit=9")
    assert cli("start", C, "c1").code == 0
    assert cli("pause", C, "c1", "--reason", "wait").code == 0
    assert cli("run", C, "c1").code == 5


def test_step_and_fire(cli: Cli) -> None:
    """`step` takes one automatic transition; `fire` a named one; refusals exit 3."""
    new_counter(cli, "limit=1")
    assert cli("step", C, "c1").code == 5  # created: not running yet
    cli("start", C, "c1")
    step = cli("step", C, "c1")
    assert step.code == 0 and "idle -> counting (count)" in step.out
    refused = cli("fire", C, "c1", "count")
    assert refused.code == 3 and "below_limit=False" in refused.err
    unknown = cli("fire", C, "c1", "launch")
    assert unknown.code == 3 and "not allowed in state 'counting'" in unknown.err
    done = cli("fire", C, "c1", "finish")
    assert done.code == 0


def test_fire_that_fails_exits_1_with_one_line(cli: Cli) -> None:
    """An event whose action fails exits 1 with one error line; the traceback is in the log file."""
    new_counter(cli, "limit=1")
    cli("start", C, "c1")
    cli("step", C, "c1")
    result = cli("fire", C, "c1", "spoil")
    assert result.code == 1
    assert "does not validate" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("command", ["start", "pause", "resume", "stop"])
def test_control_commands(cli: Cli, command: str) -> None:
    """Each control command is legal from some status and refused (exit 3) from another."""
    new_counter(cli, "limit=5")
    legal_from = {"start": [], "pause": ["start"], "resume": ["start", "pause"], "stop": []}
    for before in legal_from[command]:
        assert cli(before, C, "c1").code == 0
    assert cli(command, C, "c1").code == 0
    again = cli(command, C, "c1")
    assert again.code == 3
    assert f"cannot {command}" in again.err


def test_status_text_and_json(cli: Cli) -> None:
    """`status` shows state, status, summary, enabled events and control commands."""
    new_counter(cli, "limit=2")
    text = cli("status", C, "c1")
    assert text.code == 0
    assert "state:   idle (Not counted yet.)" in text.out
    assert "progress: 0/2" in text.out
    assert "control: start, stop" in text.out
    data = cli("status", C, "c1", "--json").json()
    assert data["state"] == "idle" and data["status"] == "created"
    assert [e["event"] for e in data["events"] if e["enabled"]] == ["count"]


def test_ls_newest_first_with_status_filter(cli: Cli) -> None:
    """`ls` lists instances newest first, filtered by status."""
    new_counter(cli, "limit=1", instance_id="a1")
    new_counter(cli, "limit=1", instance_id="a2")
    cli("run", C, "a1")
    rows = cli("ls", C, "--json").json()
    assert [r["id"] for r in rows] == ["a1", "a2"]
    assert [r["id"] for r in cli("ls", C, "--status", "created", "--json").json()] == ["a2"]


def test_history_and_replay(cli: Cli) -> None:
    """`history` prints one line per journal record; `replay` confirms the document."""
    new_counter(cli, "limit=1")
    cli("run", C, "c1")
    history = cli("history", C, "c1")
    assert history.code == 0
    assert len(history.out.strip().splitlines()) == 4  # create, start, count, finish
    records = [json.loads(line) for line in cli("history", C, "c1", "--json").out.splitlines()]
    assert [r["kind"] for r in records] == ["create", "control", "transition", "transition"]
    replay = cli("replay", C, "c1")
    assert replay.code == 0 and "reproduces state 'done'" in replay.out


def test_replay_mismatch_exits_6(cli: Cli, tmp_path: Path) -> None:
    """A document that the journal does not reproduce fails the replay check (exit 6)."""
    new_counter(cli, "limit=1")
    path = tmp_path / ".counters" / "c1.json"
    document = json.loads(path.read_text())
    document["phase"] = "done"
    path.write_text(json.dumps(document))
    assert cli("replay", C, "c1").code == 6


def test_corrupt_document_is_exit_6_and_untouched(cli: Cli, tmp_path: Path) -> None:
    """A truncated document gives one error line (exit 6) and stays byte for byte as it was."""
    new_counter(cli, "limit=1")
    path = tmp_path / ".counters" / "c1.json"
    path.write_bytes(b'{"status": "runn')
    result = cli("run", C, "c1")
    assert result.code == 6 and "not valid JSON" in result.err
    assert path.read_bytes() == b'{"status": "runn'


def test_recover_rebuilds_and_keeps_the_corrupt_file(cli: Cli, tmp_path: Path) -> None:
    """`recover` moves the corrupt file aside, writes a valid document and says what was lost."""
    new_counter(cli, "limit=1")
    path = tmp_path / ".counters" / "c1.json"
    path.write_bytes(b"garbage")
    result = cli("recover", C, "c1")
    assert result.code == 0
    assert "count could not be recovered" in result.out
    aside = list(path.parent.glob("c1.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"garbage"
    assert cli("status", C, "c1").code == 0


def test_recover_of_valid_document_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    """`recover` on a valid document says so and leaves it alone."""
    new_counter(cli, "limit=1")
    before = (tmp_path / ".counters" / "c1.json").read_bytes()
    result = cli("recover", C, "c1")
    assert result.code == 0 and "nothing to recover" in result.out
    assert (tmp_path / ".counters" / "c1.json").read_bytes() == before


def test_recover_unsupported_machine_is_exit_2(cli: Cli) -> None:
    """A machine without a recover hook refuses recovery with exit 2."""
    assert cli("new", str(BARE), "--id", "t1").code == 0
    result = cli("recover", str(BARE), "t1")
    assert result.code == 2 and "does not support recovery" in result.err


def test_log_format_json_writes_json_lines_to_stderr(cli: Cli) -> None:
    """--log-format json makes every log line on stderr a JSON object with the event name."""
    new_counter(cli, "limit=1")
    result = cli("--log-format", "json", "--log-level", "info", "run", C, "c1")
    events = [json.loads(line) for line in result.err.splitlines()]
    names = [e["event"] for e in events]
    assert "transition_applied" in names and "run_completed" in names
    assert all(e["machine"] == "counter" and e["instance"] == "c1" for e in events)


def test_usage_error_exits_2(cli: Cli) -> None:
    """An unknown command is a usage error (exit 2)."""
    assert cli("frobnicate").code == 2


def test_internal_error_is_one_line(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception becomes one line on stderr and exit 1, no traceback."""
    import dataclasses

    from fsm.cli.table import COMMANDS

    def explode(*args: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setitem(COMMANDS, "ls", dataclasses.replace(COMMANDS["ls"], handler=explode))
    result = cli("ls")
    assert result.code == 1
    assert (
        result.err.strip()
        == "fsm: error: internal error: RuntimeError: boom (set FSM_DEBUG=1 for the traceback)"
    )


def test_machines_lists_registered_machines(cli: Cli) -> None:
    """`fsm machines` shows the three bundled machines with description and source."""
    rows = cli("machines", "--json").json()
    assert [r["name"] for r in rows] == ["ccw-loop", "issue-manager", "skill-tuning"]
    assert all(r["source"].startswith("bundled") and r["description"] for r in rows)
    text = cli("machines")
    assert text.code == 0
    assert text.out.splitlines()[0].startswith("ccw-loop ")


def test_check_clean_broken_and_unreadable(cli: Cli, tmp_path: Path) -> None:
    """`fsm check` exits 0 on a clean machine, 1 with findings, 2 when the file is unreadable."""
    clean = cli("check", C)
    assert clean.code == 0 and "ok" in clean.out
    broken = tmp_path / "broken" / "machine.yaml"
    broken.parent.mkdir()
    broken.write_text(COUNTER.read_text().replace("dest: done", "dest: dnoe"))
    (broken.parent / "functions.py").write_text((COUNTER.parent / "functions.py").read_text())
    found = cli("check", str(broken))
    assert found.code == 1
    assert "unknown state 'dnoe' (did you mean 'done'?)" in found.out
    assert cli("check", str(tmp_path / "missing.yaml")).code == 2


def test_diagram_writes_every_format(cli: Cli, tmp_path: Path) -> None:
    """`fsm diagram MACHINE -o DIR` writes DOT, SVG, PNG and Mermaid files."""
    result = cli("diagram", C, "-o", str(tmp_path / "out"))
    assert result.code == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["counter.dot", "counter.mmd", "counter.png", "counter.svg"]


def test_diagram_of_one_run(cli: Cli, tmp_path: Path) -> None:
    """`fsm diagram MACHINE --run ID` draws the instance with its current state and counts."""
    new_counter(cli, "limit=2")
    cli("run", C, "c1")
    result = cli("diagram", C, "--run", "c1", "-o", str(tmp_path / "c1.dot"))
    assert result.code == 0
    dot = (tmp_path / "c1.dot").read_text()
    assert "×2" in dot  # the count transition was taken twice
    svg = cli("diagram", C, "--run", "c1", "-o", str(tmp_path / "c1.svg"))
    assert svg.code == 0 and (tmp_path / "c1.svg").read_bytes().lstrip().startswith(b"<")


def test_ls_keeps_machines_with_one_layout_apart(cli: Cli, tmp_path: Path) -> None:
    """Two machines sharing a storage layout each list only the instances they created."""
    other = tmp_path / "twin" / "machine.yaml"
    other.parent.mkdir()
    other.write_text(COUNTER.read_text().replace("name: counter", "name: twin"))
    (other.parent / "functions.py").write_text((COUNTER.parent / "functions.py").read_text())
    new_counter(cli, "limit=1", instance_id="mine")
    assert cli("new", str(other), "--id", "theirs").code == 0
    assert [r["id"] for r in cli("ls", C, "--json").json()] == ["mine"]
    assert [r["id"] for r in cli("ls", str(other), "--json").json()] == ["theirs"]


def test_file_system_errors_are_store_errors(cli: Cli, tmp_path: Path) -> None:
    """A meta folder that is a plain file is a store error (exit 6), not an internal error."""
    new_counter(cli, "limit=1")
    meta = tmp_path / ".counters" / "c1.fsm"
    for child in meta.iterdir():
        child.unlink()
    meta.rmdir()
    meta.write_text("not a folder")
    result = cli("run", C, "c1")
    assert result.code == 6
    assert "c1.fsm is not a folder" in result.err and len(result.err.splitlines()) == 1


def test_interactive_menu_prompts_on_stderr(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --interactive` shows the menu and prompt on stderr and fires the chosen event."""
    import io

    assert cli("new", str(BARE), "--id", "t1").code == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("2\n"))
    result = cli("run", str(BARE), "t1", "--interactive")
    assert result.code == 4  # the person chose `reject`, a failure final state
    assert "1. approve" in result.err and "> " in result.err
    assert result.out.strip() == (
        "t1: failed in state 'rejected' after 2 steps: ended in failure state 'rejected'"
    )


def test_near_miss_machine_table_in_fsm_toml_is_an_error(cli: Cli, tmp_path: Path) -> None:
    """`[machine.countr]` for the counter is reported with a did-you-mean, not ignored."""
    new_counter(cli, "limit=1")
    (tmp_path / "fsm.toml").write_text("[machine.countr]\nstep_size = 2\n")
    result = cli("run", C, "c1")
    assert result.code == 2
    assert "[machine.countr] names no machine (did you mean 'counter'?)" in result.err


@pytest.mark.parametrize("folder", ["../outside", "/tmp/elsewhere", "a/../../b"])
def test_storage_options_cannot_lead_outside_the_workspace(cli: Cli, folder: str) -> None:
    """An option used in a storage path may not move instance files out of the workspace."""
    result = cli("-o", f"folder={folder}", "new", C, "--id", "x1")
    assert result.code == 2
    assert "leads outside the workspace" in result.err


def test_help_lists_the_command_table_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    """`fsm --help` lists exactly the commands of the one command table, in its order, each
    with the help line declared there."""
    from fsm.cli import main

    assert main(["--help"]) == 0
    shown = capsys.readouterr().out.split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in shown.splitlines() if line[4:5].strip()]
    assert names == list(COMMANDS)  # a command's line starts 4 spaces in; wrapped help deeper
    for name, command in COMMANDS.items():
        assert command.help in " ".join(shown.split()), name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_runs_the_handler_declared_with_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command a command line names runs the handler declared with it in the table, given
    the parsed arguments: one declaration drives both the parser and the dispatch."""
    import argparse
    import dataclasses

    from fsm.cli import main
    from fsm.cli.program import build_parser

    ran: list[argparse.Namespace] = []

    def record(args: argparse.Namespace, values: dict[str, object]) -> int:
        ran.append(args)
        return 0

    monkeypatch.setitem(COMMANDS, name, dataclasses.replace(COMMANDS[name], handler=record))
    sub = next(a for a in build_parser(name)._actions if a.dest == "command")
    parser = sub.choices[name]  # type: ignore[index]
    words = [name]
    while True:  # a command with subcommands (fsm x y ...): the first of each level
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        required = [a for a in parser._actions if not a.option_strings and a.nargs is None]
        words += [next(iter(a.choices)) if a.choices else "x" for a in required]
        if not nested:
            break
        first = next(iter(nested[0].choices))
        words.append(first)
        parser = nested[0].choices[first]
    assert main(words) == 0
    assert [args.command for args in ran] == [name]
