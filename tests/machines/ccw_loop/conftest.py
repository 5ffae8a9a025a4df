"""Sample workspaces, a stand-in agent, and loops driven by the real engine.

``loop_ws`` (a :class:`LoopWorkspace`) builds a tiny Python project with a test suite (optionally
with a bug), a git repository, task lists in both dashboard layouts, dashboard-written master files,
and a scripted stand-in agent that edits files according to rules matched against its prompt (so
fix tasks work without any network). ``loop_ws.open()`` gives a :class:`Loop`: an instance of the
machine in that workspace (simulated clock, the stand-in agents), an ``Engine`` on it, and every
document the store wrote, so that scenarios can check each version against ``LoopState``.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.ccw_loop import functions
from fsm_machines.ccw_loop.model import LoopState

from fsm.clock import SimulatedClock
from fsm.context import Context
from fsm.control import ControlPlane
from fsm.engine import Engine
from fsm.executor import AgentCommand, SubprocessExecutor
from fsm.inspect import replay, status
from fsm.instance import Instance, Workspace
from fsm.machine import Machine, load_machine
from fsm.outcome import RunResult, StepResult

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
"""The codex of loops that configure no agent: it runs, and edits nothing."""

AGENT_SCRIPT = """\
import json, sys
from pathlib import Path

here = Path(__file__).parent
mode, prompt = sys.argv[1], sys.argv[2]
with (here / "agent-calls.jsonl").open("a") as log:
    log.write(json.dumps({"mode": mode, "prompt": prompt}) + "\\n")
if mode != "write":
    print("analysis only: nothing edited")
    sys.exit(0)
edited = []
for rule in json.loads((here / "agent-rules.json").read_text()):
    if rule["when"] not in prompt:
        continue
    target = Path(rule["file"])
    if "write" in rule:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rule["write"])
    else:
        target.write_text(target.read_text().replace(rule["replace"], rule["with"]))
    edited.append(rule["file"])
print("edited: " + (", ".join(edited) or "nothing"))
sys.exit(int(any(rule.get("fail") and rule["when"] in prompt for rule in
                 json.loads((here / "agent-rules.json").read_text()))))
"""

SCRIPTED_AGENT = """\
import json, sys
from pathlib import Path

here = Path(__file__).parent
calls = here / "scripted-calls.jsonl"
number = len(calls.read_text().splitlines()) if calls.exists() else 0
with calls.open("a") as log:
    log.write(json.dumps({"argv": sys.argv[1:]}) + "\\n")
plan = json.loads((here / "scripted-plan.json").read_text())
step = plan[min(number, len(plan) - 1)]
if "append" in step:
    with open(step["file"], "a") as handle:
        handle.write(step["append"])
if "replace" in step:
    target = Path(step["file"])
    target.write_text(target.read_text().replace(step["replace"], step["with"]))
print(step.get("say", "done"))
print(step.get("stderr", ""), file=sys.stderr)
sys.exit(step.get("exit", 0))
"""


@functools.cache
def ccw_loop() -> Machine:
    """The machine, loaded from its YAML file (once)."""
    return load_machine(MACHINE_YAML)


@dataclass
class Loop:
    """One loop instance, the engine driving it, and every document version written to disk."""

    instance: Instance
    engine: Engine
    written: list[dict[str, Any]] = field(default_factory=list)

    @property
    def raw(self) -> dict[str, Any]:
        """The master file's JSON as it is on disk."""
        data: dict[str, Any] = json.loads(self.instance.paths.document.read_text())
        return data

    @property
    def doc(self) -> LoopState:
        """The master file as the model reads it."""
        return LoopState.model_validate(self.raw)

    @property
    def state(self) -> str:
        """The FSM state the engine reads."""
        return self.instance.load().state

    @property
    def ctx(self) -> Context:
        """The context actions and hooks get."""
        return self.instance.context()

    def step(self) -> StepResult:
        """One automatic step."""
        return self.engine.step(actor="test")

    def fire(self, event: str) -> StepResult:
        """Fire ``event`` (a person's choice)."""
        return self.engine.fire(event, actor="test")

    def run(self, max_steps: int = 60, **kwargs: Any) -> RunResult:
        """Run until the loop ends, pauses, waits, or ``max_steps``."""
        return self.engine.run(max_steps=max_steps, **kwargs)

    def control(self, command: str) -> None:
        """A control command as the dashboard or ``fsm pause`` gives it."""
        ControlPlane(self.instance).apply(command, actor="test", reason="scenario")

    def events(self) -> list[str]:
        """The events of the journal's steps (``event!`` for a step whose action failed)."""
        return [
            f"{r['event']}!" if r["kind"] == "error" else r["event"]
            for r in self.instance.journal.read().records
            if r["kind"] in ("transition", "error")
        ]

    def assert_consistent(self) -> None:
        """Every version written validates against LoopState, and the journal replays."""
        assert self.written, "nothing was written"
        for version in self.written:
            LoopState.model_validate(version)
        report = replay(self.instance)
        assert report.problems == [], report.problems


