"""Sample workspaces, a stand-in agent, and the smallest stand-in for the engine's step.

``loop_ws`` (a :class:`LoopWorkspace`) builds a tiny Python project with a test suite (optionally
with a bug), a git repository, task lists in both dashboard layouts, dashboard-written master files,
and a scripted stand-in agent that edits files according to rules matched against its prompt (so
fix tasks work without any network). ``Driver`` applies actions and the codec the way one engine
step does (dotted updates, validation, ``on_error`` on failure); the engine replaces it in
end-to-end tests.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog

from fsm.clock import SimulatedClock
from fsm.context import Context
from fsm.definition import MachineSpec, guard_name, parse_definition
from fsm.executor import AgentCommand, SubprocessExecutor
from machines.ccw_loop import functions
from machines.ccw_loop.model import LoopState
from machines.ccw_loop.options import LoopOptions

MACHINE_YAML = Path(functions.__file__).with_name("machine.yaml")
LOOP_ID = "loop-v2-20260101T000000-0a1b2c3d"
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"

CALC_OK = "def add(a, b):\n    return a + b\n"
CALC_BUG = "def add(a, b):\n    return a - b\n"
CALC_TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_add_zero():\n    assert add(0, 0) == 0\n"
)
FIX_ADD = {"when": "test_add", "file": "calc.py", "replace": "a - b", "with": "a + b"}
"""Stand-in agent rule: a prompt about test_add repairs the subtraction bug."""

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
        """A master file as the dashboard writes it (status created, no skill_state)."""
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
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / f"{loop_id}.json").write_text(json.dumps(raw, indent=2))
        return raw

    def context(
        self,
        loop_id: str = LOOP_ID,
        *,
        agents: dict[str, AgentCommand] | None = None,
        **options: Any,
    ) -> Context:
        """The Context an engine would pass for ``loop_id`` (tests run with ``PYTEST``)."""
        opts = LoopOptions.model_validate({"test_command": PYTEST, **options})
        return Context(
            machine="ccw-loop",
            instance_id=loop_id,
            workspace=self.root,
            document_path=self.state_dir / f"{loop_id}.json",
            meta_dir=self.state_dir / f"{loop_id}.fsm",
            options=opts,
            clock=self.clock,
            log=structlog.get_logger(),
            executor=SubprocessExecutor(self.root, agents=agents or {}, default_timeout=60),
        )

    def progress(self, name: str, loop_id: str = LOOP_ID) -> Path:
        """A file of the loop's progress folder."""
        return self.state_dir / f"{loop_id}.progress" / name


@pytest.fixture
def loop_ws(tmp_path: Path) -> LoopWorkspace:
    """An empty sample workspace (``write_project`` fills it)."""
    root = tmp_path / "ws"
    root.mkdir()
    return LoopWorkspace(root, tmp_path / "bin")


@pytest.fixture
def drive() -> type[Driver]:
    """The engine stand-in: ``drive(raw, ctx)`` makes a :class:`Driver`."""
    return Driver


@pytest.fixture
def started(loop_ws: LoopWorkspace) -> Any:
    """``started(**options)``: a dashboard-created loop, started, in a project without bugs."""

    def make(
        *, bug: bool = False, agents: dict[str, AgentCommand] | None = None, **options: Any
    ) -> Driver:
        if not (loop_ws.root / "calc.py").exists():
            loop_ws.write_project(bug=bug)
        raw = loop_ws.new_loop(**options.pop("fields", {}))
        driver = Driver(raw, loop_ws.context(raw["loop_id"], agents=agents, **options))
        driver.control("start")
        return driver

    return make


def load_spec() -> MachineSpec:
    """The parsed machine.yaml."""
    spec, _, problems = parse_definition(MACHINE_YAML.read_text())
    assert spec is not None, problems
    return spec


