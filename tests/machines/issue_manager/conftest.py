"""Sample workspaces, stand-in agents and real-engine instances for the issue-manager tests.

``sample`` builds a workspace (issues file, solution files, stand-in agent scripts, fsm.toml).
``launch`` creates an instance of the machine in it with :mod:`fsm.testing` and returns a
:class:`Launched` (a :class:`fsm.testing.Driver`): run and command it, and read the files a user
reads in its work_dir. ``make_ctx``, ``apply``, ``new_doc`` and ``planned`` serve the unit tests
of single actions, guards and hooks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from fsm_machines.issue_manager import functions
from fsm_machines.issue_manager.model import IssueManagerState
from fsm_machines.issue_manager.options import IssueManagerOptions

from fsm.base.clock import SystemClock
from fsm.model.context import Context
from fsm.process.executor import AgentCommand
from fsm.testing import Driver, Harness, applied
from fsm.view.inspect import replay

MACHINE_YAML = Path(functions.__file__).with_name("machine.yaml")
INSTANCE_ID = "issue-manager-20260101T000000-0a1b2c3d"
RETRY_HINT = f"to retry: fsm retry issue-manager {INSTANCE_ID} [ISSUE...]"
"""How the reason of the test instance ends when an issue is failed, blocked or unplanned."""


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
        Harness(MACHINE_YAML, self.root).write_config(options, self.agents)


@pytest.fixture
def sample(tmp_path: Path) -> SampleWorkspace:
    """An empty sample workspace in ``tmp_path``."""
    return SampleWorkspace(tmp_path)


@pytest.fixture
def make_ctx(sample: SampleWorkspace) -> Callable[..., Context[IssueManagerOptions]]:
    """Build the Context of the test instance (with the stand-in agents registered so far);
    keyword arguments are options."""

    def build(**options: Any) -> Context[IssueManagerOptions]:
        harness = Harness(MACHINE_YAML, sample.root, agents=sample.agents)
        return harness.instance(INSTANCE_ID, **options).context(IssueManagerOptions)

    return build


def apply_update(
    doc: IssueManagerState, update: Any, phase: str | None = None
) -> IssueManagerState:
    """Apply ``update`` (and the new phase) to ``doc`` as the engine does, and validate it."""
    moved = {} if phase is None else {"phase": phase}
    return applied(doc, {**dict(update or {}), **moved})


@pytest.fixture
def apply() -> Callable[..., IssueManagerState]:
    """The update-applying helper of the action unit tests."""
    return apply_update


@pytest.fixture
def new_doc(make_ctx: Callable[..., Context]) -> Callable[..., IssueManagerState]:
    """Create a document through the create hook and start it (status running)."""

    def build(ctx: Context | None = None, **inputs: Any) -> IssueManagerState:
        ctx = ctx or make_ctx()
        doc = functions.registry.hooks["create_instance"](inputs, ctx)
        return apply_update(doc, {"status": "running"})

    return build


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


class Launched(Driver[IssueManagerState]):
    """An instance driven by the real engine, and the files a user reads in its work_dir."""

    @property
    def work_dir(self) -> Path:
        """The instance's folder: state.json and the files the machine writes beside it."""
        return self.instance.store.paths(self.instance.id).document.parent

    def read(self, name: str) -> Any:
        """A JSON file of the work_dir (``state.json``, ``execution-results.json``, ...)."""
        return json.loads((self.work_dir / name).read_text(encoding="utf-8"))

    def history(self) -> list[dict[str, Any]]:
        """``state-history.json``: one entry per save."""
        return list(self.read("state-history.json"))

    def report(self) -> str:
        """``final-report.md``."""
        return (self.work_dir / "final-report.md").read_text(encoding="utf-8")

    def listing(self, folder: str) -> list[str]:
        """The file names in ``snapshots/`` or ``solutions/``, sorted."""
        return sorted(p.name for p in (self.work_dir / folder).iterdir())

    def statuses(self) -> dict[str, str]:
        """Issue id -> status, as ``state.json`` has it."""
        return {key: issue["status"] for key, issue in self.data["issues"].items()}

    def audit(self) -> list[str]:
        """What disagrees among the saved files: the journal replay, the model, the history.

        The journal must replay to the document; ``state.json`` must validate; and
        ``state-history.json`` must hold one entry per save, with the phase of that save.
        """
        problems = list(replay(self.instance).problems)
        try:
            IssueManagerState.model_validate(self.data)
        except ValueError as exc:
            problems.append(f"state.json does not validate: {exc}")
        saves = [r["state"] for r in self.journal() if "doc_hash" in r]
        phases = [entry["phase"] for entry in self.history()]
        if phases != saves:
            problems.append(f"history phases {phases} != journaled saves {saves}")
        return problems


@pytest.fixture
def launch(sample: SampleWorkspace) -> Callable[..., Launched]:
    """Create the test instance in the sample workspace with the real engine's API.

    ``options`` go to ``[machine.issue-manager]`` in fsm.toml (with the stand-in agents as
    ``[agent.<tool>]``); other keyword arguments are the create inputs (``instance_id`` names
    another instance of the same workspace). The clock is simulated
    unless ``system_clock`` is set (for runs that share the instance with another process).
    """

    def start(
        options: dict[str, Any] | None = None,
        *,
        system_clock: bool = False,
        instance_id: str = INSTANCE_ID,
        **inputs: Any,
    ) -> Launched:
        sample.write_fsm_toml(**(options or {}))
        clock = SystemClock() if system_clock else None
        harness = Harness(MACHINE_YAML, sample.root, document=IssueManagerState, clock=clock)
        created = harness.create(inputs, instance_id=instance_id)
        return Launched(created.instance, IssueManagerState)

    return start
