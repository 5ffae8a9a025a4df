"""Finding out why an action failed, and what to do about an instance that cannot step: the
ways docs/writing-a-machine.md promises, held to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsm.cli import main
from tests.conftest import COUNTER, CliResult

C = str(COUNTER)
DOCS = Path(__file__).parent.parent / "docs" / "writing-a-machine.md"


def _cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    capsys.readouterr()
    code = main(["-C", str(tmp_path), *argv])
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def _failing(tmp_path: Path, capsys: pytest.CaptureFixture[str], id: str) -> None:
    assert _cli(tmp_path, capsys, "new", C, "--id", id, "--set", "fail_at=0").code == 0


def test_the_docs_name_fsm_debug_and_v_as_the_way_to_see_a_traceback() -> None:
    """The tutorial's sentence the tests below hold the command line to."""
    text = " ".join(DOCS.read_text().split())
    assert "(`FSM_DEBUG=1` prints it; `-v` shows" in text


@pytest.mark.parametrize("how", ["FSM_DEBUG", "-v"])
def test_a_failing_actions_traceback_is_printed_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """FSM_DEBUG=1 or -v prints the failing action's traceback, down to the line that raised."""
    _failing(tmp_path, capsys, "c1")
    flags: list[str] = []
    if how == "FSM_DEBUG":
        monkeypatch.setenv("FSM_DEBUG", "1")
    else:
        flags = ["-v"]
    result = _cli(tmp_path, capsys, *flags, "run", C, "c1")
    assert result.code == 4  # the counter's errors budget ends it failed
    assert "Traceback (most recent call last):" in result.err
    assert 'raise RuntimeError(f"cannot count past {doc.fail_at}")' in result.err
    assert "RuntimeError: cannot count past 0" in result.err


def test_no_traceback_reaches_the_terminal_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without FSM_DEBUG or -v a failing action is the run's one line; the traceback stays in the
    instance's log file."""
    monkeypatch.delenv("FSM_DEBUG", raising=False)
    _failing(tmp_path, capsys, "c1")
    result = _cli(tmp_path, capsys, "run", C, "c1")
    assert result.code == 4
    assert "Traceback" not in result.err + result.out
    assert "failed: increment failed: RuntimeError: cannot count past 0" in result.err
    log = (tmp_path / ".counters" / "c1.fsm" / "log.ndjson").read_text()
    assert "Traceback (most recent call last):" in log


def test_step_on_a_created_instance_names_the_command_that_starts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsm step` of an instance never started says how to start it, with the machine as typed."""
    assert _cli(tmp_path, capsys, "new", C, "--id", "c1").code == 0
    result = _cli(tmp_path, capsys, "step", C, "c1")
    assert result.code == 5
    assert result.err.strip() == (
        f"fsm: instance is created: 'fsm start {C} c1' starts it, "
        f"'fsm run {C} c1' starts it and drives it to the end"
    )


def test_step_on_a_paused_instance_names_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A paused instance's refusal names `fsm resume`, not start."""
    assert _cli(tmp_path, capsys, "new", C, "--id", "c1").code == 0
    assert _cli(tmp_path, capsys, "start", C, "c1").code == 0
    assert _cli(tmp_path, capsys, "pause", C, "c1").code == 0
    result = _cli(tmp_path, capsys, "step", C, "c1")
    assert result.code == 5
    assert result.err.strip() == f"fsm: instance is paused: 'fsm resume {C} c1' resumes it"


_SLOW_START = """
import importlib.abc, pathlib, sys, time

READY = pathlib.Path(sys.argv[1])

class SlowImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "fsm.cli.program":
            READY.write_text("importing")
            time.sleep(60)
        return None

sys.meta_path.insert(0, SlowImport())
from fsm.cli import main_entry
sys.argv = ["fsm", "ls"]
main_entry()
"""


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_while_the_command_line_is_imported_is_one_line(
    tmp_path: Path, signame: str, code: int
) -> None:
    """Ctrl-C, SIGTERM or SIGHUP while fsm is still importing (a short command's first ~0.1 s)
    is `fsm: error: interrupted` and 128 plus the signal, never a traceback or a silent exit."""
    import signal
    import subprocess
    import sys
    import time

    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_START, str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.01)
        assert ready.exists(), process.communicate()
        process.send_signal(getattr(signal, signame))
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, out, err) == (code, "", "fsm: error: interrupted\n")


def test_ls_has_a_header_and_says_when_there_is_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsm ls` heads its columns; with no instance it says so on stderr (stdout stays empty, and
    `--json` is `[]` as before)."""
    empty = _cli(tmp_path, capsys, "ls")
    assert (empty.code, empty.out) == (0, "")
    assert empty.err == f"fsm: no instances in {tmp_path.resolve()}\n"
    assert _cli(tmp_path, capsys, "ls", "--json").out.strip() == "[]"
    assert _cli(tmp_path, capsys, "new", C, "--id", "c1").code == 0
    listed = _cli(tmp_path, capsys, "ls", C).out.splitlines()
    assert listed[0].split() == ["MACHINE", "ID", "STATUS", "STATE", "UPDATED"]
    assert listed[1].split()[:4] == ["counter", "c1", "created", "idle"]


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`fsm --version` prints the distribution's version (it was an argparse error)."""
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"fsm {version('fsm')}\n"


