"""The agent CLIs fsm knows: invocation profiles per version, the offline check of an invocation
against a CLI's help (with stand-in CLIs that answer --version and --help as the real ones do),
``fsm agents``, the run preflight that refuses an agent for the reason that holds, and the
executor's handling of versions and structured output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from fsm.base.errors import OptionsError
from fsm.model.config import load_config
from fsm.process.agent_check import check_invocation, help_command, inspect_agent, parse_help
from fsm.process.agents import KNOWN, Version, parse_version, shown_version
from fsm.process.executor import AgentCommand, ExecResult, SubprocessExecutor, agent_problem
from fsm.testing import ScriptedExecutor

ROOT = Path(__file__).resolve().parent.parent

CLAP_HELP = """\
Run Codex non-interactively

Usage: codex exec [OPTIONS] [PROMPT]

Options:
  -s, --sandbox <SANDBOX_MODE>
          Select the sandbox policy to use when executing model-generated shell commands

          [possible values: read-only, workspace-write, danger-full-access]

      --skip-git-repo-check
          Allow running Codex outside a Git repository

      --json
          Print events to stdout as JSONL

  -h, --help
          Print help (see a summary with '-h')
"""
COMMANDER_HELP = """\
Usage: claude [options] [command] [prompt]

Options:
  --allowedTools, --allowed-tools <tools...>
      Comma or space-separated list of tool names to allow
  --output-format <format>              Output format (only works with --print):
                                        "text" (default), "json" (single
                                        result), or "stream-json" (choices:
                                        "text", "json", "stream-json")
  --permission-mode <mode>              Permission mode to use for the session
                                        (choices: "acceptEdits", "plan")
  --system-prompt-snapshot <on|off>     Record the system prompt: on (the
                                        default) with a
                                        --append-system-prompt included
                                        (choices: "on", "off")
  -p, --print                           Print response and exit
  --verbose                             Override the verbose setting
