"""docs/writing-a-machine.md works as written.

Its file listings are the files of examples/review_queue; the example passes ``fsm check`` and is
drawn; and its command blocks run in order in a copy of the example project: checked, drawn and
tried by path, tested with pytest and mypy, then installed with pip into a fresh virtual
environment (offline: it sees this environment's fsm and build tools) where ``fsm machines``
lists it and ``fsm run`` drives it by name. Each fenced block is preceded by a
``<!-- tutorial: ... -->`` marker saying how it is checked.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.conftest import CliResult

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "writing-a-machine.md"
EXAMPLE = ROOT / "examples" / "review_queue"
_BLOCK = re.compile(
    r"(?:<!-- tutorial: (?P<how>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S
)


def _blocks() -> list[tuple[str, str, str]]:
    """(marker, language, body) of every fenced block of the tutorial."""
    return [(m["how"] or "", m["lang"], m["body"]) for m in _BLOCK.finditer(TUTORIAL.read_text())]


def test_every_block_says_how_it_is_checked() -> None:
    """A code block is a file listing, an excerpt or a command block, or has no language (a
    picture)."""
    unmarked = [body.splitlines()[0] for how, lang, body in _blocks() if lang and not how]
    assert unmarked == []


def test_the_excerpts_are_in_their_files() -> None:
    """A block marked ``excerpt PATH`` (a decorator the example does not use, shown from another
    example) is found in that file as written."""
    excerpts = [(how, body) for how, _, body in _blocks() if how.startswith("excerpt ")]
    assert excerpts
    for how, body in excerpts:
        assert body in (ROOT / how.removeprefix("excerpt ")).read_text(encoding="utf-8"), how


def test_the_listings_are_the_example_files() -> None:
    """Every file listing is the example's file, byte for byte, and every file of the example
    but the package marker is listed."""
    listed = {
        how.removeprefix("file "): body for how, _, body in _blocks() if how.startswith("file")
    }
    for name, body in listed.items():
        assert body == (EXAMPLE / name).read_text(encoding="utf-8"), name
    files = {
        path.relative_to(EXAMPLE).as_posix()
        for path in EXAMPLE.rglob("*")
        if path.is_file() and path.suffix in {".py", ".yaml", ".toml"} and "build" not in path.parts
    }
    assert sorted(files - set(listed)) == ["review_queue/__init__.py"]


def test_the_example_passes_check_and_is_drawn(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """fsm check finds nothing wrong with the example; fsm diagram draws every state."""
    machine = str(EXAMPLE / "review_queue" / "machine.yaml")
    checked = cli("check", machine)
    assert (checked.code, checked.out.strip()) == (0, f"{machine}: ok")
    assert cli("diagram", machine, "-o", str(tmp_path / "d"), "-f", "dot,svg").code == 0
    dot = (tmp_path / "d" / "review-queue.dot").read_text()
    assert all(f'"{state}"' in dot for state in ("queued", "reviewing", "done", "stopped"))
    assert (tmp_path / "d" / "review-queue.svg").read_text().startswith("<?xml")


def _venv(folder: Path) -> Path:
    """A fresh virtual environment that sees this one's packages (fsm, pip, setuptools, pytest,
    mypy) without installing them, and has an ``fsm`` command; its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    [packages] = folder.glob("lib/python*/site-packages")
    ours = site.getsitepackages()[0]
    (packages / "fsm_test_env.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    command = folder / "bin" / "fsm"
    command.write_text(
        f"#!{folder / 'bin' / 'python'}\nfrom fsm.cli import main_entry\n\nmain_entry()\n"
    )
    command.chmod(0o755)
    return folder / "bin"


@pytest.mark.slow
def test_the_command_blocks_run_as_written(tmp_path: Path) -> None:
    """In a copy of the example project, the tutorial's commands run in order: the machine is
    checked, drawn and run by path, then by the name a workspace's [machines] gives it (and
    listed by fsm ls), its tests and mypy pass, and after pip install it is listed by fsm
    machines and run by name, completing with every file approved."""
    project = tmp_path / "review-queue"
    shutil.copytree(
        EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    )
    bin_dir = _venv(tmp_path / "venv")
    script = ["set -eu"]
    for number, (how, lang, body) in enumerate(_blocks()):
        if how == "run":
            assert lang == "bash"
            script += [f"echo '--- block {number}'", body]
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        # Offline: no index, and the build tools of this environment instead of downloaded ones.
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
    }
    env.pop("MYPYPATH", None)  # mypy finds fsm as installed (scripts/setup.sh makes it followable)
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,  # the blocks run two test sessions and a search since coverage came
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "review_queue/machine.yaml: ok" in out
    assert (project / "diagrams" / "review-queue.svg").is_file()
    ran = re.findall(r"review-\S+: completed in state 'done' after 2 steps: (.*)", out)
    assert ran == ["1 of 1 files approved"] * 3
    assert re.search(r"^review-queue +review-\S+ +done", out, re.M)
    assert re.search(r"^\d+ passed", out, re.M)
    assert "Success: no issues found" in out
    assert re.search(r"^review-queue .*\[entry point review_queue\]$", out, re.M)


def _schema_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key a machine file may hold, as the reference names it (``storage.touch``,
    ``states.<name>.final``, ``transitions[].auto``)."""
    keys: list[str] = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"  # the key as written (``from``)
        keys.append(key)
        annotation = info.annotation
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
            keys += _schema_keys(args[1], f"{key}.<name>.")
        elif origin is list and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            keys += _schema_keys(args[0], f"{key}[].")
        else:
            nested = [
                a for a in (annotation, *args) if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            if nested:
                keys += _schema_keys(nested[0], f"{key}.")
    return keys


def test_every_key_of_the_definition_schema_is_documented() -> None:
    """The reference of docs/writing-a-machine.md names every key of the machine-file schema
    (fsm.model.definition.MachineSpec and the models it nests), so a new key cannot go
    undocumented."""
    from fsm.model.definition import MachineSpec

    text = TUTORIAL.read_text()
    reference = text[text.index("### Every key of machine.yaml") :]
    keys = _schema_keys(MachineSpec)
    assert "transitions[].unbounded" in keys and "storage.read_retries" in keys
    missing = [key for key in keys if f"| `{key}` |" not in reference]
    assert missing == []


@pytest.mark.parametrize(
    "phrase",
    ["`auto: false`", "`inputs: ReviewInputs`", "`unbounded: <reason>`", "budget=True"],
)
def test_the_tutorial_explains_the_keys_it_relies_on(phrase: str) -> None:
    """The tutorial's own prose (before the reference, outside listings) explains `auto`,
    `inputs:` and `unbounded:` where its machine uses them."""
    text = TUTORIAL.read_text()
    prose = _BLOCK.sub("", text[: text.index("## Reference")])
    assert phrase in prose