def apply_update(raw: dict[str, Any], update: Any) -> dict[str, Any]:
    """``raw`` with each dotted path of ``update`` replaced (models dumped to JSON)."""
    result = copy.deepcopy(raw)
    for path, value in dict(update or {}).items():
        *parents, leaf = path.split(".")
        node = result
        for key in parents:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[leaf] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    return result


class Driver:
    """One loop document driven by the machine's own functions, as an engine step would."""

    def __init__(self, raw: dict[str, Any], ctx: Context) -> None:
        self.raw = raw
        self.ctx = ctx
        self.spec = load_spec()
        self.codec = functions.registry.codecs["loop_phase"]
        self.taken: list[str] = []

    @property
    def doc(self) -> LoopState:
        """The document as the model reads it."""
        return LoopState.model_validate(self.raw)

    @property
    def state(self) -> str:
        """The FSM state the codec reads."""
        return self.codec.read(self.doc)

    def holds(self, ref: str) -> bool:
        """Evaluate a guard reference (``name`` or ``not name``)."""
        name, negated = guard_name(ref)
        return functions.registry.guards[name].func(self.doc, self.ctx) != negated

    def fire(self, event: str) -> str:
        """Take the first transition of ``event`` from the current state whose guards hold."""
        for spec in self.spec.transitions:
            if (
                spec.event == event
                and self._applies(spec.sources)
                and all(self.holds(g) for g in spec.guards)
            ):
                self._take(spec.event, spec.actions, spec.dest)
                return self.state
        raise AssertionError(f"{event} not enabled in {self.state}")

    def choose(self) -> str | None:
        """The event of the first automatic transition whose guards hold (None: waiting)."""
        for spec in self.spec.transitions:
            if (
                spec.auto
                and self._applies(spec.sources)
                and all(self.holds(g) for g in spec.guards)
            ):
                return spec.event
        return None

    def step(self) -> str | None:
        """Take the first automatic transition whose guards hold; its event (None: waiting)."""
        for spec in self.spec.transitions:
            if (
                spec.auto
                and self._applies(spec.sources)
                and all(self.holds(g) for g in spec.guards)
            ):
                self._take(spec.event, spec.actions, spec.dest)
                return spec.event
        return None

    def run(self, limit: int = 40) -> list[str]:
        """Step until a final state or no automatic transition; the events taken."""
        finals = {name for name, s in self.spec.states.items() if s.final}
        events: list[str] = []
        while self.state not in finals and len(events) < limit:
            event = self.step()
            if event is None:
                break
            events.append(event)
        return events

    def control(self, command: str) -> None:
        """Apply a control command (start, pause, resume, stop) as the control plane would."""
        assert self.spec.control is not None
        spec = self.spec.control.commands[command]
        assert self.raw["status"] in spec.sources, f"{command} refused in {self.raw['status']}"
        raw = apply_update(self.raw, {"status": spec.dest})
        ctx = self.ctx.for_transition(command, self.state, spec.state or self.state)
        for name in spec.actions:
            raw = apply_update(
                raw, functions.registry.actions[name](LoopState.model_validate(raw), ctx)
            )
        if spec.state is not None:
            raw = apply_update(raw, self.codec.write(LoopState.model_validate(raw), spec.state))
        self.raw = raw

    def _applies(self, sources: list[str]) -> bool:
        return sources == ["*"] or self.state in sources

    def _take(self, event: str, actions: list[str], dest: str) -> None:
        ctx = self.ctx.for_transition(event, self.state, dest)
        before = self.raw
        try:
            raw = before
            for name in actions:
                raw = apply_update(
                    raw, functions.registry.actions[name](LoopState.model_validate(raw), ctx)
                )
            raw = apply_update(raw, self.codec.write(LoopState.model_validate(raw), dest))
            LoopState.model_validate(raw)
        except Exception as exc:
            hook = functions.registry.hooks["record_error"]
            self.raw = apply_update(before, hook(LoopState.model_validate(before), ctx, exc))
            self.taken.append(f"{event}!")
            return
        self.raw = raw
        self.taken.append(event)
        self.ctx.document_path.write_text(json.dumps(raw, indent=2))
