"""fsm's invocations of the real agent CLIs, checked against their real argument parsers.

scripts/agent-clis.sh installs codex, claude, gemini and qwen from npm at the versions of
scripts/agent-clis.versions into .agent-clis/ (scripts/check-agents-newest.sh points these tests
at the newest releases instead, with FSM_AGENT_CLIS and FSM_AGENT_CLIS_NEWEST). No request is
ever sent: the checks read ``--version`` and ``--help``, codex parses fsm's argv before printing
its help, and claude, gemini and qwen run fsm's invocation with an empty home and environment,
where they stop for want of credentials after parsing it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fsm.process.agent_check import inspect_agent, version_of
from fsm.process.agents import KNOWN, shown_version
from fsm.process.executor import SubprocessExecutor

ROOT = Path(__file__).resolve().parent.parent
FOLDER = Path(os.environ.get("FSM_AGENT_CLIS") or ROOT / ".agent-clis")
BIN = FOLDER / "node_modules" / ".bin"
pytestmark = pytest.mark.slow

NEWEST = bool(os.environ.get("FSM_AGENT_CLIS_NEWEST"))
"""Checking the newest releases: versions newer than fsm knows are expected (with a warning)."""


def _missing() -> list[str]:
    return [a.program for a in KNOWN.values() if not (BIN / a.program).exists()]


def _required_here() -> bool:
    """On CI as root, scripts/agent-clis.sh installs the CLIs: never skip there."""
    return bool(os.environ.get("CI")) and os.geteuid() == 0 and shutil.which("npm") is not None


if _missing():
    reason = (
        f"the agent CLI tests need {', '.join(_missing())} in {BIN}: run scripts/agent-clis.sh "
        "(it needs npm and the npm registry)"
    )
    if _required_here():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)

REFUSALS = re.compile(
    r"unexpected argument|unknown option|Unknown argument|Invalid values|invalid value|"
    r"is invalid\. Allowed choices",
    re.IGNORECASE,
)
"""How clap, commander and yargs refuse an argv."""


def _resolve(program: str) -> str | None:
    path = BIN / program
    return str(path) if path.exists() else None


@pytest.fixture
def bare_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An environment without credentials: an empty home, PATH with the installed CLIs, a
    temporary folder of the test's own, and no other variable (no API key can reach the
    CLIs)."""
    home = tmp_path / "home"
    home.mkdir()
    for name in list(os.environ):
        if name not in {"FSM_CACHE_DIR"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("PATH", os.pathsep.join([str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]))
    return home


@pytest.mark.skipif(NEWEST, reason="the newest releases are not the pinned ones")
@pytest.mark.parametrize("name", sorted(KNOWN))
def test_installed_version_is_the_one_fsm_was_checked_against(name: str) -> None:
    """The CLI installed for these tests is the version fsm's profiles name as tested."""
    version, probe = version_of(str(BIN / KNOWN[name].program))
    assert version == KNOWN[name].tested, probe.output


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_the_built_in_invocations_are_accepted_by_the_real_parser(name: str) -> None:
    """For both modes, every option fsm passes is in the CLI's own help, with a value among
    the choices the help lists; a version newer than fsm knows is named in a warning."""
    status = inspect_agent(name, None, _resolve)
    assert status.problem is None
    assert status.checked, [i.unchecked for i in status.invocations]
    assert [i.mode for i in status.invocations] == ["analysis", "write"]
    if NEWEST and status.version != shown_version(KNOWN[name].tested):
        assert status.warning is not None and "newer than" in status.warning
    else:
        assert status.warning is None


@pytest.mark.skipif(NEWEST, reason="the lines name the pinned versions")
@pytest.mark.parametrize(
    ("name", "command", "line"),
    [
        pytest.param(
            "codex",
            ("codex", "exec", "--full-auto", "{prompt}"),
            "codex 0.169.0 has no option '--full-auto' (not in `codex exec --help`)",
            id="codex-full-auto",
        ),
        pytest.param(
            "qwen",
            ("qwen", "--approval-mode", "auto_edit", "-p", "{prompt}"),
            "qwen 0.24.4 refuses '--approval-mode auto_edit' (its choices: auto, auto-edit, "
            "default, plan, yolo)",
            id="qwen-auto_edit",
        ),
        pytest.param(
            "gemini",
            ("gemini", "--approval-mode", "read-only", "-p", "{prompt}"),
            "gemini 0.61.0 refuses '--approval-mode read-only' (its choices: auto_edit, default, "
            "plan, yolo)",
            id="gemini-unknown-mode",
        ),
        pytest.param(
            "claude",
            ("claude", "-p", "{prompt}", "--permission-mode", "plan", "--sandbox", "x"),
            "claude 2.1.332 has no option '--sandbox' (not in `claude --help`)",
            id="claude-unknown-option",
        ),
    ],
)
def test_an_invocation_the_parser_refuses_is_named_with_flag_and_version(
    name: str, command: tuple[str, ...], line: str
) -> None:
    """A configured command the installed CLI would reject (fsm's former built-ins among
    them) is refused in one line naming the option and the version."""
    status = inspect_agent(name, (command, None, "text"), _resolve)
    assert status.problem == f"{line}: correct command of [agent.{name}] in fsm.toml"


@pytest.mark.parametrize("mode", ["analysis", "write"])
def test_codex_parses_the_built_in_argv(mode: str, tmp_path: Path) -> None:
    """codex (clap) parses fsm's whole argv before printing the help it is asked for: exit 0,
    where an option it does not know ends in exit 2."""
    agent = KNOWN["codex"]
    version, _ = version_of(str(BIN / "codex"))
    argv = [str(BIN / "codex"), *agent.profile_for(version)[0].template(mode)[1:]]
    parsed = _run([*[part.replace("{prompt}", "fix it") for part in argv], "--help"], tmp_path)
    assert parsed.returncode == 0, parsed.stderr
    refused = _run([str(BIN / "codex"), "exec", "--full-auto", "fix it", "--help"], tmp_path)
    assert refused.returncode == 2 and "unexpected argument '--full-auto'" in refused.stderr


@pytest.mark.parametrize(
    ("name", "mode", "why"),
    [
        pytest.param("claude", "analysis", "Not logged in", id="claude-analysis"),
        pytest.param("claude", "write", "Not logged in", id="claude-write"),
        pytest.param("qwen", "analysis", "No auth type", id="qwen-analysis"),
        pytest.param("qwen", "write", "No auth type", id="qwen-write"),
        pytest.param("gemini", "analysis", "Auth method", id="gemini-analysis"),
        pytest.param("gemini", "write", "Auth method", id="gemini-write"),
    ],
)
def test_the_cli_runs_fsm_invocation_up_to_its_credentials(
    name: str, mode: str, why: str, bare_environment: Path, tmp_path: Path
) -> None:
    """Run by fsm's executor as a machine would, without credentials, the CLI parses fsm's
    argv (no refusal of an option) and stops at the missing login; the result names that line,
    and for the CLIs that print events, fsm reads their verdict from them."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    result = SubprocessExecutor(workspace).agent(name, "Say hello.", mode=mode, timeout=120)  # type: ignore[arg-type]
    shown = result.describe()
    assert not result.ok
    assert not REFUSALS.search(result.stdout + result.stderr), shown
    assert why in shown
    assert result.report is not None
    assert result.report.format == KNOWN[name].newest.output
    if name != "gemini":  # gemini stops before its first event
        assert result.report.failed and why in (result.report.exit_reason or "")


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
