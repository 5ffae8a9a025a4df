"""Executors: commands and agent CLIs run with captured output, timeouts, and no exceptions."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from fsm.process.executor import KNOWN_AGENTS, AgentCommand, SubprocessExecutor
from fsm.process.redaction import redacted_command

# Records its arguments (after the output path) as JSON, so tests see exactly what arrived.
ARGV_SCRIPT = """\
import json, sys
with open(sys.argv[1], "w", encoding="utf-8") as handle:
    json.dump(sys.argv[2:], handle)
"""

TRICKY_PROMPT = (
    """Fix "the bug"; don't stop. $(touch pwned) `touch pwned2` $HOME {mode} \\n * end"""
)


@pytest.fixture
def executor(tmp_path: Path) -> SubprocessExecutor:
    """An executor whose workspace is the temporary folder."""
    return SubprocessExecutor(tmp_path, default_timeout=30.0)


@pytest.fixture
def argv_script(tmp_path: Path) -> Path:
    """A Python script that writes its arguments to the file named by its first argument."""
    script = tmp_path / "argv.py"
    script.write_text(ARGV_SCRIPT, encoding="utf-8")
    return script


def _recorder(script: Path, out: Path, *rest: str) -> tuple[str, ...]:
    return (sys.executable, str(script), str(out), *rest)