"""
YARGS_HELP = (
    "Usage: qwen [options] [command]\n\n"
    "Options:\n"
    "  -p, --prompt           Prompt.  [deprecated: Use the positional prompt instead.] [string]\n"
    "      --approval-mode    Set the approval mode  [string] "
    '[choices: "plan", "default", "auto-edit", "yolo"]\n'
    "  -o, --output-format    The format of the CLI output.  [string] "
    '[choices: "text", "json", "stream-json"]\n'
    "  -h, --help             Show help  [boolean]\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            CLAP_HELP,
            {
                "-s": {"read-only", "workspace-write", "danger-full-access"},
                "--sandbox": {"read-only", "workspace-write", "danger-full-access"},
                "--skip-git-repo-check": None,
                "--json": None,
                "-h": None,
                "--help": None,
            },
            id="clap",
        ),
        pytest.param(
            COMMANDER_HELP,
            {
                "--allowedTools": None,
                "--allowed-tools": None,
                "--output-format": {"text", "json", "stream-json"},
                "--permission-mode": {"acceptEdits", "plan"},
                "--system-prompt-snapshot": {"on", "off"},
                "-p": None,
                "--print": None,
                "--verbose": None,
            },
            id="commander-wrapped-choices",
        ),
        pytest.param(
            YARGS_HELP,
            {
                "-p": None,
                "--prompt": None,
                "--approval-mode": {"plan", "default", "auto-edit", "yolo"},
                "-o": {"text", "json", "stream-json"},
                "--output-format": {"text", "json", "stream-json"},
                "-h": None,
                "--help": None,
            },
            id="yargs",
        ),
    ],
)
def test_help_texts_give_options_and_their_choices(text: str, expected: dict[str, Any]) -> None:
    """clap, commander and yargs help texts list the options and the choices of their values;
    a wrapped description line that begins with an option name is not an option."""
    found = parse_help(text)
    assert {k: (set(v) if v is not None else None) for k, v in found.items()} == expected


@pytest.mark.parametrize(
    ("argv", "helps", "problem"),
    [
        pytest.param(
            ("codex", "exec", "--sandbox", "workspace-write", "--json", "{prompt}"),
            {"codex exec": CLAP_HELP},
            None,
            id="accepted",
        ),
        pytest.param(
            ("codex", "exec", "--full-auto", "{prompt}"),
            {"codex exec": CLAP_HELP},
            "codex 0.150.0 has no option '--full-auto' (not in `codex exec --help`)",
            id="unknown-option",
        ),
        pytest.param(
            ("codex", "exec", "--sandbox=workspace", "{prompt}"),
            {"codex exec": CLAP_HELP},
            "codex 0.150.0 refuses '--sandbox workspace' (its choices: danger-full-access, "
            "read-only, workspace-write)",
            id="value-not-a-choice",
        ),
        pytest.param(
            ("codex", "exec", "--json", "{prompt}", "--", "--not-an-option"),
            {"codex exec": CLAP_HELP},
            None,
            id="after-double-dash",
        ),
        pytest.param(
            ("codex", "exec", "-s", "{mode}", "{prompt}"),
            {"codex exec": CLAP_HELP},
            None,
            id="placeholder-value",
        ),
    ],
)
def test_an_invocation_is_checked_option_by_option(
    argv: tuple[str, ...], helps: dict[str, str], problem: str | None
) -> None:
    """Every option must be in the help, and a value among its listed choices; the refusal
    names the option and the version."""
    assert check_invocation(KNOWN["codex"], (0, 150, 0), argv, helps) == problem


def test_the_help_asked_is_that_of_the_subcommand() -> None:
    """The plain words after the program name the subcommand whose help lists the options."""
    assert help_command(("codex", "exec", "--json", "{prompt}")) == ("codex", "exec")
    assert help_command(("qwen", "{prompt}")) == ("qwen",)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("codex-cli 0.169.0", (0, 169, 0)),
        ("2.1.332 (Claude Code)", (2, 1, 332)),
        ("0.61.0\n", (0, 61, 0)),
        ("v1.2", (1, 2)),
        ("no version here", None),
    ],
)
def test_versions_are_read_from_what_version_prints(text: str, version: Version | None) -> None:
    """The first MAJOR.MINOR[.PATCH] of the --version output."""
    assert parse_version(text) == version


@pytest.mark.parametrize(
    ("name", "version", "since", "warned"),
    [
        pytest.param("codex", (0, 169, 0), (0, 44), None, id="codex-tested"),
        pytest.param("codex", (0, 30, 2), (0, 1), None, id="codex-before-json-events"),
        pytest.param("codex", (0, 200, 0), (0, 44), "newer than", id="codex-newer"),
        pytest.param("codex", None, (0, 44), "could not read", id="codex-unreadable"),
        pytest.param("gemini", (0, 40, 1), (0, 37), None, id="gemini-plan-no-trust-flag"),
        pytest.param("gemini", (0, 30, 0), (0, 11), None, id="gemini-plan-needs-a-setting"),
        pytest.param("gemini", (0, 41, 0), (0, 41), None, id="gemini-skip-trust"),
        pytest.param("qwen", (0, 4, 9), (0, 1), None, id="qwen-before-stream-json"),
        pytest.param("qwen", (0, 22, 1), (0, 21), None, id="qwen-approval-mode-unlisted"),
        pytest.param("claude", (1, 0, 51), (1, 0), None, id="claude-before-permission-mode"),
        pytest.param("claude", (1, 0, 53), (1, 0, 53), None, id="claude-permission-mode"),
        pytest.param("qwen", (0, 0, 9), (0, 1), "older than", id="qwen-older"),
    ],
)
def test_a_version_gets_the_profile_of_its_range(
    name: str, version: Version | None, since: Version, warned: str | None
) -> None:
    """The newest profile not above the version; outside the checked range the nearest one and
    a warning line naming the version."""
    profile, warning = KNOWN[name].profile_for(version)
    assert profile.since == since
    if warned is None:
        assert warning is None
    else:
        assert warning is not None and warned in warning


def test_the_newest_profiles_are_the_documented_invocations() -> None:
    """The current invocations: read-only analysis, workspace-only writes, structured output,
    and the flags each CLI needs unattended."""
    shown = {
        name: (" ".join(a.newest.analysis), " ".join(a.newest.write), a.newest.output)
        for name, a in KNOWN.items()
    }
    assert shown == {
        "claude": (
            "claude -p {prompt} --permission-mode plan --output-format stream-json --verbose",
            "claude -p {prompt} --permission-mode acceptEdits --output-format stream-json "
            "--verbose",
            "claude-stream-json",
        ),
        "codex": (
            "codex exec --sandbox read-only --skip-git-repo-check --json {prompt}",
            "codex exec --sandbox workspace-write --skip-git-repo-check --json {prompt}",
            "codex-json",
        ),
        "gemini": (
            "gemini --skip-trust --approval-mode plan -o stream-json -p {prompt}",
            "gemini --skip-trust --approval-mode auto_edit -o stream-json -p {prompt}",
            "gemini-stream-json",
        ),
        "qwen": (
            "qwen --approval-mode plan -o stream-json {prompt}",
            "qwen --approval-mode auto-edit -o stream-json {prompt}",
            "claude-stream-json",
        ),
    }


def test_the_tested_versions_are_the_ones_the_install_script_pins() -> None:
    """scripts/agent-clis.versions (what CI installs) and fsm/process/agents.py name the same
    versions."""
    pinned = {}
    for line in (ROOT / "scripts" / "agent-clis.versions").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            package, version = line.split()
            pinned[package] = version
    assert pinned == {a.package: shown_version(a.tested) for a in KNOWN.values()}


def _stand_in_cli(
    folder: Path, program: str, version: str, helps: dict[str, str], log: Path
) -> Path:
    """A stand-in for a CLI: answers --version and --help (per subcommand) like the real one,
    logs every call, and prints its arguments as JSON otherwise."""
    folder.mkdir(exist_ok=True)
    path = folder / program
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "args = sys.argv[1:]\n"
        f"if args == ['--version']:\n    print({version!r}); sys.exit(0)\n"
        f"helps = {helps!r}\n"
        "if args and args[-1] == '--help':\n"
        "    print(helps.get(' '.join(args[:-1]), 'no such command')); sys.exit(0)\n"
        "print(json.dumps(args))\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def stand_in_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder first on PATH for stand-in CLIs (and no real agent CLI after it)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), "/usr/bin", "/bin"]))
    return folder


def test_the_check_is_cached_per_installed_program(stand_in_path: Path, tmp_path: Path) -> None:
    """A second check of the same program file asks it nothing; a changed file is asked
    again."""
    log = tmp_path / "calls.jsonl"
    cli = _stand_in_cli(stand_in_path, "codex", "codex-cli 0.169.0", {"exec": CLAP_HELP}, log)
    first = inspect_agent("codex", None, lambda p: str(stand_in_path / p))
    again = inspect_agent("codex", None, lambda p: str(stand_in_path / p))
    assert first == again and first.problem is None and first.checked
    assert log.read_text().splitlines() == ['["--version"]', '["exec", "--help"]']
    cli.write_text(cli.read_text().replace("0.169.0", "0.170.0"))
    newer = inspect_agent("codex", None, lambda p: str(stand_in_path / p))
    assert newer.version == "0.170.0" and "newer than" in (newer.warning or "")
    assert len(log.read_text().splitlines()) == 4


def test_a_known_cli_runs_the_profile_of_its_version(stand_in_path: Path, tmp_path: Path) -> None:
    """Found on PATH, an older codex gets its own profile: without --json (its events had
    another shape), read as text."""
    log = tmp_path / "calls.jsonl"
    _stand_in_cli(stand_in_path, "codex", "codex-cli 0.40.0", {"exec": CLAP_HELP}, log)
    result = SubprocessExecutor(tmp_path).agent("codex", "fix it", mode="write")
    assert result.ok, result.describe()
    assert json.loads(result.stdout) == [
        "exec",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
        "fix it",
    ]
    assert result.report is not None
    assert (result.report.format, result.report.version) == ("text", "0.40.0")


def test_has_agent_asks_the_cli_nothing(stand_in_path: Path, tmp_path: Path) -> None:
    """Whether an agent is there is a look at PATH: the CLI is not run."""
    log = tmp_path / "calls.jsonl"
    _stand_in_cli(stand_in_path, "qwen", "0.24.4", {"": YARGS_HELP}, log)
    assert SubprocessExecutor(tmp_path).has_agent("qwen")
    assert not log.exists()


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        pytest.param(
            '[agent.codex]\ncommand = ["codex", "exec", "{prompt}"]\n',
            "[agent.codex] in fsm.toml runs 'codex', which is not installed or not on PATH: "
            "install it or correct the command in fsm.toml",
            id="table-whose-program-is-missing",
        ),
        pytest.param(
            "",
            "'codex' is not on PATH and fsm.toml has no [agent.codex] table: install it (npm "
            "install -g @openai/codex) or add [agent.codex] command = [...] to fsm.toml",
            id="no-table-no-cli",
        ),
    ],
)
def test_a_missing_agent_is_refused_for_the_cause_that_holds(
    toml: str, problem: str, stand_in_path: Path, tmp_path: Path
) -> None:
    """A table in fsm.toml whose program is not on PATH says so (not "add a table"); without
    a table, the CLI to install is named."""
    (tmp_path / "fsm.toml").write_text(toml)
    executor = SubprocessExecutor(tmp_path, load_config(tmp_path).agents)
    assert executor.agent_problem("codex") == problem
    result = executor.agent("codex", "fix it", mode="write")
    assert result.error == f"agent 'codex' cannot run: {problem}"


def test_an_agent_the_installed_cli_would_reject_is_refused_before_the_run(
    cli: Any, stand_in_path: Path, tmp_path: Path
) -> None:
    """fsm run refuses (exit 2), in one line naming the option and the version, a loop whose
    fix agent's installed version lacks an option fsm passes; nothing starts."""
    log = tmp_path / "calls.jsonl"
    old_help = CLAP_HELP.replace("--skip-git-repo-check", "--color")
    _stand_in_cli(stand_in_path, "codex", "codex-cli 0.169.0", {"exec": old_help}, log)
    (tmp_path / "fsm.toml").write_text('[machine.ccw-loop]\ntest_command = "true"\n')
    loop_id = cli("new", "ccw-loop", "--set", "title=Fix it").out.strip()
    ran = cli("run", "ccw-loop", loop_id)
    assert ran.code == 2
    (line,) = ran.err.splitlines()
    assert line.startswith(
        f"fsm: error: instance '{loop_id}' cannot run: agent 'codex' (option fix_tool, which "
        "implements fix tasks; task task-001) cannot run: codex 0.169.0 has no option "
        "'--skip-git-repo-check' (not in `codex exec --help`), which fsm's analysis invocation "
        "passes: install a version fsm knows (npm install -g @openai/codex@0.169.0) or set "
        "[agent.codex] command = [...] in fsm.toml"
    )
    assert all(
        json.loads(call)[-1] in ("--version", "--help") for call in log.read_text().splitlines()
    )


