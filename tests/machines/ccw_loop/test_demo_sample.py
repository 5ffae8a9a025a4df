"""The demo sample workspace (examples/workspaces/ccw-loop) run on a copy, as the demo runs it:
develop, validate (fail), debug, fix, validate (pass), completed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from fsm_machines.ccw_loop.model import LoopState

from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.model.machine import load_machine
from fsm.view.inspect import replay
from tests.machines.ccw_loop.conftest import FILE_SYNC, MACHINE_YAML

DEMO = Path(__file__).parents[3] / "examples" / "workspaces" / "ccw-loop"
INPUTS = {
    "title": "Median of an even-length list",
    "description": "Cover the median of an even count with a test and make the suite pass",
    "max_iterations": 10,
}
"""The inputs the demo creates its loop with."""
OPTIONS = {"test_command": f"{sys.executable} -m pytest -q -p no:cacheprovider"}
"""The demo's options: the tests run with the demo's own interpreter (which has pytest)."""


def test_the_demo_sample_is_debugged_fixed_and_completed(tmp_path: Path) -> None:
    """Both tasks run, the new test fails, debug confirms it, the stand-in agent fixes median,
    the suite passes, and every File Sync file is written."""
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    workspace = Workspace(copy, options=OPTIONS)
    machine = load_machine(MACHINE_YAML)
    instance = workspace.instance(machine, workspace.new_id(machine))
    instance.create(INPUTS)
    result = Engine(instance).run(max_steps=200)
    assert (result.outcome, result.exit_code, result.state) == ("completed", 0, "completed")
    assert [s.event for s in result.steps] == [
        *["init", "develop", "develop", "validate"],
        *["debug", "fix", "validate", "complete"],
    ]
    doc = LoopState.model_validate_json(
        instance.store.paths(instance.id).document.read_text(encoding="utf-8")
    )
    state = doc.skill_state
    assert state is not None
    assert (doc.status, doc.current_iteration, state.debug.confirmed_hypothesis) == (
        "completed",
        6,
        "H1",
    )
    assert [(t.id, t.status) for t in state.develop.tasks] == [
        ("task-1767225600000-5e1d0a11", "completed"),
        ("task-1767225600001-5e1d0a12", "completed"),
        ("fix-H1", "completed"),
    ]
    assert (
        state.validate_.passed,
        state.validate_.pass_rate,
        len(state.validate_.test_results),
    ) == (True, 100.0, 10)
    assert "(ordered[middle - 1] + ordered[middle]) / 2" in (copy / "stats.py").read_text()
    assert "- median: tested on even-length lists" in (copy / "CHANGELOG.md").read_text()
    progress = instance.store.paths(instance.id).document.with_name(f"{instance.id}.progress")
    assert [name for name in FILE_SYNC if not (progress / name).is_file()] == []
    assert "Outcome: completed" in (progress / "summary.md").read_text()
    assert replay(instance).problems == []


def test_the_stubborn_sample_gives_up_after_three_failed_fixes(tmp_path: Path) -> None:
    """With a fix agent that says "fixed" and changes nothing (the demo's second ccw-loop
    scenario), each fix is a failed fix and the loop ends failed, naming the test it gave up on;
    nothing counts the fixes as done."""
    copy = tmp_path / "stubborn"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    config = copy / "fsm.toml"
    config.write_text(config.read_text().replace("fix_agent.py", "stubborn_agent.py"))
    workspace = Workspace(copy, options=OPTIONS)
    machine = load_machine(MACHINE_YAML)
    instance = workspace.instance(machine, workspace.new_id(machine))
    instance.create(INPUTS)
    result = Engine(instance).run(max_steps=200)
    assert (result.outcome, result.exit_code) == ("failed", 4)
    assert [s.event for s in result.steps] == [
        *["init", "develop", "develop", "validate", "debug"],
        *["fix", "fix", "fix", "abandon"],
    ]
    test = "tests/test_median_even.py::test_median_of_even_count[two]"
    assert result.message == (
        f"Gave up on {test} after 3 fix attempts (H1); last attempt: the fix changed no file "
        "(agent codex exited 0 without an edit)"
    )
    doc = LoopState.model_validate_json(
        instance.store.paths(instance.id).document.read_text(encoding="utf-8")
    )
    assert (doc.status, doc.failure_reason) == ("failed", result.message)
    assert doc.skill_state is not None
    assert [t.status for t in doc.skill_state.develop.tasks[2:]] == ["failed"] * 3
    assert replay(instance).problems == []
