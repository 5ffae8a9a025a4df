"""The README works as written: its command blocks run, in order, on a machine without any agent
CLI (a stand-in codex is put on PATH only where the README says an agent is plugged in), its
Python block runs, its fsm.toml is a valid configuration, and the demo it names succeeds.

Each fenced block is preceded by a ``<!-- readme-test: ... -->`` marker saying how it is
checked, so that a new block cannot be added without deciding that.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fsm.config import load_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<how>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S
)

STAND_IN_CODEX = """\
import sys
from pathlib import Path

prompt = sys.argv[-1]
if "div" in prompt:
    calc = Path("calc.py")
    calc.write_text(calc.read_text() + "\\n\\ndef div(a, b):\\n    return a / b\\n")
print("edited calc.py")
"""


def _blocks() -> list[tuple[str, str, str]]:
    """(marker, language, body) of every fenced block of the README."""
    return [(m["how"] or "", m["lang"], m["body"]) for m in _BLOCK.finditer(README.read_text())]


def test_every_block_says_how_it_is_checked() -> None:
    """A code block is either checked by a marker or is sample output (no language)."""
    unmarked = [body.splitlines()[0] for how, lang, body in _blocks() if lang and not how]
    assert unmarked == []


def test_the_fsm_toml_example_is_a_valid_configuration(tmp_path: Path) -> None:
    """The README's fsm.toml loads, with the agent table it shows."""
    [toml] = [body for how, _, body in _blocks() if how == "fsm.toml"]
    (tmp_path / "fsm.toml").write_text(toml)
    config = load_config(tmp_path)
    codex = config.agents["codex"]
    assert codex.command == (
        "codex",
        "exec",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
        "--json",
        "{prompt}",
    )
    assert codex.output == "codex-json"
    assert config.machines["ccw-loop"]["test_command"] == "python -m pytest -q"


def test_the_try_it_blocks_and_the_python_api_run_as_written(tmp_path: Path) -> None:
    """Every command block runs in order in one shell: the bash-only loop completes, the one
    with the (stand-in) agent fixes the new test, the one without the agent is refused with
    exit 2 and one line naming codex; then the Python block runs in the same project."""
    checkout = tmp_path / "checkout"  # where `source .venv/bin/activate` finds this interpreter
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "activate").write_text(
        f'export PATH="{Path(sys.executable).parent}:$PATH"\n'
    )
    stand_in = tmp_path / "agents"
    stand_in.mkdir()
    codex = stand_in / "codex"
    codex.write_text(f"#!{sys.executable}\n{STAND_IN_CODEX}")
    codex.chmod(codex.stat().st_mode | stat.S_IXUSR)
    project = tmp_path / "project-folder.txt"
    errors = tmp_path / "refused.txt"
    script = ["set -eu"]
    for number, (how, lang, body) in enumerate(_blocks()):
        if lang != "bash" or not how.startswith(("run", "exit")):
            continue
        script.append(f"echo '--- block {number}: {how}'")
        if "stand-in codex" in how:
            script += [
                f'export PATH="{stand_in}:$PATH"',
                body,
                f'export PATH="${{PATH#{stand_in}:}}"',
            ]
        elif how.startswith("exit"):
            code = how.split()[1]
            script += [
                f"set +e; ( {body} ) 2> {errors}; rc=$?; set -e",
                f'[ "$rc" = {code} ] || {{ echo "block {number} exited $rc"; exit 1; }}',
            ]
        else:
            script.append(body)
    script.append(f"pwd > {project}")
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
    results = [line for line in done.stdout.splitlines() if ": completed in state" in line]
    assert len(results) == 2
    assert results[0].endswith("all 2 tasks done; validation passed: 2 tests passed")
    assert results[1].endswith("all 2 tasks done, 1 fix attempt; validation passed: 3 tests passed")
    [refusal] = errors.read_text().splitlines()
    assert refusal.startswith("fsm: error: instance 'loop-v2-") and "agent 'codex'" in refusal

    [python] = [body for how, lang, body in _blocks() if how == "python"]
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
    assert ran.stdout.splitlines()[0] == "paused"
    assert ran.stdout.splitlines()[1].startswith("completed 0 all 2 tasks done")
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
