"""Workspace configuration (fsm.toml), ``KEY=VALUE`` inputs and layered machine options."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from fsm.base.errors import DocumentInputError, OptionsError
from fsm.model.config import NoOptions, load_config, parse_assignments, parse_value, resolve_options
from fsm.process.executor import AgentCommand

VALID_TOML = """\
[machine.counter]
folder = ".work"
step_size = 2

[machine.issue-manager]
plan_tool = "claude"

[agent.codex]
command = ["codex", "exec", "--sandbox", "workspace-write", "{prompt}"]
analysis_command = ["codex", "exec", "--sandbox", "read-only", "{prompt}"]

[agent.local]
command = ["./agent.sh", "{prompt}"]
"""


class _Options(BaseModel):
    """A small options model, like a machine's."""

    model_config = ConfigDict(extra="forbid")

    folder: str = ".counters"
    step_size: int = 1
    delay: float = 0.0


def _workspace(tmp_path: Path, toml: str) -> Path:
    (tmp_path / "fsm.toml").write_text(toml, encoding="utf-8")
    return tmp_path


def test_machine_and_agent_tables_are_parsed(tmp_path: Path) -> None:
    """Machine tables keep their values; agent tables become AgentCommands."""
    config = load_config(_workspace(tmp_path, VALID_TOML))
    assert config.machines == {
        "counter": {"folder": ".work", "step_size": 2},
        "issue-manager": {"plan_tool": "claude"},
    }
    assert config.agents == {
        "codex": AgentCommand(
            ("codex", "exec", "--sandbox", "workspace-write", "{prompt}"),
            ("codex", "exec", "--sandbox", "read-only", "{prompt}"),
        ),
        "local": AgentCommand(("./agent.sh", "{prompt}")),
    }


def test_absent_fsm_toml_is_an_empty_configuration(tmp_path: Path) -> None:
    """A workspace without fsm.toml has no machine tables and no agents."""
    config = load_config(tmp_path)
    assert dict(config.machines) == {}
    assert dict(config.agents) == {}


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        pytest.param("[machine.counter\n", "malformed TOML", id="malformed"),
        pytest.param(
            '[agents.codex]\ncommand = ["x"]\n', "unknown table 'agents'", id="unknown-table"
        ),
        pytest.param("[machine]\ncounter = 3\n", "must be tables", id="machine-not-a-table"),
        pytest.param('agent = "codex"\n', "must be tables", id="agent-not-a-table"),
        pytest.param(
            '[agent]\ncodex = "codex"\n', "[agent.codex] must be a table", id="tool-scalar"
        ),
        pytest.param(
            '[agent.codex]\nanalysis_command = ["codex"]\n',
            "[agent.codex] needs command",
            id="agent-without-command",
        ),
        pytest.param(
            '[agent.codex]\ncommand = "codex exec {prompt}"\n',
            "[agent.codex] command must be a non-empty list of strings",
            id="command-not-a-list",
        ),
        pytest.param(
            "[agent.codex]\ncommand = []\n",
            "[agent.codex] command must be a non-empty list of strings",
            id="command-empty",
        ),
        pytest.param(
            '[agent.codex]\ncommand = ["codex", 1]\n',
            "[agent.codex] command must be a non-empty list of strings",
            id="command-not-strings",
        ),
        pytest.param(
            '[agent.codex]\ncommand = ["codex"]\nanalysis_command = "codex"\n',
            "[agent.codex] analysis_command must be a non-empty list of strings",
            id="analysis-command-not-a-list",
        ),
        pytest.param(
            '[agent.codex]\ncommand = ["codex"]\ncomand = ["x"]\n',
            "[agent.codex] has unknown key 'comand'",
            id="agent-unknown-key",
        ),
    ],
)
def test_invalid_fsm_toml_is_an_options_error_naming_the_file(
    tmp_path: Path, toml: str, message: str
) -> None:
    """Every malformed fsm.toml raises OptionsError that starts with the file's path."""
    workspace = _workspace(tmp_path, toml)
    with pytest.raises(OptionsError) as caught:
        load_config(workspace)
    text = str(caught.value)
    assert text.startswith(f"{workspace / 'fsm.toml'}:")  # then the line, when known
    assert message in text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("1.5", 1.5),
        ("true", True),
        ("null", None),
        ('"quoted"', "quoted"),
        ('[1, "x"]', [1, "x"]),
        ('{"k": false}', {"k": False}),
        ("plain words", "plain words"),
        ("", ""),
    ],
)
def test_parse_value_reads_json_or_keeps_text(text: str, value: Any) -> None:
    """A value that parses as JSON is that JSON; anything else is the text itself."""
    assert parse_value(text) == value


