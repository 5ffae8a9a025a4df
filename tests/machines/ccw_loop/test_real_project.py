"""The real-project check (``scripts/real-project.sh``), run by the test flow: ccw-loop's word on
a real package agrees with an independent run of its tests. Skipped, saying why, when PyPI
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
def test_loop_outcomes_on_a_real_package_agree_with_its_tests(tmp_path: Path) -> None:
    """With a fixing agent the loop completes and every test passes; with an agent that does
    nothing it ends failed with the failing tests' counts; with one that hangs after fixing,
    leaving a setsid child, it is cut at task_timeout, its fix validated, within the bound."""
    driver = _driver()
    try:
        archive = driver.download(tmp_path / "download")
    except driver.Unavailable as exc:
        pytest.skip(f"real-project check skipped: {exc}")
    seen = {name: driver.run_scenario(archive, tmp_path, name) for name in driver.SCENARIOS}
    assert all(result.agrees for result in seen.values()), "\n".join(map(str, seen.values()))
    assert [(s.outcome, s.exit_code) for s in seen.values()] == [
        ("completed", 0),
        ("failed", 4),
        ("completed", 0),
    ]
    assert (seen["fixer"].passed, seen["idle"].failed) == (455, 2)
    assert "after 3 fix attempts" in seen["idle"].line
    assert seen["hang"].seconds < driver.BOUND
