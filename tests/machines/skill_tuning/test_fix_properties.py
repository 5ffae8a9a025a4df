"""A fix is kept only when the skill is fixed, not when the rule went quiet; nothing is written
outside the workspace without the user's say; backups are no more readable than the skill or
the umask allow. Each case on real engine runs, with a stand-in fix agent."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fsm_machines.skill_tuning.backup import tree_bytes

from fsm.process.executor import AgentCommand
from tests.conftest import CliResult
from tests.machines.skill_tuning.conftest import MACHINE_YAML, Tuning, md, tune

FENCE = "```"


def _phase(title: str, prompt: str) -> str:
    return md(
        f"""
        # {title}

        ## Steps

        {FENCE}bash
        ccw cli -p "{prompt}" --tool gemini --mode analysis
        {FENCE}

        The answer has this shape:

        {FENCE}json
        {{"summary": "one line", "risks": []}}
        {FENCE}
        """
    )


CLI_SKILL: dict[str, str] = {
    "SKILL.md": md(
        """
        ---
        name: cli-skill
        ---
        # CLI skill

        Runs its phases in order; the checklist is in [checklist](specs/checklist.md).
        """
    ),
    "phases/01-ask.md": _phase("Phase 1: Ask", "Summarise the change"),
    "phases/02-check.md": _phase("Phase 2: Check", "List the risks of the change"),
    "specs/checklist.md": "# Checklist\n\n- Every risk has an owner.\n",
}
"""Two phases, each with an agent CLI call nothing handles: two high issues, gate review."""

PROSE = (
    "If the CLI call fails or times out, record the failure in the state's errors, retry it "
    "once, then skip this step and say so in the report."
)

_EDITS = {
    "comment": "text = text.replace('ccw cli', '# try\\nccw cli', 1)",
    "empty-catch": (
        "start = text.index('ccw cli'); end = text.index('\\n', start)\n"
        "text = text[:start] + 'try {\\n  ' + text[start:end] + '\\n} catch {}' + text[end:]"
    ),
    "prose": (
        f"text = text.replace('```\\n\\nThe answer', {'```' + chr(10) * 2 + PROSE!r} "
        "+ '\\n\\nThe answer', 1)"
    ),
}


def fix_agent(edit: str, breakage: str = "") -> str:
    """A stand-in fix agent: it edits the phase its prompt names with ``edit`` (a key of
    ``_EDITS``), then applies the Python ``breakage`` to that text."""
    return (
        "import pathlib, re, sys\n"
        "target = pathlib.Path(re.search(r'in (phases/[\\w./-]+\\.md)', sys.argv[1]).group(1))\n"
        "text = target.read_text()\n"
        f"{_EDITS[edit]}\n"
        f"{breakage}\n"
        "target.write_text(text)\n"
    )


@pytest.fixture
def cli_skill(make_skill: Callable[..., Path]) -> Path:
    """The CLI skill in the test workspace."""
    return make_skill(CLI_SKILL, name="cli-skill")


def _run_with(
    tuning: Tuning, root: Path, agent_script: Callable[[str], AgentCommand], body: str
) -> Tuning:
    agent = agent_script(body)
    instance = tune(tuning, root, agents={"codex": agent}, options={"fix_tool": "codex"})
    instance.run(max_steps=60)
    return instance  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        pytest.param(
            "comment",
            "(agent.call_without_error_handling) is still reported in phases/01-ask.md",
            id="a-try-comment",
        ),
        pytest.param(
            "empty-catch",
            "phases/01-ask.md:6: the bash block no longer parses: ",
            id="an-empty-catch-in-bash",
        ),
    ],
)
def test_a_token_that_silences_the_rule_is_no_fix(
    edit: str,
    reason: str,
    cli_skill: Path,
    tuning: Tuning,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """An agent 'fix' that adds a ``# try`` comment, or an empty ``catch {}`` around the call in
    a bash block (a syntax error there), is rolled back with the reason and the skill gets its
    bytes back; the run ends failed, not completed."""
    original = tree_bytes(cli_skill)
    instance = _run_with(tuning, cli_skill, agent_script, fix_agent(edit))
    doc = instance.doc  # type: ignore[attr-defined]
    first = doc.applied_fixes[0]
    assert first.verification_result == "rolled_back"
    assert reason in (first.failure_reason or "")
    assert all(r.verification_result == "rolled_back" for r in doc.applied_fixes)
    assert tree_bytes(cli_skill) == original
    assert doc.status == "failed"


def test_a_prose_fix_that_says_what_to_do_on_failure_is_kept(
    cli_skill: Path, tuning: Tuning, agent_script: Callable[[str], AgentCommand]
) -> None:
    """A paragraph right after the call saying what to do when it fails or times out handles
    the failure: the fix is kept, its notes say how the call is handled, and with one high issue
    left the gate passes (85/100) and the run completes."""
    instance = _run_with(tuning, cli_skill, agent_script, fix_agent("prose"))
    doc = instance.doc  # type: ignore[attr-defined]
    assert [(r.fix_id, r.verification_result) for r in doc.applied_fixes] == [("FIX-001", "pass")]
    notes = doc.applied_fixes[0].verification_notes or []
    assert any("its section says what to do on failure" in note for note in notes), notes
    assert (doc.status, doc.quality_gate, doc.quality_score) == ("completed", "pass", 85)
    assert [i.location.file for i in doc.issues] == ["phases/02-check.md"]
    assert PROSE in (cli_skill / "phases/01-ask.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        pytest.param(
            "text = text.replace('\"risks\": []}', '\"risks\": [],}')",
            "phases/01-ask.md:14: the json block no longer parses: invalid JSON: ",
            id="json-block-broken",
        ),
        pytest.param(
            "text += '\\nCheck the answer against `specs/checklst.md`.\\n'",
            "phases/01-ask.md refers to specs/checklst.md, which does not exist",
            id="file-name-that-does-not-exist",
        ),
        pytest.param(
            "text += '\\nSee [the checklist](../specs/check-list.md).\\n'",
            "phases/01-ask.md refers to ../specs/check-list.md, which does not exist",
            id="broken-link",
        ),
    ],
)
def test_a_prose_fix_that_breaks_a_block_or_a_reference_is_rolled_back(
    breakage: str,
    reason: str,
    cli_skill: Path,
    tuning: Tuning,
    agent_script: Callable[[str], AgentCommand],
) -> None:
    """The same good paragraph plus a JSON block made invalid, a file name or a link that
    resolves to nothing: rolled back for exactly that reason (the call itself counts as
    handled), and the file gets its bytes back."""
    original = tree_bytes(cli_skill)
    body = fix_agent("prose", f"if '01-ask' in str(target):\n    {breakage}")
    instance = _run_with(tuning, cli_skill, agent_script, body)
    doc = instance.doc  # type: ignore[attr-defined]
    records = {r.fix_id: r for r in doc.applied_fixes}
    assert records["FIX-001"].verification_result == "rolled_back"
    failure = records["FIX-001"].failure_reason or ""
    assert failure.startswith(reason), failure
    assert "still reported" not in failure
    assert records["FIX-002"].verification_result == "pass"
    assert tree_bytes(cli_skill)["phases/01-ask.md"] == original["phases/01-ask.md"]


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory, make_skill: Callable[..., Path]) -> Path:
    """A copy of the CLI skill in a folder outside the test workspace."""
    folder = tmp_path_factory.mktemp("outside")
    source = make_skill(CLI_SKILL, name="cli-skill")
    for rel, data in tree_bytes(source).items():
        (folder / "skill" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "skill" / rel).write_bytes(data)
    return folder


def test_a_skill_outside_the_workspace_is_refused_without_allow_outside(
    outside: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    """``fsm new`` with a target skill outside the workspace (a relative path leading out, or
    an absolute one) exits 2 with one line naming the option, and creates nothing."""
    relative = os.path.relpath(outside / "skill", tmp_path)
    for given in (relative, str(outside / "skill")):
        created = cli("new", str(MACHINE_YAML), "--set", f"target_skill.path={given}")
        assert created.code == 2
        [line] = created.err.strip().splitlines()
        assert line.startswith(f"fsm: error: target skill folder {given} is outside the workspace")
        assert "-o allow_outside=" in line
    assert not (tmp_path / ".workflow").exists() or not any(
        (tmp_path / ".workflow" / ".scratchpad").glob("skill-tuning-*")
    )


def test_allow_outside_names_the_folder_a_run_may_change(
    outside: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    """With ``-o allow_outside=FOLDER`` the instance is created; a run without the option is
    refused before any change (exit 2, the outside skill untouched), one with it tunes the
    skill; a folder that does not contain the skill does not allow it."""
    relative = os.path.relpath(outside / "skill", tmp_path)
    original = tree_bytes(outside / "skill")
    elsewhere = cli(
        "new", str(MACHINE_YAML), "--set", f"target_skill.path={relative}",
        "-o", f"allow_outside={tmp_path / 'elsewhere'}",
    )  # fmt: skip
    assert elsewhere.code == 2
    allow = f"allow_outside={outside}"
    created = cli("new", str(MACHINE_YAML), "--set", f"target_skill.path={relative}", "-o", allow)
    assert created.code == 0
    instance_id = created.out.strip()
    refused = cli("run", str(MACHINE_YAML), instance_id)
    assert refused.code == 2
    assert "is outside the workspace" in refused.err
    assert tree_bytes(outside / "skill") == original
    ran = cli("run", str(MACHINE_YAML), instance_id, "-o", allow)
    assert ran.code == 4  # the calls need judgement and no fix agent is set
    assert "2 need judgement" in ran.out


@pytest.fixture
def umask_077() -> Iterator[None]:
    """The process umask set to 077 for the test."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def _modes(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode)
        for p in sorted(folder.rglob("*"))
        if not p.is_symlink()
    }


