"""Privacy, for every bundled machine: a document made private stays private, and a secret put in
an agent's command line in fsm.toml ends up in no file of the workspace.

The secret is an argument of the agent's command (``--api-key=...``), the way people pass tokens
to command-line agents; the stand-in agents print every argument they got, as a chatty agent
would, so the secret reaches fsm through the agent's output too.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsm.instance import Instance, Workspace
from tests.guarantees.forked import fork_fsm, wait_child
from tests.guarantees.scenarios import SCENARIOS, Scenario
from tests.guarantees.waiting import DEADLINE, memory_folder

SECRET = "sk-guard-5EC2E7-a9f3c1"
CHATTY = 'echo "agent called with: $*"\necho called >> agent-calls\n'


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """The tests' folder, in memory where possible (see :func:`memory_folder`)."""
    yield from memory_folder()


def _run(root: Path, scenario: Scenario) -> tuple[int | None, str]:
    output = root.parent / f"{root.name}.out"
    argv = ["run", str(scenario.machine_path), scenario.instance_id]
    code = wait_child(fork_fsm(root, argv, output), DEADLINE)
    return code, output.read_text()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_private_document_stays_private(tmp_path: Path, name: str) -> None:
    """A document made ``chmod 600`` is still 600 after every step of a whole run."""
    scenario = SCENARIOS[name]
    root = tmp_path / "ws"
    instance = scenario.create(root)
    instance.paths.document.chmod(0o600)
    code, output = _run(root, scenario)
    assert code in (0, 4), output
    assert stat.S_IMODE(instance.paths.document.stat().st_mode) == 0o600
    steps = [r for r in instance.journal.read().records if r["kind"] == "transition"]
    assert len(steps) >= 3


def _ccw_loop(root: Path) -> Scenario:
    scenario = SCENARIOS["ccw-loop"]
    agent = root / "bin" / "fix-agent"
    agent.write_text(agent.read_text().replace("case ", CHATTY + "case ", 1))
    toml = (root / "fsm.toml").read_text()
    (root / "fsm.toml").write_text(
        toml.replace('"{prompt}"]', f'"{{prompt}}", "--api-key={SECRET}"]')
    )
    return scenario


def _issue_manager(root: Path) -> Scenario:
    toml = (root / "fsm.toml").read_text()
    (root / "fsm.toml").write_text(
        toml.replace('"{prompt}"]', f'"{{prompt}}", "--api-key={SECRET}"]')
    )
    plan = root / "plan_agent.py"
    plan.write_text(
        plan.read_text().replace(
            "def main(",
            'print("agent called with:", " ".join(sys.argv[1:]))\n'
            'open("agent-calls", "a").write("called\\n")\n\n\ndef main(',
            1,
        )
    )
    return SCENARIOS["issue-manager"]


def _skill_tuning(root: Path) -> Scenario:
    # the agent runs in the skill's folder: its script and what it notes are named in full
    (root / "agent.sh").write_text(CHATTY.replace("agent-calls", str(root / "agent-calls")))
    command = json.dumps(["bash", str(root / "agent.sh"), "{prompt}", f"--api-key={SECRET}"])
    (root / "fsm.toml").write_text(
        f'[machine.skill-tuning]\nfix_tool = "codex"\n\n[agent.codex]\ncommand = {command}\n'
    )
    return SCENARIOS["skill-tuning"]


AGENT_USERS = {
    "ccw-loop": _ccw_loop,
    "issue-manager": _issue_manager,
    "skill-tuning": _skill_tuning,
}


@pytest.mark.parametrize("name", list(AGENT_USERS))
def test_an_agents_secret_reaches_no_file(tmp_path: Path, name: str) -> None:
    """After a whole run whose agent got a secret on its command line (and printed it), no file
    under the workspace holds the secret but fsm.toml, where the user put it."""
    root = tmp_path / "ws"
    scenario = SCENARIOS[name]
    root.mkdir()
    scenario.build(root)
    scenario = AGENT_USERS[name](root)
    inputs = dict(scenario.inputs)
    if name == "skill-tuning":  # the skill whose fixes need judgement: they go to the agent
        inputs = {"target_skill": {"path": "unfixable-skill"}}
    instance: Instance = Workspace(root).instance(scenario.machine(), scenario.instance_id)
    instance.create(inputs)
    code, output = _run(root, scenario)
    assert code in (0, 4), output
    assert (root / "agent-calls").exists(), "the agent was never called: the test proves nothing"
    holding = [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    ]
    assert holding == ["fsm.toml"], holding
    if name == "ccw-loop":  # the agent's output is kept, with the secret scrubbed from it
        develop = next(root.rglob("develop.md")).read_text()
        assert "agent called with" in develop
    assert SECRET not in output