def test_machines_lists_the_good_machines_and_the_broken_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One broken `[machines]` entry is a row saying why, exit 1; the bundled machines and the
    workspace's good ones are still listed."""
    (tmp_path / "fsm.toml").write_text(
        f'[machines]\nbroken = "nowhere"\ncounter = "{COUNTER.parent}"\n'
    )
    result = _cli(tmp_path, capsys, "machines")
    assert result.code == 1
    names = {line.split()[0]: line for line in result.out.splitlines()}
    assert {"ccw-loop", "issue-manager", "skill-tuning", "counter", "broken"} <= set(names)
    assert "CANNOT LOAD" in names["broken"] and "machine.yaml is not there" in names["broken"]
    assert result.err.strip() == "fsm: error: 1 machine(s) cannot be loaded: broken"
    rows = {
        row["name"]: row for row in json.loads(_cli(tmp_path, capsys, "machines", "--json").out)
    }
    assert "is not there" in rows["broken"]["error"] and "error" not in rows["counter"]


def test_an_unknown_machine_says_where_workspace_machines_come_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workspace machine named from another folder: the error names -C and [machines]."""
    result = _cli(tmp_path, capsys, "new", "countr")
    assert result.code == 2
    assert "unknown machine 'countr'" in result.err
    assert "fsm.toml [machines]" in result.err and "-C WORKSPACE" in result.err


def test_a_set_value_that_is_not_json_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--set errors='{a:true}'` for a list field names JSON as the problem, with an example and
    the parser's complaint (it said only 'Input should be a valid list'); nothing is created."""
    result = _cli(tmp_path, capsys, "new", C, "--id", "c1", "--set", "errors={a:true}")
    assert result.code == 2
    assert result.err.startswith(
        "fsm: error: invalid value 'errors': a list is written as JSON (e.g. --set "
        "errors='[\"a\", \"b\"]'), and '{a:true}' is not JSON: Expecting property name"
    )
    assert not (tmp_path / ".counters" / "c1.json").exists()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("from .modle import thing", "ModuleNotFoundError: No module named '.modle'"),
        ("from . import modle", "ImportError: cannot import name 'modle' from '.'"),
        ("x = 1 / 0", "ZeroDivisionError: division by zero"),
    ],
    ids=["relative-module", "relative-name", "raises"],
)
def test_an_error_in_a_machines_module_names_it_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, said: str
) -> None:
    """A typo or a raise in a machine's own module is named as the author wrote it, with the
    file and line (not fsm's internal package name `_fsm_machine_<hash>`), and the path once."""
    import shutil

    folder = tmp_path / "mine"
    shutil.copytree(COUNTER.parent, folder)
    source = (folder / "functions.py").read_text()
    (folder / "functions.py").write_text(source + f"\n{line}\n")
    number = len(source.splitlines()) + 2
    machine = str(folder / "machine.yaml")
    result = _cli(tmp_path, capsys, "new", machine)
    assert result.code == 2
    assert result.err == (
        f"fsm: error: {machine}: module: cannot import 'functions.py': {said} "
        f"(functions.py line {number})\n"
    )
    assert "_fsm_machine_" not in _cli(tmp_path, capsys, "check", machine).out


