"""Creation inputs cannot set what fsm or the machine owns, nor outgrow a document: refused on the
command line and through the API with one clear error, and nothing is written (over HTTP:
tests/serve/test_create_refusals.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsm.base import jsonio
from fsm.base.errors import DocumentInputError, InputTooLargeError
from fsm.engine.instance import Workspace
from fsm.model.check import check_target
from fsm.model.machine import load_machine
from tests.conftest import COUNTER, ENGINE_MACHINES, Cli
from tests.test_check import FUNCTIONS, HEADER, STATES, TRANSITIONS, write_machine

C = str(COUNTER)
SLOW = str(ENGINE_MACHINES / "slow" / "machine.yaml")


@pytest.mark.parametrize(
    ("assignment", "named"),
    [
        pytest.param(
            "status=done",
            "'status' cannot be given at creation: it is the control",
            id="control-status",
        ),
        pytest.param(
            "phase=done", "'phase' cannot be given at creation: it is the FSM state", id="fsm-state"
        ),
        pytest.param(
            "updated_at=2020",
            "'updated_at' cannot be given at creation: it is a timestamp",
            id="timestamp",
        ),
        pytest.param(
            "failure_reason=x",
            "'failure_reason' cannot be given at creation: it is set by the control",
            id="control-owned",
        ),
        pytest.param("count=5", "'count' cannot be set: the machine sets it", id="machine-counter"),
    ],
)
def test_fields_fsm_or_the_machine_owns_are_refused_on_the_command_line(
    cli: Cli, tmp_path: Path, assignment: str, named: str
) -> None:
    """`fsm new counter --set status=done` (or the state, a timestamp, a counter) is refused in
    one line (exit 2) and no instance is written."""
    result = cli("new", C, "--set", "limit=2", "--set", assignment)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("fsm: error: ") and named in result.err
    assert not (tmp_path / ".counters").exists()


def test_a_machine_without_an_inputs_model_takes_no_inputs(cli: Cli, tmp_path: Path) -> None:
    """A machine whose definition names no inputs model takes no creation input at all."""
    result = cli("new", SLOW, "--set", "output=done")
    assert result.code == 2
    assert result.err.splitlines() == [
        "fsm: error: slow takes no creation inputs (its definition names no inputs model): "
        "'output' cannot be given"
    ]
    assert not (tmp_path / "jobs").exists()
    assert cli("new", SLOW, "--id", "j1").code == 0


def test_inputs_over_the_document_limit_are_refused_by_the_api(tmp_path: Path) -> None:
    """`Instance.create` refuses inputs just over the store's document limit, with nothing
    written, and accepts inputs well under it."""
    workspace = Workspace(tmp_path)
    machine = load_machine(COUNTER)
    instance = workspace.instance(machine, "c1")
    with pytest.raises(InputTooLargeError, match="nothing was created"):
        instance.create({"limit": 1, "title": "y" * jsonio.MAX_BYTES})
    assert not (tmp_path / ".counters").exists()
    instance.create({"limit": 1, "title": "y" * 1000})
    assert instance.store.read(instance.id).data["title"] == "y" * 1000


def test_an_owned_field_is_refused_by_the_api_whatever_the_inputs_model(tmp_path: Path) -> None:
    """The Python API refuses what the command line refuses (it is the same check)."""
    instance = Workspace(tmp_path).instance(load_machine(COUNTER), "c1")
    with pytest.raises(DocumentInputError, match="'status' cannot be given at creation"):
        instance.create({"status": "done"})
    assert not instance.exists()


def test_check_refuses_an_inputs_model_naming_a_field_fsm_owns(tmp_path: Path) -> None:
    """An inputs model with a field fsm sets (here the state field) is a finding of
    `fsm check`: that input could never be given."""
    functions = FUNCTIONS + (
        "\n\n@registry.inputs\nclass DocInputs(BaseModel):\n    phase: str = 'start'\n"
        "    count: int = 0\n"
    )
    text = (
        HEADER.replace("document: Doc\n", "document: Doc\ninputs: DocInputs\n")
        + STATES
        + TRANSITIONS
    )
    path = write_machine(tmp_path / "m", text, functions=functions)
    findings = [f for f in check_target(str(path)).findings if f.check == "owned-input"]
    assert [f.message for f in findings] == [
        "inputs: DocInputs names 'phase', which is the FSM state (a new instance starts in its "
        "initial state): no creation input may set it"
    ]


def test_an_input_file_over_the_document_limit_is_refused(cli: Cli, tmp_path: Path) -> None:
    """`fsm new --input big.json` over 16 MiB is refused as too large (exit 2), not called
    invalid JSON, and nothing is created."""
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"limit": 1, "title": "z" * (jsonio.MAX_BYTES + 1)}))
    result = cli("new", C, "--input", str(big))
    assert result.code == 2
    assert result.err.splitlines() == [
        f"fsm: error: {big} is larger than the limit of {jsonio.MAX_BYTES} bytes: "
        "nothing was created"
    ]
    assert not (tmp_path / ".counters").exists()


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        pytest.param({"title": "\ud800"}, "'title' holds text that is not Unicode", id="value"),
        pytest.param({"title": ["a", "b\udfff"]}, "'title[1]'", id="in-a-list"),
    ],
)
def test_text_that_no_utf8_file_can_hold_is_bad_input(
    cli: Cli, tmp_path: Path, inputs: dict[str, object], named: str
) -> None:
    """An input holding a lone surrogate (JSON's "\\ud800") is refused as bad input (exit 2)
    naming the field, and nothing is created: no document, no meta folder."""
    source = tmp_path / "in.json"
    source.write_text(json.dumps(inputs))
    result = cli("new", C, "--id", "u1", "--input", str(source))
    assert result.code == 2, result.err
    assert named in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]
