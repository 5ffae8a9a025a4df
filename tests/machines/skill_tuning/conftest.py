"""Sample skill folders and the skill-tuning machine on the real engine, for its tests.

``make_skill`` writes a skill folder from a table of files, ``samples`` holds the sample tables
(``clean``, ``fixable``, ``judgement``), ``agent_script`` makes a scripted stand-in agent, and
``tuning`` is the machine in a test workspace (:class:`fsm.testing.Harness`): ``tune`` creates
an instance on a skill folder, ``context`` gives the context its actions get.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from fsm_machines.skill_tuning.diagnosis import trust
from fsm_machines.skill_tuning.model import TuningState
from fsm_machines.skill_tuning.options import TuningOptions
from fsm_machines.skill_tuning.skill import Skill, read_skill

from fsm.model.context import Context
from fsm.process.executor import AgentCommand
from fsm.testing import Driver, Harness

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


def ccw_skills() -> Path | None:
    """A folder of CCW's skills for the measurements on them: ``CCW_SKILLS`` (scripts/test.sh
    names the CCW skills it finds beside the checkout, as CI has them); None when it names no
    folder. The suite itself never reaches outside the repository."""
    named = os.environ.get("CCW_SKILLS")
    if named and Path(named).is_dir():
        return Path(named)
    return None


PROBE_SKILL = "---\nname: probe\n---\n# Probe skill\n"
"""The SKILL.md of the small skills the rule tests are made of."""


def phase(code: str, lang: str = "javascript", prose: str = "") -> str:
    """A phase file whose code block starts on line 4 (``code`` line 1 is file line 4)."""
    return f"# Phase\n\n```{lang}\n{code}\n```\n{prose}"


@pytest.fixture
def skill_of(make_skill: Callable[..., Path]) -> Callable[[dict[str, str]], Skill]:
    """Read a skill made of the probe SKILL.md plus the given files."""
    return lambda files: read_skill(make_skill({"SKILL.md": PROBE_SKILL, **files}))


def precision_table(path: Path, **precisions: float | None) -> Path:
    """Write a precision table (rule name, dots as ``__``, to its measured precision) to
    ``path`` and make the machine read it; return the path."""
    rules = {
        name.replace("__", "."): {"findings": 4, "matched": 0, "precision": value}
        for name, value in precisions.items()
    }
    path.write_text(
        yaml.safe_dump({"measured": "2026-01-01", "threshold": 0.9, "rules": rules}),
        encoding="utf-8",
    )
    return path


@pytest.fixture(autouse=True)
def every_rule_counted(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The machine's tests run with a precision table that marks no rule to review: they pin
    its mechanics, not the figures measured on CCW's skills (which change when the rules are
    measured again). A module that sets ``SHIPPED_PRECISION = True`` runs with the shipped
    table."""
    if getattr(request.module, "SHIPPED_PRECISION", False):
        return
    path = precision_table(tmp_path_factory.mktemp("precision") / "precision.yaml")
    monkeypatch.setattr(trust, "PRECISION_FILE", path)


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


Tuning = Harness[TuningState]
"""The skill-tuning machine on the real engine in a test workspace (the ``tuning`` fixture)."""


@pytest.fixture
def tuning(tmp_path: Path) -> Tuning:
    """The skill-tuning machine on the real engine in ``tmp_path``, documents read as
    TuningState."""
    return Harness(MACHINE_YAML, tmp_path, document=TuningState)


def tune(
    tuning: Tuning,
    skill: Path,
    *,
    agents: Mapping[str, AgentCommand] | None = None,
    options: Mapping[str, Any] | None = None,
    **inputs: Any,
) -> Driver[TuningState]:
    """A new instance on the skill folder ``skill`` (given relative to the workspace, as a user
    would), with these stand-in agents, options and more document inputs."""
    for tool, command in (agents or {}).items():
        tuning.add_agent(tool, command)
    root = tuning.root
    path = skill.relative_to(root).as_posix() if skill.is_relative_to(root) else skill
    return tuning.create(
        {"target_skill": {"path": str(path)}, **inputs},
        instance_id=INSTANCE_ID,
        **dict(options or {}),
    )


def context(tuning: Tuning, **options: Any) -> Context[TuningOptions]:
    """The context the engine gives the default instance's actions and hooks."""
    return tuning.instance(INSTANCE_ID, **options).context(TuningOptions)


@pytest.fixture
def samples() -> SimpleNamespace:
    """The sample skill tables: ``clean``, ``fixable`` and ``judgement``."""
    return SimpleNamespace(clean=CLEAN_SKILL, fixable=FIXABLE_SKILL, judgement=JUDGEMENT_SKILL)


@pytest.fixture
def agent_script(tmp_path: Path) -> Callable[[str], AgentCommand]:
    """Make a scripted stand-in agent from the body of a Python program."""
    return lambda body: write_agent(tmp_path, body)