def test_init_writes_a_commented_fsm_toml_whose_every_setting_is_valid_uncommented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsm init` writes fsm.toml with every setting commented out; uncommenting each table and
    each setting that has a default gives a configuration fsm accepts; it never overwrites."""
    import re

    from fsm.model.config import load_config

    result = _cli(tmp_path, capsys, "init")
    assert result.code == 0, result.err
    text = (tmp_path / "fsm.toml").read_text()
    assert load_config(tmp_path).machines == {}  # all commented out: nothing changes
    assert "# [machine.ccw-loop]" in text and "# [store]" in text and "# [machines]" in text
    uncommented = []
    inside = False  # in a [machine.NAME] table
    for line in text.splitlines():
        header = re.fullmatch(r"# (\[[a-z.-]+\])", line)
        setting = re.fullmatch(r"# ([a-z_.]+ = .+)", line)
        if header:
            inside = header.group(1).startswith("[machine.")
            if inside:
                uncommented.append(header.group(1))
        elif inside and setting and "=    #" not in line:
            uncommented.append(setting.group(1))
    (tmp_path / "fsm.toml").write_text("\n".join(uncommented) + "\n")
    config = load_config(tmp_path)
    assert {"ccw-loop", "issue-manager", "skill-tuning"} <= set(config.machines)
    for name in ("ccw-loop", "issue-manager", "skill-tuning"):
        assert _cli(tmp_path, capsys, "options", name).code == 0
    again = _cli(tmp_path, capsys, "init")
    assert again.code == 2 and "exists: fsm init never overwrites it" in again.err


def test_new_in_the_home_folder_asks_for_a_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fsm new` in the home folder (no fsm.toml, no .workflow) is refused naming -C, fsm init
    and --here; nothing is written there. In a project, or with --here, it creates."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    refused = _cli(home, capsys, "new", C, "--id", "c1")
    assert refused.code == 2
    assert refused.err.strip() == (
        f"fsm: error: {home.resolve()} is your home folder, not a project (no fsm.toml or "
        ".workflow): cd into the project, give -C PROJECT, or run 'fsm init' here first "
        "('fsm new --here' creates it anyway)"
    )
    assert list(home.iterdir()) == []
    assert _cli(home, capsys, "new", C, "--id", "c1", "--here").code == 0
    project = home / "project"
    project.mkdir()
    assert _cli(project, capsys, "new", C, "--id", "c2").code == 0  # below home: a project
    assert _cli(tmp_path, capsys, "new", C, "--id", "c3").code == 2  # above home: refused


def _completions(workspace: Path, line: str, out: Path) -> list[str]:
    """What the shell would offer after ``line`` (argcomplete's protocol, as bash runs it)."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent.parent),
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    done = subprocess.run(
        [sys.executable, "-m", "fsm"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in out.read_text().splitlines() if word.strip()]


def test_completion_offers_commands_machines_and_instance_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tab after `fsm sta`, `fsm status ` and `fsm status counter ` offers the commands, the
    machines (the workspace's own included) and that machine's instance ids."""
    (tmp_path / "fsm.toml").write_text(f'[machines]\ncounter = "{COUNTER.parent}"\n')
    assert _cli(tmp_path, capsys, "new", "counter", "--id", "c-one").code == 0
    assert _cli(tmp_path, capsys, "new", "counter", "--id", "c-two").code == 0
    out = tmp_path / "offered"
    assert _completions(tmp_path, "fsm sta", out) == ["start", "status"]
    machines = _completions(tmp_path, "fsm status ", out)
    assert {"ccw-loop", "counter", "issue-manager", "skill-tuning"} <= set(machines)
    assert [w for w in _completions(tmp_path, "fsm status counter ", out) if w[0] != "-"] == [
        "c-one",
        "c-two",
    ]
    assert _completions(tmp_path, "fsm status nosuch ", out) == [
        w for w in _completions(tmp_path, "fsm status nosuch ", out) if w.startswith("-")
    ]  # an unknown machine: no ids, and no error


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_prints_shell_code_that_registers_fsm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shell: str
) -> None:
    """`fsm completion bash|zsh` prints the code to eval; bash accepts it."""
    import subprocess

    result = _cli(tmp_path, capsys, "completion", shell)
    assert result.code == 0 and "fsm" in result.out
    if shell == "bash":
        checked = subprocess.run(
            ["bash", "-c", result.out + "\ncomplete -p fsm"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0 and "fsm" in checked.stdout, checked.stderr


@pytest.mark.parametrize("store", ["postgrs://host/db", "postgresql://fsm@/db?host=/nowhere"])
def test_a_store_that_cannot_be_opened_is_the_same_error_for_ls_as_for_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    """A mistyped store scheme, or a shared store the workspace names no space for, is one
    error line and exit 2 for `fsm ls` as for `fsm new` (ls printed it in every row, exit 0)."""
    monkeypatch.setenv("FSM_STORE", store)
    listed = _cli(tmp_path, capsys, "ls")
    created = _cli(tmp_path, capsys, "new", C)
    assert (listed.code, listed.out) == (2, "")
    assert listed.err == created.err and created.code == 2
    assert listed.err.startswith("fsm: error: ") and len(listed.err.splitlines()) == 1
