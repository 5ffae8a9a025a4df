"""A quiet terminal: a long run off a terminal writes a few progress lines, not one per step, and
diagram commands print no warning about the system's font configuration."""

from __future__ import annotations

import io
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fsm.engine.engine import Engine
from fsm.view.progress import FIRST_STEPS, INTERVAL, RunProgress

ROOT = Path(__file__).resolve().parent.parent


class SteppedClock:
    """A clock that advances by ``tick`` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.now = 0.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def _progress_lines(instance: Any, tick: float) -> list[str]:
    stream = io.StringIO()
    progress = RunProgress(instance, stream, live=False, clock=SteppedClock(tick))
    Engine(instance).run(on_step=progress)
    progress.close()
    return [line.split(" [")[0] for line in stream.getvalue().splitlines()]


def test_a_quick_long_run_writes_the_first_steps_and_the_last(
    make_counter: Callable[..., Any],
) -> None:
    """Off a terminal, 500 quick steps give a line for each of the first steps and one for the
    last step, not 500 lines."""
    lines = _progress_lines(make_counter(limit=500), tick=0.0)
    assert len(lines) == FIRST_STEPS + 1
    assert lines[0] == "step 1: idle -> counting (count)"
    assert lines[-1] == "step 501: counting -> done (finish)"


def test_a_slow_run_writes_a_line_every_interval(make_counter: Callable[..., Any]) -> None:
    """After the first steps, a line is written once INTERVAL seconds have passed since the
    last one (here a step takes a fifth of the interval, so every fifth step is shown)."""
    lines = _progress_lines(make_counter(limit=40), tick=INTERVAL / 5)
    shown = [int(line.split(":")[0].removeprefix("step ")) for line in lines]
    assert shown[:FIRST_STEPS] == list(range(1, FIRST_STEPS + 1))
    later = shown[FIRST_STEPS:]
    assert later[-1] == 41  # the last step is always written
    assert all(b - a <= 5 for a, b in itertools.pairwise(later))
    assert len(later) < 41 - FIRST_STEPS


def test_a_run_that_ends_on_a_shown_step_writes_it_once(make_counter: Callable[..., Any]) -> None:
    """A run whose last step was shown does not repeat it at the end."""
    lines = _progress_lines(make_counter(limit=2), tick=0.0)
    assert lines == [
        "step 1: idle -> counting (count)",
        "step 2: counting -> counting (count)",
        "step 3: counting -> done (finish)",
    ]


def test_the_cli_run_of_many_steps_writes_few_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fsm run` of 300 steps into a pipe writes far fewer than 300 progress lines, the last
    one being the final step."""
    from fsm.cli import main
    from tests.conftest import COUNTER

    assert main(["-C", str(tmp_path), "new", str(COUNTER), "--id", "c1", "--set", "limit=300"]) == 0
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "run", str(COUNTER), "c1"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert FIRST_STEPS < len(lines) < 60
    assert lines[-1].startswith("step 301: counting -> done (finish)")


def test_a_long_action_is_not_silence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off a terminal, a step whose action runs longer than WAITING seconds gets a line naming
    the action and how long it has run (from the run's heartbeat) before the step's own line;
    quick steps get none."""
    from fsm.cli import main
    from fsm.view import progress
    from tests.conftest import COUNTER

    monkeypatch.setattr(progress, "WAITING", 0.6)
    monkeypatch.setattr(progress, "_LOOK", 0.1)
    monkeypatch.setattr("fsm.store.heartbeat.INTERVAL", 0.1)
    assert main(["-C", str(tmp_path), "new", str(COUNTER), "--id", "s", "--set", "limit=1"]) == 0
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "-o", "delay=1.5", "run", str(COUNTER), "s"]) == 0
    lines = [line.split(" [")[0] for line in capsys.readouterr().err.splitlines()]
    waiting = [line for line in lines if "running for" in line]
    assert waiting, lines
    assert re.fullmatch(r"step 1: action increment running for \ds in state 'idle'", waiting[0])
    assert lines.index(waiting[0]) < lines.index("step 1: idle -> counting (count)")
    assert not any("step 2: action" in line for line in lines)  # the finish step is quick


def test_fontconfig_warnings_are_dropped_and_other_output_kept(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """While Graphviz draws, what C code writes on stderr passes, except fontconfig's
    warnings about the system's configuration."""
    from fsm.view.diagram_render import quiet_fontconfig

    with quiet_fontconfig():
        os.write(2, b'Fontconfig warning: "/etc/fonts/x.conf", line 6: unknown element "x"\n')
        os.write(2, b"Error: a problem of the diagram\n")
    assert capfd.readouterr().err == "Error: a problem of the diagram\n"


def test_a_diagram_command_writes_nothing_on_stderr(tmp_path: Path) -> None:
    """`fsm diagram` of a bundled machine, in a new process (where fontconfig starts), writes
    its files and nothing on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "fsm", "diagram", "ccw-loop", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "ccw-loop.png").stat().st_size > 0


def test_no_test_reads_the_project_folder_beside_the_checkout() -> None:
    """No test reaches for a folder beside the repository (the seeds, a shared/ folder): the
    suite runs from a clone alone, and no skip message asks for files it does not have."""
    outside = re.compile(r"""parents\[\d\]\.parent|/ "shared"|shared/ folder|\.\./shared""")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if path.name != "test_quiet_terminal.py" and outside.search(path.read_text())
    ]
    assert offenders == []