def _is_alive(pid: int) -> bool:
    """True while ``pid`` is a running process (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_shell_captures_output_and_exit_code(executor: SubprocessExecutor) -> None:
    """stdout, stderr and a non-zero exit code are captured; the result is not ok."""
    result = executor.shell("echo out; echo err >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.ok
    assert not result.timed_out
    assert result.error is None
    assert result.describe().startswith("exited 3: ")
    assert result.describe().endswith("(err)")


def test_shell_runs_in_the_workspace_with_extra_environment(
    executor: SubprocessExecutor, tmp_path: Path
) -> None:
    """Commands run in the workspace by default; ``env`` adds to the inherited environment."""
    result = executor.shell(
        'pwd; echo "$FSM_TEST_VALUE"; test -n "$PATH" && echo inherited',
        env={"FSM_TEST_VALUE": "hello"},
    )
    assert result.ok
    assert result.stdout.splitlines() == [str(tmp_path.resolve()), "hello", "inherited"]


def test_run_in_another_folder(executor: SubprocessExecutor, tmp_path: Path) -> None:
    """``cwd`` overrides the workspace."""
    sub = tmp_path / "sub"
    sub.mkdir()
    assert executor.run(["pwd"], cwd=sub).stdout.strip() == str(sub.resolve())


def test_missing_program_is_a_failed_result(executor: SubprocessExecutor) -> None:
    """A program that does not exist is an ExecResult with an error, not an exception."""
    result = executor.run(["fsm-test-no-such-program", "--flag"])
    assert result.error == "program not found: fsm-test-no-such-program"
    assert result.exit_code is None
    assert not result.ok
    assert result.describe() == result.error


def test_missing_working_folder_is_not_reported_as_missing_program(
    executor: SubprocessExecutor, tmp_path: Path
) -> None:
    """A working folder that does not exist is named as such."""
    result = executor.run(["true"], cwd=tmp_path / "absent")
    assert result.error == f"working folder not found: {tmp_path / 'absent'}"


def test_timeout_kills_the_whole_process_group(
    executor: SubprocessExecutor, tmp_path: Path
) -> None:
    """On timeout the command and the children it spawned are killed and the result says so."""
    pid_file = tmp_path / "child.pid"
    # A busy machine may not even have started the child when a short timeout strikes: then
    # there is nothing to check, and a longer timeout is tried.
    for timeout in (0.5, 2.0, 8.0, 30.0):
        started = time.monotonic()
        result = executor.shell(f"sleep 60 & echo $! > {pid_file}; wait", timeout=timeout)
        assert time.monotonic() - started < timeout + 30
        assert result.timed_out
        assert not result.ok
        assert result.describe().startswith("timed out after ")
        if pid_file.exists() and pid_file.read_text(encoding="ascii").strip():
            break
    child = int(pid_file.read_text(encoding="ascii"))
    deadline = time.monotonic() + 60
    while _is_alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _is_alive(child)


def test_agent_gets_the_prompt_as_one_argument(tmp_path: Path, argv_script: Path) -> None:
    """Quotes, spaces, ``$(...)`` and ``{mode}`` in a prompt arrive verbatim as one argument."""
    out = tmp_path / "argv.json"
    command = AgentCommand(_recorder(argv_script, out, "--mode={mode}", "{prompt}"))
    executor = SubprocessExecutor(tmp_path, {"fake": command})
    result = executor.agent("fake", TRICKY_PROMPT, mode="write")
    assert result.ok, result.describe()
    assert json.loads(out.read_text(encoding="utf-8")) == ["--mode=write", TRICKY_PROMPT]
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


def test_analysis_mode_uses_the_analysis_command(tmp_path: Path, argv_script: Path) -> None:
    """``analysis_command`` is used for analysis tasks and ``command`` for write tasks."""
    out = tmp_path / "argv.json"
    command = AgentCommand(
        _recorder(argv_script, out, "write", "{prompt}"),
        _recorder(argv_script, out, "read-only", "{prompt}"),
    )
    executor = SubprocessExecutor(tmp_path, {"fake": command})
    assert executor.agent("fake", "look", mode="analysis").ok
    assert json.loads(out.read_text(encoding="utf-8")) == ["read-only", "look"]
    assert executor.agent("fake", "change", mode="write").ok
    assert json.loads(out.read_text(encoding="utf-8")) == ["write", "change"]


def test_without_analysis_command_both_modes_use_command() -> None:
    """An agent table with only ``command`` uses it for analysis too."""
    command = AgentCommand(("tool", "{mode}", "{prompt}"))
    assert command.argv("p", "analysis") == ("tool", "analysis", "p")
    assert command.argv("p", "write") == ("tool", "write", "p")


def test_unconfigured_unknown_agent_is_a_failed_result(executor: SubprocessExecutor) -> None:
    """An agent with no fsm.toml table and no known CLI fails with a message saying what to add."""
    result = executor.agent("fsm-test-agent", "hello")
    assert not result.ok
    assert result.exit_code is None
    assert result.error is not None
    assert "agent 'fsm-test-agent' cannot run" in result.error
    assert "[agent.fsm-test-agent]" in result.error


def test_has_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Configured agents exist while their program does; a known CLI exists only while it is
    on PATH; others never."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    executor = SubprocessExecutor(tmp_path, {"mine": AgentCommand(("mine", "{prompt}"))})
    assert not executor.has_agent("mine")
    mine = empty / "mine"
    mine.write_text(f"#!{sys.executable}\n{ARGV_SCRIPT}", encoding="utf-8")
    mine.chmod(0o755)
    assert executor.has_agent("mine")
    assert not executor.has_agent("codex")
    assert not executor.has_agent("fsm-test-agent")
    fake = empty / "codex"
    fake.write_text(f"#!{sys.executable}\n{ARGV_SCRIPT}", encoding="utf-8")
    fake.chmod(0o755)
    assert executor.has_agent("codex")


def test_known_agent_on_path_runs_its_documented_invocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a table, a known CLI found on PATH gets its non-interactive argv for the mode."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "argv.json"
    fake = bin_dir / "codex"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(out)!r}, 'w').write(json.dumps(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    executor = SubprocessExecutor(tmp_path)
    assert executor.agent("codex", "a b", mode="analysis").ok
    expected = [part.replace("{prompt}", "a b") for part in KNOWN_AGENTS["codex"]["analysis"][1:]]
    assert json.loads(out.read_text(encoding="utf-8")) == expected


def test_successful_result_describes_itself(executor: SubprocessExecutor) -> None:
    """A zero exit is ok and described as such."""
    result = executor.run(["true"])
    assert result.ok
    assert result.describe() == "exited 0: true"


def test_prompt_file_placeholder_passes_a_long_prompt(tmp_path: Path) -> None:
    """`{prompt_file}` hands the agent a file holding the prompt, removed after the run."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import sys, pathlib\n"
        "text = pathlib.Path(sys.argv[1]).read_text()\n"
        "print(len(text), sys.argv[1])\n"
    )
    agents = {"long": AgentCommand((sys.executable, str(script), "{prompt_file}"))}
    result = SubprocessExecutor(tmp_path, agents).agent("long", "x" * 300_000)
    assert result.ok, result.describe()
    length, path = result.stdout.split()
    assert int(length) == 300_000
    assert not Path(path).exists()


