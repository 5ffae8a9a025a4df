"""The demo's sample workspace (``examples/workspaces/issue-manager``) runs to its expected end.

The test does what ``examples/demo.py`` does: copy the folder, open it as a Workspace (its own
fsm.toml configures the stand-in planning agent), create an instance and run it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsm.engine.engine import Engine
from fsm.engine.instance import Workspace
from fsm.engine.retry import retry
from fsm.view.inspect import replay

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspaces" / "issue-manager"


def test_the_sample_is_pristine() -> None:
    """The shipped sample holds its backlog and no run's output."""
    issues = (SAMPLE / ".workflow" / "issues" / "issues.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in issues] == ["registered"] * 4
    assert not (SAMPLE / ".workflow" / ".scratchpad").exists()
    assert not (SAMPLE / ".workflow" / "issues" / "solutions" / "ISS-4.jsonl").exists()
    assert (SAMPLE / "VERSION").read_text() == "0.1.0\n"


def _run_copy(tmp_path: Path, prepare: Callable[[Path], None] | None = None) -> Any:
    folder = tmp_path / "issue-manager"
    shutil.copytree(SAMPLE, folder)
    if prepare is not None:
        prepare(folder)
    workspace = Workspace(folder)
    machine = workspace.machine("issue-manager")
    instance = workspace.instance(machine, workspace.new_id(machine))
    instance.create({})
    return folder, instance, Engine(instance).run(max_steps=200)


def test_demo_sample_fails_because_one_issue_fails_on_purpose(tmp_path: Path) -> None:
    """Three issues change the workspace's files (one planned by plan_agent.py), the release
    notes issue fails as intended, so the run ends failed (exit 4) saying 3 of 4 and why."""
    folder, instance, result = _run_copy(tmp_path)

    assert (result.outcome, result.state, result.exit_code) == ("failed", "failed", 4)
    assert result.message.startswith(
        "3 of 4 issues done; ISS-3 failed: task T2 (Copy CHANGES.md) failed: exited 1: "
    )
    assert result.message.endswith(
        "(cp: cannot stat 'CHANGES.md': No such file or directory); "
        f"to retry: fsm retry issue-manager {instance.id} [ISSUE...]"
    )
    assert len(result.steps) == 11
    assert (folder / "app" / "greeting.txt").read_text() == "Hello, world\n"
    assert (folder / "VERSION").read_text() == "0.2.0\n"
    assert "## 0.2.0" in (folder / "CHANGELOG.md").read_text()
    assert not (folder / "dist" / "CHANGES.md").exists()
    lines = (folder / ".workflow" / "issues" / "issues.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == [
        "completed",
        "completed",
        "failed",
        "completed",
    ]
    work_dir = instance.store.paths(instance.id).document.parent
    state = json.loads((work_dir / "state.json").read_text())
    assert (state["status"], state["failure_reason"]) == ("failed", result.message)
    assert state["issues"]["ISS-2"]["solution_id"] == "SOL-ISS-2-2"
    assert "cannot stat 'CHANGES.md'" in state["issues"]["ISS-3"]["error"]
    assert json.loads((work_dir / "solutions" / "ISS-4-plan.json").read_text())["source"] == (
        "agent"
    )
    report = (work_dir / "final-report.md").read_text()
    assert "| Completed | 3 |" in report
    assert "| Success rate | 75.0% |" in report
    assert "action-execute: ISS-3 failed: task T2 (Copy CHANGES.md) failed" in report
    assert replay(instance).problems == []


def test_demo_sample_with_release_notes_completes_every_issue(tmp_path: Path) -> None:
    """With a CHANGES.md in place (the demo's second scenario) every issue is done: exit 0."""
    folder, instance, result = _run_copy(
        tmp_path, lambda f: (f / "CHANGES.md").write_text("# 0.2.0\n")
    )

    assert (result.outcome, result.state, result.exit_code) == ("completed", "complete", 0)
    assert result.message == "4 of 4 issues done"
    assert (folder / "dist" / "CHANGES.md").read_text() == "# 0.2.0\n"
    state = json.loads(
        (instance.store.paths(instance.id).document.parent / "state.json").read_text()
    )
    assert (state["status"], state["failure_reason"], state["errors"]) == ("completed", None, [])


def test_demo_sample_retried_after_the_fix_completes_running_only_the_failed_issue(
    tmp_path: Path,
) -> None:
    """As the sample's README shows: after the failed run, write CHANGES.md and retry the same
    instance; only ISS-3 runs again (ISS-2's first task, which checks VERSION is 0.1.0, would
    fail if it ran twice) and the instance completes with exit 0."""
    folder, instance, result = _run_copy(tmp_path)
    assert result.exit_code == 4
    (folder / "CHANGES.md").write_text("# 0.2.0\n")

    assert retry(instance).items == ["ISS-3"]
    result = Engine(instance).run(max_steps=200)

    assert (result.outcome, result.exit_code, result.message) == (
        "completed",
        0,
        "4 of 4 issues done",
    )
    assert (folder / "dist" / "CHANGES.md").read_text() == "# 0.2.0\n"
    assert (folder / "VERSION").read_text() == "0.2.0\n"
    lines = (folder / ".workflow" / "issues" / "issues.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["completed"] * 4
    assert replay(instance).problems == []
