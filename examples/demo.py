"""The demo: drive every machine on a sample workspace, then write the diagrams.

Each scenario copies a sample workspace from ``examples/workspaces/`` into ``demo-output/``
(recreated on every run), creates an instance with the Python API, runs it to the end, and
prints where it ended. Finally ``fsm diagram`` writes the diagrams of every registered machine
to ``diagrams/``. Run it with ``bash scripts/demo.sh`` (which sets up the virtual environment).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from fsm import Engine, Workspace
from fsm.log import configure

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "examples" / "workspaces"


@dataclass
class Scenario:
    """One machine driven on one sample workspace."""

    title: str
    machine: str
    sample: str | None
    inputs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[Path], None] | None = None
    expect: str = "completed"
    folder: str | None = None
    """The folder under demo-output/ (default: the sample's name, else the machine's)."""


def _add_release_notes(folder: Path) -> None:
    """The CHANGES.md the issue-manager sample's third issue publishes."""
    (folder / "CHANGES.md").write_text("# 0.2.0\n\n- Fixed the greeting typo\n", encoding="utf-8")


def scenarios() -> list[Scenario]:
    """The demo's scenarios, one or more per machine."""
    return [
        Scenario(
            "ccw-loop: develop, validate (fails), debug, fix with the stand-in agent, validate",
            "ccw-loop",
            "ccw-loop",
            {
                "title": "Median of an even-length list",
                "description": "Cover the median of an even count with a test and make it pass",
                "max_iterations": 10,
            },
            # The sample's fsm.toml says python3; the demo's own interpreter surely has pytest.
            {"test_command": f"{sys.executable} -m pytest -q -p no:cacheprovider"},
        ),
        Scenario(
            "ccw-loop: a fix agent that changes nothing; the loop gives up after 3 failed fixes",
            "ccw-loop",
            "ccw-loop",
            {
                "title": "Median of an even-length list (stubborn agent)",
                "description": "Cover the median of an even count with a test and make it pass",
                "max_iterations": 10,
            },
            {"test_command": f"{sys.executable} -m pytest -q -p no:cacheprovider"},
            prepare=_use_stubborn_agent,
            expect="failed",
            folder="ccw-loop-stubborn",
        ),
        Scenario(
            "ccw-loop: no fix agent (fix_tool none): the bash tasks run, the confirmed failure "
            "ends the loop for a person to fix",
            "ccw-loop",
            "ccw-loop",
            {
                "title": "Median of an even-length list (no agent)",
                "description": "Cover the median of an even count with a test and make it pass",
                "max_iterations": 10,
            },
            {
                "test_command": f"{sys.executable} -m pytest -q -p no:cacheprovider",
                "fix_tool": "none",
            },
            expect="failed",
            folder="ccw-loop-no-agent",
        ),
        Scenario(
            "skill-tuning: diagnose a skill, fix three problems, pass the gate, one left to review",
            "skill-tuning",
            "skill-tuning",
            {
                "target_skill": {"path": "my-skill"},
                "user_issue_description": (
                    "The review forgets its constraints after phase 1 and its history grows "
                    "with every file."
                ),
            },
        ),
        Scenario(
            "skill-tuning: a skill whose agent calls need judgement: nothing fixed, gate fails",
            "skill-tuning",
            "skill-tuning",
            {"target_skill": {"path": "unfixable-skill"}},
            expect="failed",
            folder="skill-tuning-unfixable",
        ),
        Scenario(
            "issue-manager: four issues, one failing on purpose (so the run fails: 3 of 4 done), "
            "one planned by plan_agent.py",
            "issue-manager",
            "issue-manager",
            expect="failed",
        ),
        Scenario(
            "issue-manager: the same backlog with the release notes in place: 4 of 4 issues done",
            "issue-manager",
            "issue-manager",
            prepare=_add_release_notes,
            folder="issue-manager-all-done",
        ),
        Scenario(
            "counter (the example machine in examples/counter)",
            str(ROOT / "examples" / "counter" / "machine.yaml"),
            None,
            {"limit": 3, "title": "demo"},
        ),
    ]


def _use_stubborn_agent(folder: Path) -> None:
    """Make the ccw-loop sample's codex the agent that says "fixed" and changes nothing."""
    config = folder / "fsm.toml"
    config.write_text(config.read_text().replace("fix_agent.py", "stubborn_agent.py"))


def drive(scenario: Scenario, out: Path) -> bool:
    """Run one scenario; return True when it ended as expected."""
    name = scenario.folder or scenario.sample or Path(scenario.machine).parent.name
    folder = out / name
    if scenario.sample is not None:
        shutil.copytree(SAMPLES / scenario.sample, folder)
    folder.mkdir(parents=True, exist_ok=True)
    if scenario.prepare is not None:
        scenario.prepare(folder)
    workspace = Workspace(folder, options=scenario.options)
    machine = workspace.machine(scenario.machine)  # a registered name, or a machine file
    instance = workspace.instance(machine, workspace.new_id(machine))
    instance.create(scenario.inputs)
    result = Engine(instance).run(max_steps=200)
    ok = result.outcome == scenario.expect
    mark = "ok " if ok else "UNEXPECTED"
    print(f"[{mark}] {scenario.title}")
    print(
        f"      instance {instance.id}: {result.outcome} in '{result.state}' after "
        f"{len(result.steps)} steps"
    )
    print(f"      why: {result.message}")
    where = Path(instance.where)  # the file store's: a path in the workspace
    shown = where.relative_to(out.parent) if where.is_relative_to(out.parent) else where
    print(f"      document {shown}")
    return ok


def _write_diagrams(folder: Path) -> bool:
    """Write every registered machine's diagrams with ``fsm diagram``, as a user would; say
    which files were written. False when the command failed."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "fsm", "diagram", "-o", str(folder)],
        check=False,
        capture_output=True,
        text=True,
    )
    written = [Path(line).name for line in done.stdout.splitlines() if line.strip()]
    print(f"[{'ok ' if done.returncode == 0 else 'UNEXPECTED'}] diagrams: {', '.join(written)}")
    if done.stderr:
        print(done.stderr, end="")
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    """Run every scenario and write the diagrams; exit 1 when a scenario ends unexpectedly."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "demo-output")
    parser.add_argument("--diagrams", type=Path, default=ROOT / "diagrams")
    parser.add_argument("--verbose", action="store_true", help="show every log event")
    args = parser.parse_args(argv)
    configure("console", "info" if args.verbose else "warning")
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    results = [drive(s, args.out) for s in scenarios()]
    structlog.reset_defaults()
    diagrams = _write_diagrams(args.diagrams)
    failed = results.count(False)
    print(
        f"\n{len(results) - failed} of {len(results)} scenarios ended as expected; "
        f"outputs in {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}"
    )
    return 1 if failed or not diagrams else 0


if __name__ == "__main__":
    sys.exit(main())