def test_too_long_prompt_without_prompt_file_is_a_clear_failure(tmp_path: Path) -> None:
    """A prompt over 100 kB for a `{prompt}` command fails with advice, without running it."""
    agents = {"short": AgentCommand(("echo", "{prompt}"))}
    result = SubprocessExecutor(tmp_path, agents).agent("short", "y" * 200_000)
    assert not result.ok
    assert "use {prompt_file}" in (result.error or "")


def test_reap_kills_recorded_groups_but_never_a_reused_pid(tmp_path: Path) -> None:
    """A recorded command still running is killed; a record whose start time differs is not."""
    import json
    import subprocess

    from fsm.process import orphans

    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        marker = orphans.record(tmp_path, proc.pid, ["sleep", "30"])
        assert marker is not None
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({**data, "start_time": "1"}))  # as if the pid were reused
        assert orphans.reap(tmp_path) == []
        assert proc.poll() is None
        assert not marker.exists()
        orphans.record(tmp_path, proc.pid, ["sleep", "30"])
        assert [k["pgid"] for k in orphans.reap(tmp_path)] == [proc.pid]
        assert proc.wait(timeout=60) == -9
    finally:
        proc.kill()
        proc.wait()


def test_executor_records_a_running_command_and_forgets_it(tmp_path: Path) -> None:
    """While a command runs its record exists; once it ends the record is gone."""
    running = tmp_path / "running"
    executor = SubprocessExecutor(tmp_path, running_dir=running)
    # the command may start before fsm has written its record: it looks until it is there
    result = executor.shell(
        f"for i in $(seq 6000); do ls {running}/*.json > seen.txt 2>/dev/null && break; "
        "sleep 0.01; done"
    )
    assert result.ok
    assert (tmp_path / "seen.txt").read_text().strip().endswith(".json")
    assert list(running.iterdir()) == []


def test_agent_results_never_show_the_configured_arguments(
    tmp_path: Path, argv_script: Path
) -> None:
    """A token placed in an fsm.toml agent command reaches the agent but never the result's
    argv or description, which machines copy into documents and progress files."""
    out = tmp_path / "argv.json"
    secret = "sk-very-secret-token"
    command = AgentCommand(_recorder(argv_script, out, "--api-key", secret, "{prompt}"))
    executor = SubprocessExecutor(tmp_path, {"fake": command})
    ok = executor.agent("fake", "do it", mode="write")
    assert json.loads(out.read_text(encoding="utf-8")) == ["--api-key", secret, "do it"]
    failing = SubprocessExecutor(
        tmp_path, {"fake": AgentCommand(("false", "--token", secret, "{prompt}"))}
    ).agent("fake", "do it", mode="write")
    for result in (ok, failing):
        assert secret not in result.describe() and secret not in " ".join(result.argv)
    assert failing.describe() == "exited 1: false --token *** {prompt}"