def test_fsm_agents_lists_where_which_version_and_the_verdict(
    cli: Any, stand_in_path: Path, tmp_path: Path
) -> None:
    """Known CLIs found or not, and fsm.toml's tables: one block each, exit 1 when one that
    is configured or installed cannot run; secrets of a table are masked."""
    log = tmp_path / "calls.jsonl"
    _stand_in_cli(stand_in_path, "codex", "codex-cli 0.169.0", {"exec": CLAP_HELP}, log)
    _stand_in_cli(stand_in_path, "qwen", "0.24.4", {"": YARGS_HELP}, log)
    (tmp_path / "fsm.toml").write_text(
        "[agent.qwen]\n"
        'command = ["env", "QWEN_API_KEY=abc12345", "qwen", "--approval-mode", "auto_edit", '
        '"{prompt}"]\n'
        "[agent.mine]\n"
        'command = ["true", "{prompt}"]\n'
    )
    listed = cli("agents")
    assert listed.code == 1, listed.err
    lines = listed.out.splitlines()
    assert lines[0] == "claude   -          built-in  not found  not installed"
    assert "  'claude' is not on PATH and fsm.toml has no [agent.claude] table" in lines[1]
    codex = lines.index(next(x for x in lines if x.startswith("codex ")))
    assert lines[codex].endswith("accepted") and "0.169.0" in lines[codex]
    assert lines[codex + 2] == (
        "  write     codex exec --sandbox workspace-write --skip-git-repo-check --json {prompt}"
    )
    assert any(
        x.startswith("mine ") and "not checked (not an agent CLI fsm knows)" in x for x in lines
    )
    qwen = lines.index(next(x for x in lines if x.startswith("qwen ")))
    assert lines[qwen].endswith("CANNOT RUN")
    assert (
        "qwen 0.24.4 refuses '--approval-mode auto_edit' (its choices: auto-edit, default, plan, "
        "yolo): correct command of [agent.qwen] in fsm.toml"
    ) in listed.out
    assert "abc12345" not in listed.out
    named = cli("agents", "claude")
    assert named.code == 1 and named.out.splitlines()[0].endswith("CANNOT RUN")
    (tmp_path / "fsm.toml").unlink()
    assert cli("agents", "claude", "gemini").code == 1
    assert cli("agents").code == 0  # codex and qwen run; claude and gemini are not installed
    as_json = cli("agents", "codex", "--json")
    assert as_json.code == 0
    (codex_json,) = as_json.json()
    assert (codex_json["version"], codex_json["accepted"], codex_json["output"]) == (
        "0.169.0",
        True,
        "codex-json",
    )


