"""Sample workspaces, stand-in agents, and loops driven by the real engine.

``loop_ws`` (a :class:`LoopWorkspace`) builds a tiny Python project with a test suite (optionally
with a bug), a git repository, task lists in both dashboard layouts and dashboard-written master
files. ``loop_ws.open()`` gives a :class:`fsm.testing.Driver` of the loop in that workspace
(simulated clock, test runs for real, agents answered in-process by stand-ins that edit files
according to rules matched against their prompt, so fix tasks work without any network), which
records every document the store wrote, so that scenarios can check each version against
``LoopState``.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.model import LoopState
from fsm_machines.ccw_loop.options import LoopOptions

from fsm.base.clock import SimulatedClock
from fsm.engine.instance import Workspace
from fsm.model.context import Context
from fsm.model.machine import Machine, load_machine
from fsm.process.executor import AgentCommand
from fsm.testing import Answer, Call, Driver, Harness, Reply
from fsm.view.inspect import status

MACHINE_YAML = Path(functions.__file__).with_name("machine.yaml")
LOOP_ID = "loop-v2-20260101T000000-0a1b2c3d"
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
FILE_SYNC = ("develop.md", "debug.md", "validate.md", "changes.log", "debug.log", "summary.md")
"""The progress files of the seed's File Sync table."""

CALC_OK = "def add(a, b):\n    return a + b\n"
CALC_BUG = "def add(a, b):\n    return a - b\n"
CALC_TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_add_zero():\n    assert add(0, 0) == 0\n"
)
FIX_ADD = {"when": "test_add", "file": "calc.py", "replace": "a - b", "with": "a + b"}
"""Stand-in agent rule: a prompt about test_add repairs the subtraction bug."""
IDLE_AGENT = AgentCommand((sys.executable, "-c", "print('looked, changed nothing')", "{prompt}"))
"""The codex of loops run by ``fsm`` in another process that configure no agent: it runs, and
edits nothing."""
IDLE = Reply(stdout="looked, changed nothing")
"""The codex of loops that configure no agent (in-process): it answers, and edits nothing."""

Loop = Driver[LoopState]
"""A loop instance driven by the real engine (``loop_ws.open()``)."""
Agent = AgentCommand | Answer | Sequence[Answer]
"""An agent of ``loop_ws.open(agents=...)``: a command to run, or in-process answers in turn."""


@functools.cache
def ccw_loop() -> Machine:
    """The machine, loaded from its YAML file (once)."""
    return load_machine(MACHINE_YAML)


