"""The demo's sample workspace (``examples/workspaces/issue-manager``) runs to its expected end.

The test does what ``examples/demo.py`` does: copy the folder, open it as a Workspace (its own
fsm.toml configures the stand-in planning agent), create an instance and run it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fsm.engine import Engine
from fsm.inspect import replay
from fsm.instance import Workspace

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspaces" / "issue-manager"


def test_the_sample_is_pristine() -> None:
    """The shipped sample holds its backlog and no run's output."""
    issues = (SAMPLE / ".workflow" / "issues" / "issues.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in issues] == ["registered"] * 4
    assert not (SAMPLE / ".workflow" / ".scratchpad").exists()
    assert not (SAMPLE / ".workflow" / "issues" / "solutions" / "ISS-4.jsonl").exists()
    assert (SAMPLE / "VERSION").read_text() == "0.1.0\n"


def test_demo_sample_completes_with_one_issue_failed_on_purpose(tmp_path: Path) -> None:
    """Three issues change the workspace's files (one planned by plan_agent.py), the release
    notes issue fails as intended, and the run completes with a 75.0% report."""
    folder = tmp_path / "issue-manager"
    shutil.copytree(SAMPLE, folder)
    workspace = Workspace(folder)
    machine = workspace.machine("issue-manager")
    instance = workspace.instance(machine, workspace.new_id(machine))
    instance.create({})

    result = Engine(instance).run(max_steps=200)

    assert (result.outcome, result.state, result.exit_code) == ("completed", "complete", 0)
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
    work_dir = instance.paths.document.parent
    state = json.loads((work_dir / "state.json").read_text())
    assert state["issues"]["ISS-2"]["solution_id"] == "SOL-ISS-2-2"
    assert "cannot stat 'CHANGES.md'" in state["issues"]["ISS-3"]["error"]
    assert json.loads((work_dir / "solutions" / "ISS-4-plan.json").read_text())["source"] == (
        "agent"
    )
    report = (work_dir / "final-report.md").read_text()
    assert "| Completed | 3 |" in report
    assert "| Success rate | 75.0% |" in report
    assert replay(instance).problems == []