def test_an_executor_that_cannot_tell_falls_back_on_has_agent() -> None:
    """agent_problem of a scripted executor: None for a scripted agent, the general line
    for another."""
    executor = ScriptedExecutor().on_agent("mine")
    assert agent_problem(executor, "mine") is None
    assert agent_problem(executor, "other") == (
        "add [agent.other] command = [...] to fsm.toml or put other on PATH"
    )


def test_a_failed_result_names_the_agents_own_error() -> None:
    """A run whose events say it failed is not ok even when it exited 0, and its description
    quotes the agent's error rather than its last line."""
    from fsm.process.agent_output import AgentReport

    report = AgentReport("codex-json", exit_reason="quota exceeded", failed=True, events=3)
    result = ExecResult(("codex", "exec", "{prompt}"), 0, "", "last line", report=report)
    assert not result.ok
    assert result.describe() == "exited 0: codex exec {prompt} (quota exceeded)"


def test_secrets_of_the_environment_are_masked_in_agent_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The value of a variable named like a secret, echoed by the agent, is masked in its
    output and final message; an ordinary variable's value is not."""
    monkeypatch.setenv("OPENAI_API_KEY", "k3y-value-from-env")
    monkeypatch.setenv("EDITOR_NAME", "plain-value-shown")
    script = tmp_path / "agent.py"
    script.write_text("import os\nprint(os.environ['OPENAI_API_KEY'], os.environ['EDITOR_NAME'])\n")
    agents = {"mine": AgentCommand((sys.executable, str(script), "{prompt}"))}
    result = SubprocessExecutor(tmp_path, agents).agent("mine", "go")
    assert result.stdout.strip() == "*** plain-value-shown"
    assert result.report is not None and result.report.final_message == "*** plain-value-shown"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param('"codex-json"', None, id="known-format"),
        pytest.param(
            '"jsonl"',
            '[agent.mine] output must be one of "text", "codex-json", "claude-stream-json", '
            "\"gemini-stream-json\", not 'jsonl'",
            id="unknown-format",
        ),
    ],
)
def test_an_agent_table_may_name_its_output_format(
    tmp_path: Path, value: str, error: str | None
) -> None:
    """``output`` in an agent table is one of the formats fsm reads; another is refused."""
    (tmp_path / "fsm.toml").write_text(
        f'[agent.mine]\ncommand = ["mine", "{{prompt}}"]\noutput = {value}\n'
    )
    if error is None:
        assert load_config(tmp_path).agents["mine"].output == "codex-json"
    else:
        with pytest.raises(OptionsError) as refused:
            load_config(tmp_path)
        assert error in str(refused.value)