def test_parse_assignments_builds_nested_values() -> None:
    """Dotted keys nest; values are JSON where they parse; ``=`` inside a value is kept."""
    parsed = parse_assignments(
        ["a.b=1", "a.c=[1, 2]", "c=x", " d =true", "e=k=v", "f="], what="option"
    )
    assert parsed == {"a": {"b": 1, "c": [1, 2]}, "c": "x", "d": True, "e": "k=v", "f": ""}


@pytest.mark.parametrize(
    "item",
    [
        pytest.param("=x", id="no-key"),
        pytest.param("a..b=1", id="empty-part"),
        pytest.param(".a=1", id="leading-dot"),
        pytest.param("a.=1", id="trailing-dot"),
        pytest.param("novalue", id="no-equals"),
    ],
)
@pytest.mark.parametrize(
    ("what", "error"),
    [("option", OptionsError), ("value", DocumentInputError)],
)
def test_parse_assignments_rejects_malformed_items(
    item: str, what: str, error: type[Exception]
) -> None:
    """A malformed item is an input error of the kind being parsed, quoting the item."""
    with pytest.raises(error, match=re.escape(f"invalid {what} '{item}': expected KEY=VALUE")):
        parse_assignments([item], what=what)


def test_resolve_options_layers_defaults_table_and_overrides() -> None:
    """Model defaults, then the fsm.toml table, then ``-o`` overrides: the last one wins."""
    options = resolve_options(
        _Options, "counter", {"folder": ".work", "step_size": 2}, {"step_size": 5}
    )
    assert options == _Options(folder=".work", step_size=5, delay=0.0)


def test_resolve_options_reports_every_problem() -> None:
    """Unknown options and invalid values are all named in one OptionsError."""
    with pytest.raises(OptionsError) as caught:
        resolve_options(_Options, "counter", {"colour": "red"}, {"step_size": "many"})
    message = str(caught.value)
    assert message.startswith("options of machine 'counter': ")
    assert "unknown option 'colour' (fsm.toml [machine.counter])" in message
    assert "step_size (-o): Input should be a valid integer" in message
    assert message.endswith("the options of counter are: folder, step_size, delay")


def test_machine_without_options_accepts_none() -> None:
    """NoOptions refuses every key and accepts an empty table."""
    assert resolve_options(NoOptions, "bare", {}, {}) == NoOptions()
    expected = "unknown option 'delay' (-o); the options of bare are: none"
    with pytest.raises(OptionsError, match=re.escape(expected)):
        resolve_options(NoOptions, "bare", {}, {"delay": 1})


def test_option_text_wins_when_the_json_value_is_refused() -> None:
    """`-o name=true` for a text option keeps the text typed; numbers still parse as numbers."""
    from pydantic import BaseModel, ConfigDict

    from fsm.model.config import assignment_texts, parse_assignments, resolve_options

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        command: str = "x"
        retries: int = 1

    items = ["command=true", "retries=3"]
    options = resolve_options(
        Options, "m", {}, parse_assignments(items, what="option"), assignment_texts(items)
    )
    assert options.model_dump() == {"command": "true", "retries": 3}


def test_every_problem_of_fsm_toml_is_reported_at_once(tmp_path: Path) -> None:
    """One error names all that is wrong with fsm.toml, so one edit fixes it all."""
    toml = (
        '[agents.x]\ncommand = ["x"]\n\n'
        '[agent.codex]\ncomand = ["codex"]\n\n'
        '[agent.claude]\ncommand = "claude"\n'
    )
    workspace = _workspace(tmp_path, toml)
    with pytest.raises(OptionsError) as caught:
        load_config(workspace)
    assert str(caught.value) == (
        f"{workspace / 'fsm.toml'}: unknown table 'agents' "
        "(use [machine.NAME], [machines], [agent.TOOL] or [store]); "
        "[agent.codex] has unknown key 'comand'; "
        '[agent.codex] needs command = ["program", ..., "{prompt}"]; '
        "[agent.claude] command must be a non-empty list of strings"
    )
