"""Hostile machine files: refused quickly as bad input, never a hang, crash or segfault."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest

from fsm.model.yaml_loader import MAX_ALIAS_NODES, MAX_DEPTH, YamlProblem, load_yaml
from tests.conftest import COUNTER, Cli

LOL = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
MERGE_BOMB = (
    "k0: &k0 {"
    + ", ".join(f"f{n}: {n}" for n in range(20))
    + "}\n"
    + "".join(
        f"k{n}: &k{n} {{<<: [{', '.join([f'*k{n - 1}'] * 9)}], own{n}: 1}}\n" for n in range(1, 9)
    )
)
DEEP_ANCHOR = "a: &a " + "[" * 60 + "1" + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n"
DEEP_BLOCK = "".join(" " * level + f"k{level}:\n" for level in range(MAX_DEPTH + 1)) + "  " * 60

# (text, line, message): read at once, each is one problem and no data.
REFUSED = [
    pytest.param(LOL, 5, "aliases expand to more than 10000 nodes (at '*d')", id="anchor-bomb"),
    pytest.param(MERGE_BOMB, 4, "aliases expand to more than 10000 nodes", id="merge-bomb"),
    pytest.param("a: &a [1, *a]\n", 1, "alias '*a' is inside the node it names", id="recursive"),
    pytest.param("a: &a {b: 1, <<: *a}\n", 1, "(a recursive alias)", id="recursive-merge"),
    pytest.param("a: &a\n  - b: &b\n    - *a\n", 3, "(a recursive alias)", id="recursive-deep"),
    pytest.param("x: " + "[" * 30_000 + "]" * 30_000, 1, "nested deeper than 100", id="30k-["),
    pytest.param("x: " + "{a: " * 30_000 + "1" + "}" * 30_000, 1, "nested deeper", id="30k-{"),
    pytest.param(DEEP_BLOCK, 101, "nested deeper than 100 levels", id="101-block-levels"),
    pytest.param(DEEP_ANCHOR, 2, "nested deeper than 100 levels (through alias", id="deep-alias"),
    pytest.param(
        "a: !!python/name:os.system x\n", 1, "tag '!!python/name:os.system'", id="py-name"
    ),
    pytest.param(
        "a: !!python/object/apply:os.system [echo hi]\n",
        1,
        "tag '!!python/object/apply:os.system' is not allowed: a machine file holds plain data",
        id="py-object-apply",
    ),
    pytest.param("a: !!python/object:x.Y {b: 1}\n", 1, "'!!python/object:x.Y'", id="py-object"),
    pytest.param("a: !shell echo\n", 1, "tag '!shell' is not allowed", id="local-tag"),
    pytest.param("a: !<tag:x.org,2020:t> 1\n", 1, "tag 'tag:x.org,2020:t'", id="uri-tag"),
    pytest.param("a: !!binary aGk=\n", 1, "tag '!!binary' is not allowed", id="binary"),
    pytest.param("a: !!set {x, y}\n", 1, "tag '!!set' is not allowed", id="set"),
    pytest.param("a: !!omap [b: 1]\n", 1, "tag '!!omap' is not allowed", id="omap"),
    pytest.param("a: !!seq {b: 1}\n", 1, "tag '!!seq' is not allowed", id="seq-on-mapping"),
    pytest.param("a: !!map x\n", 1, "tag '!!map' is not allowed", id="map-on-scalar"),
    pytest.param(
        "s: &s " + "x" * 300_000 + "\nt: [" + ", ".join(["*s"] * 4) + "]\n",
        2,
        "aliases expand to more than 1048576 bytes of text (at '*s')",
        id="long-string-aliased",
    ),
    pytest.param("a: [1, 2\n", 2, "malformed YAML", id="malformed"),
    pytest.param("a: 1\n---\nb: 2\n", 2, "malformed YAML: expected a single document", id="docs"),
]


class _Expired(Exception):
    # Not TimeoutError: that is an OSError, which fsm catches and reports as a store error.
    """Raised by the alarm when reading does not end."""


@contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging the suite when reading does not end."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _Expired(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("text", "line", "message"), REFUSED)
def test_hostile_yaml_is_one_problem_found_at_once(text: str, line: int, message: str) -> None:
    """Each hostile text gives no data and one problem on its line, within a second or so."""
    started = time.perf_counter()
    with _deadline(20):
        loaded, problems = load_yaml(text)
    assert time.perf_counter() - started < 2
    assert loaded is None
    assert len(problems) == 1
    assert problems[0].line == line
    assert message in problems[0].message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            "a: !!int abc\n", YamlProblem(1, "cannot read 'abc' as int: invalid"), id="int"
        ),
        pytest.param("a: !!bool maybe\n", YamlProblem(1, "cannot read 'maybe' as bool: invalid")),
        pytest.param("a: !!float x\n", YamlProblem(1, "cannot read 'x' as float: invalid")),
        pytest.param("a: !!timestamp x\n", YamlProblem(1, "cannot read 'x' as timestamp: invalid")),
        pytest.param(
            "a: " + "7" * 5000 + "\n",
            YamlProblem(1, f"cannot read '{'7' * 37}...' as int: too many digits"),
            id="5000-digits",
        ),
        pytest.param(
            "a: {<<: 1}\n",
            YamlProblem(
                1,
                "malformed merge: expected a mapping or "
                "list of mappings for merging, but found scalar",
            ),
            id="merge-scalar",
        ),
    ],
)
def test_values_a_tag_cannot_read_are_problems_on_their_line(
    text: str, problem: YamlProblem
) -> None:
    """A value its tag cannot read is a problem with its line, not an exception."""
    _, problems = load_yaml(text)
    assert problems == [problem]


@pytest.mark.parametrize(
    ("text", "data"),
    [
        pytest.param("dest: =\n", {"dest": "="}, id="bare-equals-is-text"),
        pytest.param("x: " + "[" * 99 + "]" * 99, None, id="100-levels"),
        pytest.param("a: !!str 1\nb: ! 2\nc: !!int '3'\n", {"a": "1", "b": 2, "c": 3}, id="tags"),
        pytest.param(
            # the top mapping, 49 levels, then the alias's 50: exactly 100
            "a: &a " + "[" * 50 + "1" + "]" * 50 + "\nb: " + "[" * 49 + "*a" + "]" * 49 + "\n",
            None,
            id="100-levels-through-an-alias",
        ),
        pytest.param(
            "base: &b [" + ", ".join(["x"] * 99) + "]\nuses: [" + ", ".join(["*b"] * 100) + "]\n",
            None,
            id="aliases-within-budget",
        ),
    ],
)
def test_ordinary_yaml_within_the_limits_reads(text: str, data: object) -> None:
    """Anchors, aliases and tags of plain data within the limits read as before."""
    loaded, problems = load_yaml(text)
    assert problems == []
    assert loaded is not None
    if data is not None:
        assert loaded.data == data


def test_alias_budget_is_counted_exactly() -> None:
    """Aliases may bring in MAX_ALIAS_NODES nodes, not one more."""
    list_nodes = 1 + 99  # the list itself and its items
    uses = MAX_ALIAS_NODES // list_nodes
    text = "base: &b [" + ", ".join(["x"] * 99) + "]\nuses: [" + ", ".join(["*b"] * uses) + "]\n"
    assert load_yaml(text)[1] == []
    loaded, problems = load_yaml(text.replace("]\n", ", x]\n", 1))
    assert loaded is None and "aliases expand to more than" in problems[0].message


def test_aliased_mapping_with_merge_is_not_a_duplicate_the_second_time() -> None:
    """A mapping with a merge key, used again through an alias, reads the same both times."""
    text = "base: &b {k: 1, m: 2}\nitem: &i {<<: *b, k: 3}\nother: *i\n"
    loaded, problems = load_yaml(text)
    assert problems == []
    assert loaded is not None
    assert loaded.data["other"] == loaded.data["item"] == {"k": 3, "m": 2}


def _machine_with(tmp_path: Path, name: str, hostile: str) -> tuple[Path, int]:
    """The counter machine with ``hostile`` appended; return its path and the first line."""
    folder = tmp_path / name
    folder.mkdir()
    text = COUNTER.read_text()
    (folder / "functions.py").write_text((COUNTER.parent / "functions.py").read_text())
    path = folder / "machine.yaml"
    path.write_text(text + hostile)
    return path, text.count("\n")


@pytest.mark.parametrize(("text", "line", "message"), REFUSED)
@pytest.mark.parametrize("command", ["check", "new", "status"])
def test_hostile_machine_file_is_bad_input_for_every_command(
    cli: Cli, tmp_path: Path, text: str, line: int, message: str, command: str
) -> None:
    """`fsm check`, `fsm new` and `fsm status` on a machine file with hostile YAML exit 2
    with one line naming the file and the line."""
    if text.startswith("a: 1\n---"):
        hostile = "\n---\nb: 2\n"
        line = 1
    else:
        hostile = "\n" + text
    path, offset = _machine_with(tmp_path, "hostile", hostile)
    argv = {"check": ["check", str(path)], "new": ["new", str(path)]}.get(
        command, ["status", str(path), "c1"]
    )
    with _deadline(20):
        result = cli(*argv)
    assert result.code == 2, (result.out, result.err)
    shown = result.out + result.err
    assert message in shown
    assert f"machine.yaml:{offset + line + 1}" in shown
    assert len(shown.strip().splitlines()) == 1
    assert "internal error" not in shown


@pytest.mark.parametrize(("name", "reader"), [("check", "check"), ("new", "new")])
def test_machine_file_larger_than_the_limit_is_refused_unread(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, reader: str
) -> None:
    """A machine file over the size limit is bad input (exit 2) before it is parsed."""
    monkeypatch.setattr("fsm.model.yaml_loader.MAX_BYTES", 1000)
    path, _ = _machine_with(tmp_path, name, "\n# " + "x" * 2000 + "\n")
    result = cli(reader, str(path))
    assert result.code == 2
    assert "larger than the limit of 1000 bytes" in result.out + result.err


def test_hostile_files_in_a_separate_process_end_with_exit_2(tmp_path: Path) -> None:
    """One `fsm check` process reads every hostile file and exits 2 within a minute: no hang,
    no segfault (libyaml's composer overflows its stack on 30,000 brackets), no exit 1."""
    paths = []
    for number, param in enumerate(REFUSED):
        path = tmp_path / f"m{number}.yaml"
        path.write_text(str(param.values[0]))
        paths.append(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "fsm", "check", *paths],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "internal error" not in done.stdout + done.stderr
    errors = done.stderr.splitlines()
    for path in paths:  # an unreadable file is an error of the command: on stderr
        assert any(line.startswith(f"fsm: error: {path}:") for line in errors), path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("x: " + "[" * 101 + "]" * 101, (1, "nested deeper than 100 levels"), id="101"),
        pytest.param("x: " + "[" * 100 + "]" * 100, None, id="100"),
        pytest.param("a: 1\nx: " + "{a: " * 150, (2, "nested deeper than 100 levels"), id="line"),
        pytest.param("x: '" + "[" * 200 + "'\n", None, id="single-quoted"),
        pytest.param('x: "\\"' + "[" * 200 + '"\n', None, id="double-quoted-escape"),
        pytest.param("x: 1 # " + "[" * 200 + "\n", None, id="comment"),
        pytest.param("x: it's " + "[" * 101, (1, "nested deeper than 100 levels"), id="apostrophe"),
    ],
)
def test_flow_nesting_is_judged_by_fsm_not_by_the_parser(
    text: str, expected: tuple[int, str] | None
) -> None:
    """The bracket scan that names a too-deep file in fsm's words (whatever the parser's own
    limit says) counts brackets outside quoted text and comments, and gives the line."""
    from fsm.model._yaml_limits import flow_nesting_problem

    assert flow_nesting_problem(text) == expected
