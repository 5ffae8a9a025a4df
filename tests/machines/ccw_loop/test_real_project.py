"""The real-project check (``scripts/real-project.sh``), run by the test flow: ccw-loop's word on
real packages agrees with an independent run of their tests. Skipped, saying why, when PyPI
cannot be reached."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

DRIVER = Path(__file__).parents[3] / "examples" / "real_project.py"


def _driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_project", DRIVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_loop_outcomes_on_real_packages_agree_with_their_tests(tmp_path: Path) -> None:
    """With a fixing agent the loop completes and every test passes; with an agent that does
    nothing it ends failed with the failing tests' counts; with one that hangs after fixing,
    leaving a setsid child, it is cut at task_timeout, its fix validated, within the bound; a
    bug only a doctest finds is fixed (the doctest re-run alone as a doctest), and so is one a
    unittest suite run by ``make test`` finds (the prompt gives unittest's real error); agents
    that skip, delete or deselect the failing test, or edit fsm.toml's test command, never make
    the loop complete, and its last line says what they changed."""
    driver = _driver()
    try:
        archives = {
            package: driver.download(tmp_path / "download", package)
            for package in {scenario[0] for scenario in driver.SCENARIOS.values()}
        }
    except driver.Unavailable as exc:
        pytest.skip(f"real-project check skipped: {exc}")
    seen = {
        name: driver.run_scenario(archives[scenario[0]], tmp_path, name)
        for name, scenario in driver.SCENARIOS.items()
    }
    assert all(result.agrees for result in seen.values()), "\n".join(map(str, seen.values()))
    assert {name: (s.outcome, s.exit_code) for name, s in seen.items()} == {
        "fixer": ("completed", 0),
        "idle": ("failed", 4),
        "hang": ("completed", 0),
        "doctest": ("completed", 0),
        "unittest": ("completed", 0),
        "skip": ("failed", 4),
        "delete": ("failed", 4),
        "deselect": ("failed", 4),
        "toml": ("failed", 4),
    }
    assert (seen["fixer"].passed, seen["idle"].failed) == (455, 2)
    assert (seen["doctest"].passed, seen["unittest"].passed) == (256, 816)
    assert "after 3 fix attempts" in seen["idle"].line
    assert seen["hang"].seconds < driver.BOUND
    assert seen["skip"].passed == 214 and "changed tests/test_fifo.py" in seen["skip"].line