@dataclass
class LoopWorkspace:
    """A sample workspace under ``root`` with its loop state folder and a stand-in agent."""

    root: Path
    bin_dir: Path
    clock: SimulatedClock = field(default_factory=lambda: SimulatedClock(tick=1.0))
    harness: Harness[LoopState] = field(init=False)
    """The machine as the loop opened last set it up (its executor holds the agent calls)."""

    loop_id = LOOP_ID
    pytest_command = PYTEST
    fix_add = FIX_ADD

    @property
    def state_dir(self) -> Path:
        """Where master files, task lists and progress folders live."""
        return self.root / ".workflow" / ".loop"

    def write_project(self, *, bug: bool = False, git: bool = True) -> None:
        """A tiny Python project: ``calc.add`` and two tests (``bug`` makes add subtract)."""
        (self.root / "tests").mkdir(parents=True, exist_ok=True)
        (self.root / "calc.py").write_text(CALC_BUG if bug else CALC_OK)
        (self.root / "tests" / "test_calc.py").write_text(CALC_TESTS)
        (self.root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
        if git:
            self.git("init", "-q")
            self.git("add", ".")
            self.git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")

    def git(self, *args: str) -> str:
        """Run git in the workspace and return its output."""
        done = subprocess.run(
            ["git", *args], cwd=self.root, check=True, capture_output=True, text=True
        )
        return done.stdout

    def write_agent(self, *rules: dict[str, Any]) -> Answer:
        """A stand-in agent: in write mode it applies the ``rules`` whose ``when`` text is in the
        prompt (``replace`` text in ``file``, or ``write`` it), and fails when such a rule says
        ``fail``; in analysis mode it edits nothing."""

        def answer(call: Call) -> Reply:
            if call.mode != "write":
                return Reply(stdout="analysis only: nothing edited")
            edited = []
            for rule in (r for r in rules if r["when"] in call.text):
                target = call.cwd / rule["file"]
                if "write" in rule:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(rule["write"])
                else:
                    target.write_text(target.read_text().replace(rule["replace"], rule["with"]))
                edited.append(rule["file"])
            failed = any(rule.get("fail") and rule["when"] in call.text for rule in rules)
            return Reply(int(failed), "edited: " + (", ".join(edited) or "nothing") + "\n")

        return answer

    def write_scripted_agent(self, *plan: dict[str, Any]) -> list[Answer]:
        """A stand-in agent that does ``plan[n]`` on its n-th call (the last step from then on):
        ``append`` text to ``file``, ``replace`` text in it, print ``say`` and ``stderr``, exit
        ``exit``."""

        def step(planned: dict[str, Any]) -> Answer:
            def answer(call: Call) -> Reply:
                target = call.cwd / str(planned.get("file", ""))
                if "append" in planned:
                    with target.open("a") as handle:
                        handle.write(planned["append"])
                if "replace" in planned:
                    text = target.read_text().replace(planned["replace"], planned["with"])
                    target.write_text(text)
                say, stderr = planned.get("say", "done"), planned.get("stderr", "")
                return Reply(planned.get("exit", 0), say + "\n", stderr + "\n")

            return answer

        return [step(planned) for planned in plan]

    def agent_calls(self) -> list[Call]:
        """Every agent call of the loop opened last, answered or passed on: tool, mode, prompt."""
        return [call for call in self.harness.executor.calls if call.kind == "agent"]

    def write_tasks(
        self, tasks: Iterable[dict[str, Any]], *, layout: str = "dashboard", loop_id: str = LOOP_ID
    ) -> Path:
        """A task list: ``dashboard`` writes ``{id}/tasks.jsonl``, ``flat`` ``{id}.tasks.jsonl``."""
        if layout == "dashboard":
            path = self.state_dir / loop_id / "tasks.jsonl"
        else:
            path = self.state_dir / f"{loop_id}.tasks.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(task) + "\n" for task in tasks))
        return path

    def new_loop(self, loop_id: str = LOOP_ID, **fields: Any) -> dict[str, Any]:
        """A master file as the dashboard writes it (2-space JSON, status created, no
        skill_state)."""
        raw: dict[str, Any] = {
            "loop_id": loop_id,
            "title": "Sample loop",
            "description": "Make the calculator tests pass",
            "max_iterations": 10,
            "status": "created",
            "current_iteration": 0,
            "created_at": "2026-01-01T00:00:00.000Z",
            "updated_at": "2026-01-01T00:00:00.000Z",
        }
        raw.update(fields)
        self.write_document(raw)
        return raw

    def write_document(self, raw: dict[str, Any]) -> Path:
        """Write a master file as the dashboard does: in place, 2-space JSON."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / f"{raw['loop_id']}.json"
        with path.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps(raw, indent=2))
        return path

    def write_config(self, *, codex: AgentCommand | None = IDLE_AGENT, **options: Any) -> None:
        """fsm.toml: ``[machine.ccw-loop]`` options (tests run with ``PYTEST``) and the codex
        agent (:data:`IDLE_AGENT` unless given; None for none), for ``fsm`` run as a separate
        process."""
        agents = {} if codex is None else {"codex": codex}
        Harness(ccw_loop(), self.root).write_config({"test_command": PYTEST, **options}, agents)

    def loops(
        self, *, agents: dict[str, Agent] | None = None, **options: Any
    ) -> Harness[LoopState]:
        """The machine in this workspace (simulated clock; tests run with ``PYTEST``; the fix
        tool codex is :data:`IDLE` unless ``agents`` are given); it becomes :attr:`harness`."""
        harness = Harness(
            ccw_loop(),
            self.root,
            document=LoopState,
            clock=self.clock,
            options={"test_command": PYTEST, **options},
        )
        for tool, agent in ({"codex": IDLE} if agents is None else agents).items():
            if isinstance(agent, AgentCommand):
                harness.add_agent(tool, agent)
            elif isinstance(agent, Sequence):
                harness.executor.on_agent(tool, *agent)
            else:
                harness.executor.on_agent(tool, agent)
        self.harness = harness
        return harness

    def workspace(self, **options: Any) -> Workspace:
        """The fsm workspace on ``root``, as :meth:`loops` sets it up."""
        return self.loops(**options).workspace()

    def open(
        self,
        loop_id: str = LOOP_ID,
        *,
        interactive: bool = False,
        reconfigure: bool = False,
        agents: dict[str, Agent] | None = None,
        **options: Any,
    ) -> Loop:
        """The loop ``loop_id`` in this workspace, driven by the real engine (``reconfigure``:
        as ``fsm run --reconfigure``, adopting ``options`` over those the loop pinned)."""
        harness = self.loops(agents=agents, **options)
        return harness.instance(loop_id, interactive=interactive, reconfigure=reconfigure)

    def context(self, loop_id: str = LOOP_ID, **options: Any) -> Context[LoopOptions]:
        """The context the engine passes to hooks of ``loop_id``."""
        return self.open(loop_id, **options).context(LoopOptions)

    def automatic_event(self, raw: dict[str, Any], **options: Any) -> str | None:
        """The event an automatic step takes on document ``raw`` (None: it waits for input).

        This is what ``fsm status`` reports as enabled and automatic; the engine takes the first.
        """
        self.write_document(raw)
        instance = self.open(raw["loop_id"], **options).instance
        return next((e.event for e in status(instance).events if e.enabled and e.auto), None)

    def progress(self, name: str, loop_id: str = LOOP_ID) -> Path:
        """A file of the loop's progress folder."""
        return self.state_dir / f"{loop_id}.progress" / name

    def missing_progress(self, *names: str, loop_id: str = LOOP_ID) -> list[str]:
        """Which of the progress files ``names`` do not exist or are empty."""
        return [
            name
            for name in names
            if not self.progress(name, loop_id).is_file()
            or not self.progress(name, loop_id).stat().st_size
        ]


@pytest.fixture
def loop_ws(tmp_path: Path) -> LoopWorkspace:
    """An empty sample workspace (``write_project`` fills it)."""
    root = tmp_path / "ws"
    root.mkdir()
    return LoopWorkspace(root, tmp_path / "bin")


@pytest.fixture
def started(loop_ws: LoopWorkspace) -> Any:
    """``started(**options)``: a dashboard-created loop in a project (bug-free unless ``bug``),
    started as the dashboard's start button does (``start=False`` leaves it created)."""

    def make(
        *,
        bug: bool = False,
        start: bool = True,
        fields: dict[str, Any] | None = None,
        **options: Any,
    ) -> Loop:
        if not (loop_ws.root / "calc.py").exists():
            loop_ws.write_project(bug=bug)
        raw = loop_ws.new_loop(**(fields or {}))
        loop = loop_ws.open(raw["loop_id"], **options)
        if start:
            loop.control("start")
        return loop

    return make
