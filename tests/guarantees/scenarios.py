"""One workspace per machine kind, with fast scripted stand-ins, for the crash and sweep tests.

Each :class:`Scenario` builds a fresh workspace (copied from the bundled sample where there is
one, configured through ``fsm.toml`` so that a forked ``fsm run`` and an in-process engine see
the same settings) and creates one instance in it. The stand-ins answer in milliseconds:

* counter: no commands at all;
* ccw-loop: the sample project with ``bin/pytest``, a shell stand-in for pytest that writes a
  JUnit report (the even-count median tests fail until ``stats.py`` is fixed) and re-runs one
  test alone, and ``bin/fix-agent``, a shell stand-in for the codex agent that fixes the median;
* issue-manager: the sample backlog with its release notes in place (every issue gets done),
  tasks are shell commands, ``plan_agent.py`` plans the fourth issue;
* skill-tuning: the sample skill with three mechanically fixable problems and one to review.
"""

from __future__ import annotations

import functools
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsm.engine.instance import Instance, Workspace
from fsm.model.machine import Machine, load_machine
from tests.conftest import COUNTER

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "workspaces"
MACHINES = ROOT / "machines"

__all__ = ["SCENARIOS", "Scenario"]


@dataclass
class Scenario:
    """A machine kind, how to build its workspace and what creates its instance."""

    name: str
    machine_path: Path
    build: Callable[[Path], None]
    inputs: dict[str, object] = field(default_factory=dict)
    instance_id: str = "crash-1"

    def machine(self) -> Machine:
        """The machine, loaded from its file (once)."""
        return _machine(self.machine_path)

    def create(self, root: Path) -> Instance:
        """Build the workspace at ``root`` and create the instance in it."""
        root.mkdir(parents=True, exist_ok=True)
        self.build(root)
        instance = Workspace(root).instance(self.machine(), self.instance_id)
        instance.create(dict(self.inputs))
        return instance

    def open(self, root: Path) -> Instance:
        """The instance of a workspace built before."""
        return Workspace(root).instance(self.machine(), self.instance_id)


@functools.cache
def _machine(path: Path) -> Machine:
    return load_machine(path)


def _nothing(root: Path) -> None:
    """The counter needs no files."""


PYTEST_STAND_IN = r"""#!/bin/bash
# A stand-in for pytest: the sample's suite, answered from the state of stats.py.
junit=""
for arg in "$@"; do
  case "$arg" in --junitxml=*) junit="${arg#--junitxml=}" ;; esac
done
fixed=0
grep -q 'ordered\[middle - 1\]' stats.py && fixed=1
if [ -z "$junit" ]; then  # one test re-run alone by the debugger
  if [ $fixed = 1 ]; then echo "1 passed"; exit 0; fi
  echo "1 failed"; exit 1
fi
failed=0
cases=""
for name in "test_mean[one]" "test_mean[three]" "test_median_of_odd_count[one]"; do
  cases="$cases<testcase classname=\"tests.test_stats\" name=\"$name\" time=\"0.001\"/>"
done
if [ -f tests/test_median_even.py ]; then
  for name in "test_median_of_even_count[two]" "test_median_of_even_count[four-unsorted]"; do
    if [ $fixed = 1 ]; then
      cases="$cases<testcase classname=\"tests.test_median_even\" name=\"$name\" time=\"0\"/>"
    else
      failed=$((failed + 1))
      trace="tests/test_median_even.py:9: in test_median_of_even_count
    assert median(values) == expected
stats.py:19: in median
AssertionError: assert 2.0 == 1.5"
      cases="$cases<testcase classname=\"tests.test_median_even\" name=\"$name\" time=\"0\">"
      message="AssertionError: assert 2.0 == 1.5"
      cases="$cases<failure message=\"$message\">$trace</failure></testcase>"
    fi
  done
fi
printf '<?xml version="1.0"?><testsuites><testsuite name="pytest">%s</testsuite></testsuites>' \
  "$cases" > "$junit"
echo "$failed failed"
[ $failed = 0 ]
"""

FIX_AGENT_STAND_IN = r"""#!/bin/bash
# A stand-in for the codex agent: a prompt about the median gets the fixed stats.py.
case "$1" in
  *median*|*Median*) cp .fixed-stats.py stats.py; echo "fixed median in stats.py" ;;
  *) echo "nothing to do" ;;
esac
"""


def _ccw_loop(root: Path) -> None:
    shutil.copytree(SAMPLES / "ccw-loop", root, dirs_exist_ok=True)
    fixed = (
        (root / "stats.py")
        .read_text()
        .replace(
            "    return ordered[middle]\n",
            "    if len(ordered) % 2:\n        return ordered[middle]\n"
            "    return (ordered[middle - 1] + ordered[middle]) / 2\n",
        )
    )
    (root / ".fixed-stats.py").write_text(fixed)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, text in (("pytest", PYTEST_STAND_IN), ("fix-agent", FIX_AGENT_STAND_IN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (root / "fsm.toml").write_text(
        "[machine.ccw-loop]\n"
        'task_list = "tasks.jsonl"\n'
        'test_command = "bin/pytest"\n'
        "task_timeout = 60\ntest_timeout = 60\n\n"
        "[agent.codex]\n"
        'command = ["bash", "bin/fix-agent", "{prompt}"]\n'
    )


def _issue_manager(root: Path) -> None:
    shutil.copytree(SAMPLES / "issue-manager", root, dirs_exist_ok=True)
    (root / "CHANGES.md").write_text("# 0.2.0\n\n- Fixed the greeting typo\n")
    toml = (root / "fsm.toml").read_text()
    python = json.dumps(sys.executable)
    (root / "fsm.toml").write_text(toml.replace('["python3",', f"[{python},"))


def _skill_tuning(root: Path) -> None:
    shutil.copytree(SAMPLES / "skill-tuning", root, dirs_exist_ok=True)


SCENARIOS = {
    "counter": Scenario("counter", COUNTER, _nothing, {"limit": 12, "title": "crash"}),
    "ccw-loop": Scenario(
        "ccw-loop",
        MACHINES / "ccw_loop" / "machine.yaml",
        _ccw_loop,
        {"title": "Median of an even-length list", "max_iterations": 10},
        "loop-v2-20260101T000000-00c0ffee",
    ),
    "issue-manager": Scenario(
        "issue-manager",
        MACHINES / "issue_manager" / "machine.yaml",
        _issue_manager,
        instance_id="issue-manager-20260101T000000-00c0ffee",
    ),
    "skill-tuning": Scenario(
        "skill-tuning",
        MACHINES / "skill_tuning" / "machine.yaml",
        _skill_tuning,
        {"target_skill": {"path": "my-skill"}},
        "skill-tuning-20260101T000000-00c0ffee",
    ),
}