@dataclass
class LoopWorkspace:
    """A sample workspace under ``root`` with its loop state folder and a stand-in agent."""

    root: Path
    bin_dir: Path
    clock: SimulatedClock = field(default_factory=lambda: SimulatedClock(tick=1.0))

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

    def write_agent(self, *rules: dict[str, Any]) -> AgentCommand:
        """The stand-in agent: applies ``rules`` whose ``when`` text is in the prompt."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        script = self.bin_dir / "agent.py"
        script.write_text(AGENT_SCRIPT)
        (self.bin_dir / "agent-rules.json").write_text(json.dumps(list(rules)))
        return AgentCommand((sys.executable, str(script), "{mode}", "{prompt}"))

    def write_scripted_agent(
        self, *plan: dict[str, Any], argv: tuple[str, ...] = ()
    ) -> AgentCommand:
        """A stand-in agent that does ``plan[n]`` on its n-th call (the last step from then on):
        ``append`` text to ``file``, ``replace`` text in it, print ``say`` and ``stderr``, exit
        ``exit``. ``argv`` are extra arguments before the prompt (as an fsm.toml command has)."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        script = self.bin_dir / "scripted_agent.py"
        script.write_text(SCRIPTED_AGENT)
        (self.bin_dir / "scripted-plan.json").write_text(json.dumps(list(plan)))
        return AgentCommand((sys.executable, str(script), *argv, "{prompt}"))

    def scripted_calls(self) -> int:
        """How often the scripted agent ran."""
        calls = self.bin_dir / "scripted-calls.jsonl"
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    def agent_calls(self) -> list[dict[str, str]]:
        """Every call the stand-in agent received: its mode and prompt."""
        log = self.bin_dir / "agent-calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

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
        table = {"test_command": PYTEST, **options}
        lines = ["[machine.ccw-loop]", *(f"{k} = {json.dumps(v)}" for k, v in table.items())]
        if codex is not None:
            lines += ["", "[agent.codex]", f"command = {json.dumps(list(codex.command))}"]
        (self.root / "fsm.toml").write_text("\n".join(lines) + "\n")

    def workspace(
        self, *, agents: dict[str, AgentCommand] | None = None, **options: Any
    ) -> Workspace:
        """The fsm workspace on ``root`` (simulated clock; tests run with ``PYTEST``; the fix tool
        codex is :data:`IDLE_AGENT` unless ``agents`` are given)."""
        return Workspace(
            self.root,
            options={"test_command": PYTEST, **options},
            clock=self.clock,
            executor=SubprocessExecutor(
                self.root,
                agents={"codex": IDLE_AGENT} if agents is None else agents,
                default_timeout=60,
            ),
        )

    def open(
        self,
        loop_id: str = LOOP_ID,
        *,
        interactive: bool = False,
        agents: dict[str, AgentCommand] | None = None,
        **options: Any,
    ) -> Loop:
        """The loop ``loop_id`` in this workspace, with an engine and a record of its writes."""
        instance = self.workspace(agents=agents, **options).instance(ccw_loop(), loop_id)
        loop = Loop(instance, Engine(instance, interactive=interactive))
        render = instance.store.render

        def recording_render(data: Any) -> str:
            text = render(data)
            loop.written.append(json.loads(text))
            return text

        instance.store.render = recording_render  # type: ignore[method-assign]
        return loop

    def context(self, loop_id: str = LOOP_ID, **options: Any) -> Context:
        """The context the engine passes to hooks of ``loop_id``."""
        return self.workspace(**options).instance(ccw_loop(), loop_id).context()

    def automatic_event(self, raw: dict[str, Any], **options: Any) -> str | None:
        """The event an automatic step takes on document ``raw`` (None: it waits for input).

        This is what ``fsm status`` reports as enabled and automatic; the engine takes the first.
        """
        self.write_document(raw)
        instance = self.workspace(**options).instance(ccw_loop(), raw["loop_id"])
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