def test_under_umask_077_nothing_fsm_writes_is_readable_by_others(
    cli_skill: Path,
    tuning: Tuning,
    agent_script: Callable[[str], AgentCommand],
    umask_077: None,
) -> None:
    """With umask 077 every backup, manifest, diagnosis file and report of a run is private
    (no group or other bits), while the skill's own files keep their 0644 through fixes and
    rollbacks."""
    for path in cli_skill.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    body = fix_agent("prose", "if '01-ask' in str(target):\n    text += '\\n`specs/nope.md`\\n'")
    instance = _run_with(tuning, cli_skill, agent_script, body)
    doc = instance.doc  # type: ignore[attr-defined]
    assert {r.verification_result for r in doc.applied_fixes} == {"pass", "rolled_back"}
    work = tuning.root / ".workflow/.scratchpad" / instance.id  # type: ignore[attr-defined]
    written = {rel: mode for rel, mode in _modes(work).items() if not rel.startswith("fsm/")}
    assert any(rel.startswith("backups/cli-skill-backup/") for rel in written)
    assert "tuning-report.md" in written
    leaks = {rel: oct(mode) for rel, mode in written.items() if mode & 0o077}
    assert not leaks
    files = {rel: mode for rel, mode in _modes(cli_skill).items() if "." in rel}
    assert set(files.values()) == {0o644}, files