def test_structured_output_becomes_the_final_message(tmp_path: Path) -> None:
    """An agent configured with a JSON format: its result's stdout is the final message (what
    a machine parses, as from a text agent), the report holds the rest."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import json\n"
        "print(json.dumps({'type': 'item.completed', 'item': {'type': 'agent_message', "
        "'text': '{\"answer\": 42}'}}))\n"
        "print(json.dumps({'type': 'turn.completed', 'usage': {'input_tokens': 5, "
        "'output_tokens': 2}}))\n"
    )
    agents = {"mine": AgentCommand((sys.executable, str(script), "{prompt}"), output="codex-json")}
    result = SubprocessExecutor(tmp_path, agents).agent("mine", "go")
    assert result.ok and json.loads(result.stdout) == {"answer": 42}
    assert result.report is not None and dict(result.report.usage) == {
        "input_tokens": 5,
        "output_tokens": 2,
    }


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        pytest.param("0.21.2", None, id="range-that-hides-it"),
        pytest.param(
            "0.24.4",
            "qwen 0.24.4 has no option '--approval-mode' (not in `qwen --help`)",
            id="range-that-lists-it",
        ),
    ],
)
def test_an_option_a_range_accepts_unlisted_is_not_refused(
    version: str, problem: str | None, stand_in_path: Path, tmp_path: Path
) -> None:
    """qwen 0.21 and 0.22 accept --approval-mode without listing it in --help: their check
    passes; a version that should list it and does not is refused."""
    hidden = "\n".join(x for x in YARGS_HELP.splitlines() if "approval-mode" not in x)
    _stand_in_cli(stand_in_path, "qwen", version, {"": hidden}, tmp_path / "calls.jsonl")
    status = inspect_agent("qwen", None, lambda p: str(stand_in_path / p))
    assert status.problem is None if problem is None else status.problem.startswith(problem)


def test_a_profile_may_set_the_environment_its_versions_need(
    stand_in_path: Path, tmp_path: Path
) -> None:
    """gemini before --skip-trust gets the variable that trusts the workspace for the run."""
    script = stand_in_path / "gemini"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "if sys.argv[1:] == ['--version']:\n    print('0.40.0'); sys.exit(0)\n"
        "print(os.environ.get('GEMINI_CLI_TRUST_WORKSPACE'))\n"
    )
    script.chmod(0o755)
    result = SubprocessExecutor(tmp_path).agent("gemini", "hi", mode="write")
    assert result.ok and result.stdout.strip() == "true"