@pytest.mark.parametrize(
    ("argv", "shown", "hidden"),
    [
        pytest.param(
            ("codex", "exec", "--sandbox", "workspace-write", "PROMPT"),
            "codex exec --sandbox workspace-write {prompt}",
            [],
            id="ordinary-values-shown",
        ),
        pytest.param(
            ("qwen", "--approval-mode", "auto-edit", "-o", "stream-json", "PROMPT"),
            "qwen --approval-mode auto-edit -o stream-json {prompt}",
            [],
            id="approval-mode-shown",
        ),
        pytest.param(
            ("claude", "--api-key", "sk-123456", "-p", "PROMPT"),
            "claude --api-key *** -p {prompt}",
            ["sk-123456"],
            id="secret-option-value",
        ),
        pytest.param(
            ("env", "TOKEN=abc123", "agent", "--token=xyz789", "PROMPT"),
            "env TOKEN=*** agent --token=*** {prompt}",
            ["abc123", "xyz789"],
            id="secret-assignments",
        ),
        pytest.param(
            ("env", "MODEL=gpt-5", "codex", "-c", "model_providers.x.api_key=k-1", "PROMPT"),
            "env MODEL=gpt-5 codex -c model_providers.x.api_key=*** {prompt}",
            ["k-1"],
            id="config-key-named-like-a-secret",
        ),
        pytest.param(
            ("agent", "ghp_abcdefghijklmnop", "a8F3kLm92QzX7vBn4TpR2", "PROMPT"),
            "agent *** *** {prompt}",
            ["ghp_abcdefghijklmnop", "a8F3kLm92QzX7vBn4TpR2"],
            id="token-shaped-values",
        ),
        pytest.param(
            ("agent", "--model", "claude-sonnet-4-20250514", "--header", "Bearer abc.def", "P"),
            "agent --model claude-sonnet-4-20250514 --header Bearer *** P",
            ["abc.def"],
            id="model-name-shown-bearer-hidden",
        ),
        pytest.param((), "", [], id="empty"),
    ],
)
def test_redacted_command_masks_secrets_only(
    argv: tuple[str, ...], shown: str, hidden: list[str]
) -> None:
    """Secrets are masked (values of options and assignments named like secrets, token-shaped
    values, credentials); ordinary flag values, programs and subcommands are shown."""
    command, secrets = redacted_command(argv, {"PROMPT": "{prompt}"})
    assert (" ".join(command), secrets) == (shown, hidden)


def test_a_shell_command_is_described_as_written(executor: SubprocessExecutor) -> None:
    """A failed shell command is named by its text, not by the path of the shell that ran it."""
    assert executor.shell("exit 3").describe() == "exited 3: exit 3"


def test_each_instance_gets_an_executor_recording_its_commands(tmp_path: Path) -> None:
    """A workspace executor offering `for_instance` (the subprocess one, or a wrapper of it)
    is asked for one copy per instance, recording in that instance's `running/` folder: a
    later run of the instance reaps what a killed run left running. One without it is used as
    it is."""
    from dataclasses import dataclass

    from fsm.engine.instance import Workspace
    from tests.conftest import COUNTER

    @dataclass
    class Wrapped(SubprocessExecutor):
        asked: list[Path] | None = None

        def for_instance(self, running_dir: Path) -> SubprocessExecutor:
            assert self.asked is not None
            self.asked.append(running_dir)
            return super().for_instance(running_dir)

    asked: list[Path] = []
    wrapped = Wrapped(tmp_path, asked=asked)
    first = Workspace(tmp_path, executor=wrapped).instance(str(COUNTER), "c1")
    second = Workspace(tmp_path, executor=wrapped).instance(str(COUNTER), "c2")
    assert asked == []  # made when first needed (fsm status runs no command)
    assert first.executor is first.executor  # one copy per instance
    assert second.executor is not first.executor
    assert asked == [
        first.store.paths(first.id).meta / "running",
        second.store.paths(second.id).meta / "running",
    ]
    assert isinstance(first.executor, SubprocessExecutor)
    assert first.executor.running_dir == first.store.paths(first.id).meta / "running"
    assert wrapped.running_dir is None  # the workspace's executor itself is left as it was

    from fsm.testing import ScriptedExecutor

    scripted = ScriptedExecutor()  # records nothing on disk: no for_instance
    instance = Workspace(tmp_path, executor=scripted).instance(str(COUNTER), "c3")
    assert instance.executor is scripted
