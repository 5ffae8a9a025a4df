"""Hostile inputs, ids and fsm.toml files: one clear line and exit 2, nothing created."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import COUNTER, Cli, CliResult

C = str(COUNTER)

DEEP = "[" * 100_000 + "]" * 100_000


def _assert_bad_input(result: CliResult, message: str) -> None:
    assert result.code == 2, result.err
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "internal error" not in result.err and "Traceback" not in result.err


def _instances(workspace: Path) -> list[str]:
    folder = workspace / ".counters"
    return sorted(p.name for p in folder.glob("*.json")) if folder.exists() else []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(DEEP, "in.json is not valid JSON: nested deeper than 100", id="100k-deep"),
        pytest.param(
            '{"limit": ' + "1" * 5000 + "}", "a number too long to read", id="5000-digits"
        ),
        pytest.param('{"limit": NaN}', "NaN is not a JSON number", id="nan"),
        pytest.param(b'{"title": "\xff"}', "not UTF-8 text", id="not-utf8"),
        pytest.param("[1]", "in.json must hold a JSON object", id="not-an-object"),
    ],
)
def test_hostile_input_file_is_bad_input(
    cli: Cli, tmp_path: Path, content: str | bytes, message: str
) -> None:
    """`fsm new --input` with a hostile file exits 2 with one line; no instance is created."""
    path = tmp_path / "in.json"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    _assert_bad_input(cli("new", C, "--input", str(path)), message)
    assert _instances(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_input_file_is_read_only_to_the_limit(cli: Cli, tmp_path: Path) -> None:
    """`--input /dev/zero` ends at once (not a regular file), never reads forever."""
    _assert_bad_input(cli("new", C, "--input", "/dev/zero"), "is a character device")


def test_endless_standard_input_is_read_only_to_the_limit(tmp_path: Path) -> None:
    """`--input -` reads standard input, and an endless one ends with "larger than the limit"."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    argv = [sys.executable, "-m", "fsm", "-C", str(tmp_path), "new", C, "--input", "-"]
    with open("/dev/zero", "rb") as zeros:
        done = subprocess.run(
            argv, stdin=zeros, capture_output=True, text=True, env=env, timeout=60, check=False
        )
    assert done.returncode == 2, done.stderr
    assert "larger than the limit of" in done.stderr
    piped = subprocess.run(
        [*argv, "--id", "piped"],
        input='{"limit": 2}',
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (piped.returncode, piped.stdout.strip()) == (0, "piped"), piped.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["new", C, "--set", "limit=" + DEEP],
            "invalid value 'limit': nested deeper than 100 levels",
            id="set-100k-deep",
        ),
        pytest.param(
            ["new", C, "--set", "a.b=" + "9" * 5000],
            "invalid value 'a.b': a number too long to read",
            id="set-5000-digits",
        ),
        pytest.param(
            ["-o", "step_size=" + DEEP, "new", C],
            "invalid option 'step_size': nested deeper than 100 levels",
            id="option-100k-deep",
        ),
        pytest.param(
            ["-o", "step_size=" + "9" * 5000, "new", C],
            "invalid option 'step_size': a number too long",
            id="option-5000-digits",
        ),
    ],
)
def test_hostile_set_and_option_values_are_bad_input(
    cli: Cli, tmp_path: Path, argv: list[str], message: str
) -> None:
    """--set and -o values nested too deep or with overlong numbers exit 2 with the key."""
    _assert_bad_input(cli(*argv), message)
    assert _instances(tmp_path) == []


@pytest.mark.parametrize("text", ["NaN", "-Infinity", "[draft", "{x"])
def test_set_values_that_are_not_json_stay_text(cli: Cli, tmp_path: Path, text: str) -> None:
    """A --set value JSON does not read (NaN included) is kept as the text typed."""
    assert cli("new", C, "--id", "c1", "--set", f"title={text}").code == 0
    document = json.loads((tmp_path / ".counters" / "c1.json").read_text())
    assert document["title"] == text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["new", C, "--id", ""], "invalid instance id: it is empty", id="new-empty"),
        pytest.param(["new", C, "--id=-rf"], "it starts with '-'", id="new-dash"),
        pytest.param(["new", C, "--id=--help"], "it starts with '-'", id="new-double-dash"),
        pytest.param(["status", C, ""], "invalid instance id: it is empty", id="status-empty"),
        pytest.param(["status", C, "--", "-x"], "it starts with '-'", id="status-dash"),
        pytest.param(["run", C, "--", "-x"], "it starts with '-'", id="run-dash"),
    ],
)
def test_empty_and_dash_ids_are_refused(
    cli: Cli, tmp_path: Path, argv: list[str], message: str
) -> None:
    """An empty id is an error (not a request for a generated one), and an id starting with
    '-' is refused (other tools would read it as an option); nothing is created."""
    _assert_bad_input(cli(*argv), message)
    assert _instances(tmp_path) == []


def test_dash_files_in_the_storage_folder_are_not_listed(cli: Cli, tmp_path: Path) -> None:
    """A document named ``-rf.json`` beside real ones is not an instance."""
    assert cli("new", C, "--id", "c1").code == 0
    folder = tmp_path / ".counters"
    (folder / "-rf.json").write_text((folder / "c1.json").read_text())
    assert [row["id"] for row in cli("ls", C, "--json").json()] == ["c1"]


TOML = [
    pytest.param(
        "[machine.counter]\nfolder = .x\n",
        "fsm.toml:2: malformed TOML: Invalid value (column 10)",
        id="syntax-line-2",
    ),
    pytest.param(
        'a = "unterminated',
        "fsm.toml: malformed TOML: Unterminated string (at the end of the file)",
        id="at-end",
    ),
    pytest.param("a = 1\na = 2\n", "fsm.toml:2: malformed TOML: Cannot overwrite", id="dup"),
    pytest.param(
        "a = " + "{b = " * 5000 + "1" + "}" * 5000,
        "fsm.toml: malformed TOML: values nested too deeply",
        id="deep-inline-tables",
    ),
    pytest.param("a = " + "[" * 100_000 + "]" * 100_000, "malformed TOML", id="deep-arr"),
    pytest.param("a = " + "1" * 5000, "malformed TOML: a number too long to read", id="digits"),
    pytest.param(b"a = '\xff'", "fsm.toml: cannot read", id="not-utf8"),
]


@pytest.mark.parametrize(("content", "message"), TOML)
@pytest.mark.parametrize("command", [["ls"], ["new", C], ["status", C, "c1"]])
def test_malformed_fsm_toml_is_one_line_naming_file_and_line(
    cli: Cli, tmp_path: Path, content: str | bytes, message: str, command: list[str]
) -> None:
    """Every command reading a malformed fsm.toml exits 2 with one line naming the file (and
    the line where tomllib knows it)."""
    raw = content.encode() if isinstance(content, str) else content
    (tmp_path / "fsm.toml").write_bytes(raw)
    _assert_bad_input(cli(*command), message)


def test_fsm_toml_larger_than_the_limit_is_refused(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsm.toml over the size limit is refused before it is parsed."""
    monkeypatch.setattr("fsm.model.config.MAX_TOML_BYTES", 100)
    (tmp_path / "fsm.toml").write_text("# " + "x" * 200 + "\n")
    _assert_bad_input(cli("ls"), "fsm.toml: larger than the limit of 100 bytes")
