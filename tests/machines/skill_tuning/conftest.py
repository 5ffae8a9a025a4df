"""Sample skill folders and a stand-in for the engine, for the skill-tuning tests.

Fixtures, for reuse by end-to-end scenario tests: ``make_skill`` writes a skill folder from a
table of files, ``samples`` holds the sample tables (``clean``, ``fixable``, ``judgement``),
``tuning_ctx`` builds a real ``fsm.context.Context`` for one instance, ``write_agent`` a scripted
stand-in agent, and ``engine`` is the smallest stand-in for the engine (dotted updates, codec,
first enabled automatic transition, ``on_error``) until the engine drives instances itself.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import structlog
from pydantic import BaseModel

from fsm.clock import SimulatedClock
from fsm.context import Context
from fsm.definition import guard_name, parse_definition
from fsm.executor import AgentCommand, SubprocessExecutor
from machines.skill_tuning.functions import registry
from machines.skill_tuning.model import TuningState
from machines.skill_tuning.options import TuningOptions

MACHINE_YAML = Path(__file__).parents[3] / "machines" / "skill_tuning" / "machine.yaml"
INSTANCE_ID = "skill-tuning-20260101T000000-0000abcd"

JS = "```javascript"
END = "```"


def md(text: str) -> str:
    """Dedented markdown with a trailing newline."""
    return textwrap.dedent(text).lstrip("\n")


SKILL_MD = md(
    """
    ---
    name: sample-skill
    description: A sample skill for the tests.
    ---
    # Sample skill

    Runs its phases in order: collect, analyse, report.
    """
)

CONSTRAINTS = md(
    """
    ## Constraints

    - Only read files under src/
    - Never modify the input files
    """
)

CLEAN_SKILL: dict[str, str] = {
    "SKILL.md": SKILL_MD,
    "phases/01-collect.md": md(
        f"""
        # Phase 1: Collect

        {{constraints}}
        ## Steps

        {JS}
        try {{
          const result = Task({{ subagent_type: 'explorer', prompt: `List files in ${{dir}}` }});
          if (!result) throw new Error('explorer returned nothing');
          state.history.push(result);
          state.history = state.history.slice(-10);
        }} catch (error) {{
          state.errors.push(error.message);
        }}
        {END}

        Save a checkpoint of the state before phase 2.
        """
    ).replace("{constraints}", CONSTRAINTS),
    "phases/02-analyse.md": md(
        f"""
        # Phase 2: Analyse

        {{constraints}}
        {JS}
        const data = JSON.parse(Read(`${{workDir}}/files.json`));
        if (!Array.isArray(data.files)) throw new Error('schema: files must be a list');
        {END}

        Save a checkpoint of the state before phase 3.
        """
    ).replace("{constraints}", CONSTRAINTS),
    "phases/03-report.md": md(
        """
        # Phase 3: Report

        {constraints}
        Write the report to the work dir.
        """
    ).replace("{constraints}", CONSTRAINTS),
    "specs/quality.md": md(
        """
        # Quality

        A report lists every file read.
        """
    ),
}
"""A skill with no problem any rule finds."""

FIXABLE_SKILL: dict[str, str] = {
    **CLEAN_SKILL,
    "phases/01-collect.md": md(
        f"""
        # Phase 1: Collect

        {{constraints}}
        {JS}
        try {{
          const result = Task({{ subagent_type: 'explorer', prompt: 'List the files' }});
          if (!result) throw new Error('explorer returned nothing');
          state.history.push(result);
        }} catch (error) {{
          state.errors.push(error.message);
        }}
        {END}

        Save a checkpoint of the state before phase 2.
        """
    ).replace("{constraints}", CONSTRAINTS),
    "phases/02-analyse.md": md(
        f"""
        # Phase 2: Analyse

        {JS}
        const data = JSON.parse(Read(`${{workDir}}/files.json`));
        {END}
        """
    ),
}
"""Problems with mechanical fixes only: unbounded history (high, phase 1), constraints not
carried (high), no checkpoint (medium) and unvalidated JSON (medium) in phase 2. Score 60."""

JUDGEMENT_SKILL: dict[str, str] = {
    "SKILL.md": SKILL_MD,
    "phases/01-explore.md": md(
        f"""
        # Phase 1: Explore

        {JS}
        const found = Task({{ subagent_type: 'explorer', prompt: 'List the files' }});
        if (!found) throw new Error('explorer returned nothing');
        {END}
        """
    ),
    "phases/02-plan.md": md(
        f"""
        # Phase 2: Plan

        {JS}
        const plan = Task({{ subagent_type: 'planner', prompt: 'Plan the work' }});
        if (!plan) throw new Error('planner returned nothing');
        {END}
        """
    ),
}
"""Two agent calls without error handling (two high issues, score 70, gate review): fixes that
need judgement, for the fix agent."""


@pytest.fixture
def make_skill(tmp_path: Path) -> Callable[..., Path]:
    """Write a skill folder from a table of relative paths to texts; return its path."""

    def build(files: Mapping[str, str], name: str = "sample-skill") -> Path:
        root = tmp_path / ".claude" / "skills" / name
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        root.mkdir(parents=True, exist_ok=True)
        return root

    return build


def write_agent(tmp_path: Path, body: str) -> AgentCommand:
    """A scripted stand-in agent: a Python program run in the skill folder with the prompt."""
    script = tmp_path / "agent.py"
    script.write_text(md(body), encoding="utf-8")
    return AgentCommand((sys.executable, str(script), "{prompt}"))


@pytest.fixture
def tuning_ctx(tmp_path: Path) -> Callable[..., Context]:
    """A context for one instance in ``tmp_path`` with the given options and agents."""

    def build(
        options: TuningOptions | None = None, agents: Mapping[str, AgentCommand] | None = None
    ) -> Context:
        document = tmp_path / ".workflow" / ".scratchpad" / INSTANCE_ID / "state.json"
        document.parent.mkdir(parents=True, exist_ok=True)
        return Context(
            machine="skill-tuning",
            instance_id=INSTANCE_ID,
            workspace=tmp_path,
            document_path=document,
            meta_dir=document.parent / "fsm",
            options=options or TuningOptions(),
            clock=SimulatedClock(tick=1.0),
            log=structlog.get_logger(),
            executor=SubprocessExecutor(tmp_path, agents=dict(agents or {})),
        )

    return build


def apply_update(doc: TuningState, update: Mapping[str, Any] | None) -> TuningState:
    """Apply dotted-path updates to ``doc`` and validate the result, as the engine does."""
    data = doc.model_dump(mode="json")
    for path, value in (update or {}).items():
        *parents, leaf = path.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[leaf] = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return TuningState.model_validate(json.loads(json.dumps(data)))


def _definition() -> Any:
    spec, _loaded, problems = parse_definition(MACHINE_YAML.read_text(encoding="utf-8"))
    assert spec is not None, problems
    return spec


def step(doc: TuningState, ctx: Context) -> tuple[TuningState, str | None]:
    """One automatic step: the first transition from the current state whose guards all hold.

    Returns the new document and the event taken (None when no transition is enabled).
    """
    spec = _definition()
    codec = registry.codecs["tuning_state"]
    state = codec.read(doc)
    if spec.states[state].final:
        return doc, None
    for transition in spec.transitions:
        if transition.source != "*" and state not in transition.sources:
            continue
        if not all(_holds(ref, doc, ctx) for ref in transition.guards):
            continue
        bound = ctx.for_transition(transition.event, state, transition.dest)
        try:
            new = doc
            for name in transition.actions:
                new = apply_update(new, registry.actions[name](new, bound))
            return apply_update(new, codec.write(new, transition.dest)), transition.event
        except Exception as exc:
            return apply_update(doc, registry.hooks["on_error"](doc, bound, exc)), transition.event
    return doc, None


def _holds(ref: str, doc: TuningState, ctx: Context) -> bool:
    name, negated = guard_name(ref)
    return registry.guards[name].func(doc, ctx) != negated


def drive(doc: TuningState, ctx: Context, max_steps: int = 80) -> tuple[TuningState, list[str]]:
    """Step until no transition is enabled; return the document and the events taken."""
    events: list[str] = []
    for _ in range(max_steps):
        doc, event = step(doc, ctx)
        if event is None:
            return doc, events
        events.append(event)
    raise AssertionError(f"no end after {max_steps} steps: {events[-12:]}")


def new_instance(ctx: Context, skill: Path, **inputs: Any) -> TuningState:
    """A started instance (status running) for the skill at ``skill``, made by the create hook."""
    doc: TuningState = registry.hooks["create"]({"target_skill.path": str(skill), **inputs}, ctx)
    return apply_update(doc, {"status": "running"})


@pytest.fixture
def samples() -> SimpleNamespace:
    """The sample skill tables: ``clean``, ``fixable`` and ``judgement``."""
    return SimpleNamespace(clean=CLEAN_SKILL, fixable=FIXABLE_SKILL, judgement=JUDGEMENT_SKILL)


@pytest.fixture
def engine() -> SimpleNamespace:
    """The engine stand-in: ``apply``, ``step``, ``drive`` and ``new`` (create + start)."""
    return SimpleNamespace(apply=apply_update, step=step, drive=drive, new=new_instance)


@pytest.fixture
def agent_script(tmp_path: Path) -> Callable[[str], AgentCommand]:
    """Make a scripted stand-in agent from the body of a Python program."""
    return lambda body: write_agent(tmp_path, body)
