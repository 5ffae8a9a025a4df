"""Sample workspaces and stand-in agents for the issue-manager tests.

``sample`` builds a workspace (issues file, solution files, stand-in agent scripts, fsm.toml);
``make_ctx`` builds the Context an engine would pass; ``apply`` and ``fire`` are the smallest
stand-in for the engine's step (apply dotted updates, validate, save, call ``after_save``), to be
replaced by the real engine in end-to-end tests.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import structlog

from fsm.clock import SimulatedClock
from fsm.context import Context
from fsm.definition import parse_definition
from fsm.executor import AgentCommand, SubprocessExecutor
from machines.issue_manager import functions
from machines.issue_manager.model import IssueManagerState
from machines.issue_manager.options import IssueManagerOptions

MACHINE_YAML = Path(functions.__file__).with_name("machine.yaml")
INSTANCE_ID = "issue-manager-20260101T000000-0a1b2c3d"


def command_task(task_id: str, command: str, *depends_on: str, title: str = "") -> dict[str, Any]:
    """A solution task that runs ``command`` through bash."""
    return {
        "id": task_id,
        "title": title or f"task {task_id}",
        "command": command,
        "depends_on": list(depends_on),
        "acceptance": {"criteria": [f"{task_id} exits 0"]},
    }


def agent_task(task_id: str, prompt: str, *depends_on: str) -> dict[str, Any]:
    """A solution task without a command: the execution agent gets ``prompt``."""
    return {
        "id": task_id,
        "title": f"task {task_id}",
        "prompt": prompt,
        "depends_on": list(depends_on),
    }


class SampleWorkspace:
    """A workspace with ``.workflow/issues/issues.jsonl`` and ``.workflow/issues/solutions/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.issues_path = root / ".workflow" / "issues" / "issues.jsonl"
        self.solutions_dir = root / ".workflow" / "issues" / "solutions"
        self.agents: dict[str, AgentCommand] = {}
        self.issues_path.parent.mkdir(parents=True, exist_ok=True)

    def add_issue(
        self, issue_id: str, title: str = "", status: str = "registered", **extra: Any
    ) -> None:
        """Append one issue line (compact JSON, as ``ccw issue`` writes it)."""
        record = {"id": issue_id, "title": title or f"Issue {issue_id}", "status": status, **extra}
        self.append_line(json.dumps(record, separators=(",", ":")))

    def append_line(self, line: str) -> None:
        """Append a raw line to the issues file (malformed ones too)."""
        with self.issues_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def add_solution(
        self,
        issue_id: str,
        tasks: Iterable[dict[str, Any]],
        n: int = 1,
        bound: bool | None = None,
        **extra: Any,
    ) -> str:
        """Append a solution ``SOL-{issue_id}-{n}`` to the issue's solution file; return its id."""
        solution: dict[str, Any] = {
            "id": f"SOL-{issue_id}-{n}",
            "description": f"solution {n} of {issue_id}",
            "tasks": list(tasks),
            **extra,
        }
        if bound is not None:
            solution["is_bound"] = bound
        self.solutions_dir.mkdir(parents=True, exist_ok=True)
        with (self.solutions_dir / f"{issue_id}.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(solution) + "\n")
        return str(solution["id"])

    def issue_lines(self) -> list[dict[str, Any]]:
        """The issues file, parsed."""
        text = self.issues_path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def statuses(self) -> dict[str, str]:
        """Issue id -> status, as the issues file says."""
        return {line["id"]: line["status"] for line in self.issue_lines()}

    def script_agent(self, tool: str, body: str) -> Path:
        """Register a stand-in agent ``tool``: a Python script with ``prompt = sys.argv[1]``.

        Every prompt it receives is appended to ``{tool}-prompts.jsonl`` before ``body`` runs.
        """
        script = self.root / f"agent_{tool}.py"
        log = self.root / f"{tool}-prompts.jsonl"
        script.write_text(
            "import json, sys\n"
            "prompt = sys.argv[1]\n"
            f"with open({str(log)!r}, 'a', encoding='utf-8') as log:\n"
            "    log.write(json.dumps(prompt) + '\\n')\n" + body,
            encoding="utf-8",
        )
        self.agents[tool] = AgentCommand((sys.executable, str(script), "{prompt}"))
        return script

    def planning_agent(self, tool: str, tasks: list[dict[str, Any]]) -> None:
        """A planner that answers with a solution ``SOL-{issue}-1`` made of ``tasks``."""
        self.script_agent(
            tool,
            "import re\n"
            "issue = re.search(r'issue (\\S+):', prompt).group(1)\n"
            f"tasks = json.loads({json.dumps(json.dumps(tasks))})\n"
            "print('Here is the plan:')\n"
            "print('```json')\n"
            "print(json.dumps({'id': f'SOL-{issue}-1', 'description': 'planned', "
            "'tasks': tasks}))\n"
            "print('```')\n",
        )

    def prompts(self, tool: str) -> list[str]:
        """The prompts the stand-in agent ``tool`` received, in order."""
        log = self.root / f"{tool}-prompts.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]

    def write_fsm_toml(self, **options: Any) -> None:
        """Write fsm.toml: the stand-in agents as ``[agent.<tool>]`` tables, and ``options``
        as the ``[machine.issue-manager]`` table."""
        lines = []
        for tool, command in sorted(self.agents.items()):
            argv = ", ".join(json.dumps(part) for part in command.command)
            lines += [f"[agent.{tool}]", f"command = [{argv}]", ""]
        if options:
            lines.append("[machine.issue-manager]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in sorted(options.items())]
        (self.root / "fsm.toml").write_text("\n".join(lines), encoding="utf-8")


@pytest.fixture
def sample(tmp_path: Path) -> SampleWorkspace:
    """An empty sample workspace in ``tmp_path``."""
    return SampleWorkspace(tmp_path)


@pytest.fixture
def make_ctx(sample: SampleWorkspace) -> Callable[..., Context]:
    """Build the Context of the test instance; keyword arguments are options."""

    def build(**options: Any) -> Context:
        document = sample.root / ".workflow" / ".scratchpad" / INSTANCE_ID / "state.json"
        return Context(
            machine="issue-manager",
            instance_id=INSTANCE_ID,
            workspace=sample.root,
            document_path=document,
            meta_dir=document.parent / "fsm",
            options=IssueManagerOptions(**options),
            clock=SimulatedClock(tick=1.0),
            log=structlog.get_logger(),
            executor=SubprocessExecutor(sample.root, agents=dict(sample.agents)),
        )

    return build


def apply_update(
    doc: IssueManagerState, update: Any, phase: str | None = None
) -> IssueManagerState:
    """Apply dotted-path ``update`` (and the new phase) to ``doc`` and validate the result."""
    data = copy.deepcopy(doc.model_dump(mode="json", exclude_unset=False))
    for path, value in dict(update or {}).items():
        *parents, last = path.split(".")
        target = data
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = json.loads(json.dumps(value, default=lambda m: m.model_dump(mode="json")))
    if phase is not None:
        data["phase"] = phase
    return IssueManagerState.model_validate(data)


@pytest.fixture
def apply() -> Callable[..., IssueManagerState]:
    """The update-applying helper as a fixture."""
    return apply_update


def _transitions() -> list[Any]:
    spec, _, problems = parse_definition(MACHINE_YAML.read_text(encoding="utf-8"))
    assert spec is not None, problems
    return list(spec.transitions)


def _holds(ref: str, doc: IssueManagerState, ctx: Context) -> bool:
    name, negated = (ref[4:], True) if ref.startswith("not ") else (ref, False)
    return functions.registry.guards[name].func(doc, ctx) is not negated


def fire_step(
    doc: IssueManagerState, ctx: Context, event: str | None = None
) -> tuple[str, IssueManagerState]:
    """One step as the engine takes it: the named (or first enabled) transition, saved."""
    if doc.status != "running":
        raise LookupError(f"the instance is {doc.status}: no step runs")
    for spec in _transitions():
        if (
            (event is None or spec.event == event)
            and doc.phase in spec.sources
            and all(_holds(g, doc, ctx) for g in spec.guards)
        ):
            step_ctx = ctx.for_transition(spec.event, doc.phase, spec.dest)
            for name in spec.actions:
                doc = apply_update(doc, functions.registry.actions[name](doc, step_ctx))
            doc = apply_update(doc, {}, phase=spec.dest)
            ctx.document_path.parent.mkdir(parents=True, exist_ok=True)
            ctx.document_path.write_text(doc.model_dump_json(indent=2), encoding="utf-8")
            functions.registry.hooks["record_history"](doc, step_ctx)
            return spec.event, doc
    raise LookupError(f"no transition enabled from {doc.phase} (event {event})")


@pytest.fixture
def new_doc(make_ctx: Callable[..., Context]) -> Callable[..., IssueManagerState]:
    """Create a document through the create hook and start it (status running)."""

    def build(ctx: Context | None = None, **inputs: Any) -> IssueManagerState:
        ctx = ctx or make_ctx()
        doc = functions.registry.hooks["create_instance"](inputs, ctx)
        return apply_update(doc, {"status": "running"})

    return build


def run_steps(
    doc: IssueManagerState, ctx: Context, max_steps: int = 50
) -> tuple[list[str], IssueManagerState]:
    """Step until a final phase, a non-running status or ``max_steps``; return events and doc."""
    events: list[str] = []
    while doc.phase != "complete" and doc.status == "running" and len(events) < max_steps:
        event, doc = fire_step(doc, ctx)
        events.append(event)
    return events, doc


@pytest.fixture
def engine() -> SimpleNamespace:
    """The engine stand-ins together: ``apply``, ``fire`` (one step), ``run`` (until done)."""
    return SimpleNamespace(apply=apply_update, fire=fire_step, run=run_steps)


@pytest.fixture
def planned(new_doc: Callable[..., IssueManagerState]) -> Callable[[Context], IssueManagerState]:
    """A started document after init, one list and the planning of every selected issue."""
    actions = functions.registry.actions
    has_planning_issue = functions.registry.guards["has_planning_issue"].func

    def build(ctx: Context) -> IssueManagerState:
        doc = new_doc(ctx)
        doc = apply_update(doc, actions["initialize"](doc, ctx), phase="listing")
        doc = apply_update(doc, actions["list_issues"](doc, ctx))
        while has_planning_issue(doc, ctx):
            doc = apply_update(doc, actions["plan_next_issue"](doc, ctx), phase="planning")
        return doc

    return build
