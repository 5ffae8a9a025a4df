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
from typing import Any

import pytest

from fsm.engine.instance import Instance, Workspace
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
    instance.store.paths(instance.id).document.chmod(0o600)
    code, output = _run(root, scenario)
    assert code in (0, 4), output
    assert stat.S_IMODE(instance.store.paths(instance.id).document.stat().st_mode) == 0o600
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


@pytest.mark.parametrize(
    ("umask", "document_mode"),
    [(0o022, 0o600), (0o022, 0o640), (0o077, 0o644), (0o002, 0o664)],
    ids=["private", "group", "umask-stricter", "group-writable"],
)
def test_a_next_version_has_the_documents_mode_from_its_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int, document_mode: int
) -> None:
    """The temporary file of a document's next version is created with the document's mode, so
    it is never more open than the document, not even while it is written; where the umask
    takes bits away, they are put back (the mode is kept on rewrite whatever the umask)."""
    import os

    from fsm.base import files

    document = tmp_path / "doc.json"
    document.write_text("{}")
    document.chmod(document_mode)
    modes_at_creation: list[int] = []
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        modes_at_creation.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    monkeypatch.setattr(files.os, "write", write)
    old_umask = os.umask(umask)
    try:
        tmp, fd, info = files.write_temporary_open(document, b'{"a": 1}', root=tmp_path)
    finally:
        os.umask(old_umask)
    os.close(fd)
    assert modes_at_creation[0] == document_mode & ~umask
    assert stat.S_IMODE(tmp.stat().st_mode) == stat.S_IMODE(info.st_mode) == document_mode
    assert (info.st_ino, info.st_dev) == (tmp.stat().st_ino, tmp.stat().st_dev)


def test_a_new_documents_first_version_honours_the_umask(tmp_path: Path) -> None:
    """No document yet: the file is created as any new file is (0666 less the umask)."""
    import os

    from fsm.base import files

    old_umask = os.umask(0o027)
    try:
        tmp, fd, _ = files.write_temporary_open(tmp_path / "new.json", b"{}", root=tmp_path)
    finally:
        os.umask(old_umask)
    os.close(fd)
    assert stat.S_IMODE(tmp.stat().st_mode) == 0o640
