"""The README works as written: its command blocks run, in order, on a machine without any agent
CLI (the stand-in codex the README ships in examples/stand-in-agents/ is put on PATH by the
README's own block), and print what the README shows; its Python block runs and prints what the
README shows; its fsm.toml is a valid configuration; the demo it names succeeds.

Each fenced block is preceded by a ``<!-- readme-test: ... -->`` marker saying how it is
checked, so that a new block cannot be added without deciding that. A fence without a language
right after a checked block is what that block prints (stdout; stderr for a block expected to
fail): ``...`` alone on a line stands for any lines, within a line for any text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fsm.model.config import load_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<how>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S
)
_COMMAND = re.compile(r"^command = (\[.*\])$", re.M)


def _blocks() -> list[tuple[str, str, str, str | None]]:
    """(marker, language, body, expected output or None) of every checked or unmarked fenced
    block of the README; an output fence is given with the block it follows, not on its own."""
    text = README.read_text()
    found = list(_BLOCK.finditer(text))
    blocks: list[tuple[str, str, str, str | None]] = []
    skip = False
    for number, match in enumerate(found):
        if skip:
            skip = False
            continue
        following = found[number + 1] if number + 1 < len(found) else None
        expected = None
        if (
            match["how"]
            and following is not None
            and not following["lang"]
            and not following["how"]
            and not text[match.end() : following.start()].strip()
        ):
            expected, skip = following["body"], True
        blocks.append((match["how"] or "", match["lang"], match["body"], expected))
    return blocks


def _matches(expected: str, actual: str) -> bool:
    """True when ``actual`` is what ``expected`` shows (``...`` as described above)."""
    parts = []
    for line in expected.splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line).replace(re.escape("..."), r"[^\n]*?") + r"\n")
    text = "".join(line + "\n" for line in actual.splitlines())
    return re.fullmatch("".join(parts), text) is not None


def _agent_command() -> list[str]:
    """The agent command of the README's "Plug in an agent" block, the one place that says how
    codex is run (the fsm.toml example must say the same)."""
    [plug_in] = [
        body for how, lang, body, _ in _blocks() if "[agent.codex]" in body and lang == "bash"
    ]
    found = _COMMAND.search(plug_in)
    assert found is not None
    command: list[str] = tomllib.loads(f"command = {found[1]}")["command"]
    return command


def test_every_block_says_how_it_is_checked() -> None:
    """A code block is either checked by a marker or is sample output (no language)."""
    unmarked = [body.splitlines()[0] for how, lang, body, _ in _blocks() if lang and not how]
    assert unmarked == []


def test_every_output_fence_follows_a_block_it_belongs_to() -> None:
    """Sample output is shown right after the block that prints it, which is checked."""
    loose = [body.splitlines()[0] for how, lang, body, _ in _blocks() if not lang and not how]
    assert loose == []


def test_the_fsm_toml_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The README's fsm.toml loads, with the agent command the "Plug in an agent" block uses."""
    [toml] = [body for how, _, body, _ in _blocks() if how == "fsm.toml"]
    (tmp_path / "fsm.toml").write_text(toml)
    config = load_config(tmp_path)
    assert list(config.agents["codex"].command) == _agent_command()
    assert config.agents["codex"].output == "codex-json"
    assert config.machines["ccw-loop"]["test_command"] == "python -m pytest -q"


def test_the_stand_in_codex_takes_the_readme_command_line(tmp_path: Path) -> None:
    """The shipped stand-in accepts the README's codex command line, options and all, with the
    prompt last: it adds the function a failing test cannot import, and changes nothing for a
    prompt it has no fix for."""
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    argv = [str(ROOT / "examples" / "stand-in-agents" / "codex"), *_agent_command()[1:]]
    prompt = "Error: ImportError: cannot import name 'div' from 'calc' (calc.py)"
    fixed = subprocess.run(
        [a.replace("{prompt}", prompt) for a in argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert fixed.returncode == 0, fixed.stderr
    namespace: dict[str, object] = {}
    exec((tmp_path / "calc.py").read_text(), namespace)
    assert namespace["div"](6, 3) == 2  # type: ignore[operator]
    before = (tmp_path / "calc.py").read_text()
    other = subprocess.run(
        [a.replace("{prompt}", "Error: AssertionError: 3 != 4") for a in argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert other.returncode == 0
    assert (tmp_path / "calc.py").read_text() == before


def test_the_try_it_blocks_and_the_python_api_run_as_written(tmp_path: Path) -> None:
    """Every command block runs in order in one shell, as written, and prints what the README
    shows after it (the result lines of the runs, the status, the refusal without an agent);
    then the Python block runs in the same project and prints what the README shows."""
    checkout = tmp_path / "checkout"  # where `source .venv/bin/activate` finds this interpreter
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "activate").write_text(
        f'export PATH="{Path(sys.executable).parent}:$PATH"\n'
    )
    (checkout / "examples").symlink_to(ROOT / "examples")  # the stand-in agents
    project = tmp_path / "project-folder.txt"
    script = ["set -eu"]
    checked: list[tuple[int, str, str, Path | None]] = []
    for number, (how, lang, body, expected) in enumerate(_blocks()):
        if lang != "bash" or not how.startswith(("run", "exit")):
            continue
        script.append(f"echo '@@block {number}@@'")
        errors = None
        if how.startswith("exit"):
            code = how.split()[1]
            errors = tmp_path / f"stderr-{number}.txt"
            script += [
                f"set +e; ( {body} ) 2> {errors}; rc=$?; set -e",
                f'[ "$rc" = {code} ] || {{ echo "block {number} exited $rc"; exit 1; }}',
            ]
        else:
            script.append(body)
        if expected is not None:
            checked.append((number, how, expected, errors))
    script.append(f"echo '@@end@@'; pwd > {project}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSM_", "PYTEST"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        check=False,
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = dict(re.findall(r"@@block (\d+)@@\n(.*?)(?=@@)", done.stdout, re.S))
    assert len(checked) >= 4
    for number, how, expected, errors in checked:
        actual = errors.read_text() if errors is not None else printed[str(number)]
        assert _matches(expected, actual), f"block {number} ({how}) printed:\n{actual}"

    [(python, expected)] = [(body, out) for how, _, body, out in _blocks() if how == "python"]
    ran = subprocess.run(
        [sys.executable, "-c", python],
        check=False,
        cwd=project.read_text().strip(),
        env={**env, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert expected is not None and _matches(expected, ran.stdout), ran.stdout
    assert ran.stderr == ""


@pytest.mark.slow
def test_the_demo_succeeds(tmp_path: Path) -> None:
    """The README's first command, the demo, drives every scenario as expected."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "demo.py"),
            *("--out", str(tmp_path / "out"), "--diagrams", str(tmp_path / "diagrams")),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scenarios ended as expected" in done.stdout
