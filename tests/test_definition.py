"""Machine-file schema: strict parsing that reports every problem with its location and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsm.base.errors import DefinitionError
from fsm.model.definition import (
    Problem,
    did_you_mean,
    format_location,
    guard_name,
    parse_definition,
    read_definition,
)

COUNTER = Path(__file__).parent / "engine_machines" / "counter" / "machine.yaml"

# Line numbers matter: the broken variants below point at them.
BASE = """\
name: tiny
version: 1
description: A tiny machine.
module: functions.py
document: Counter
state: {field: phase}
initial: idle
storage:
  document: "{id}.json"
control:
  field: status
  commands:
    start: {source: created, dest: running, description: Start.}
states:
  idle: {description: Waiting.}
  done: {description: Finished., final: true}
transitions:
  - {event: go, source: idle, dest: done, description: Go.}
  - {event: wait, source: idle, dest: "=", guards: [not ready], description: Wait.}
  - {event: again, source: "*", dest: idle, description: Again.}
  - event: finish
    source: [idle]
    dest: done
    description: Finish.
"""

NAME_RULE = "not a valid name (letters, digits, '_' and '-', starting with a letter)"


def _variant(old: str, new: str) -> str:
    assert old in BASE, f"{old!r} is not in the base machine"
    return BASE.replace(old, new, 1)


def test_counter_machine_parses_without_problems() -> None:
    """The counter test machine is a valid definition."""
    spec, loaded, problems = parse_definition(COUNTER.read_text(encoding="utf-8"))
    assert problems == []
    assert spec is not None
    assert loaded is not None
    assert spec.name == "counter"
    assert list(spec.states) == ["idle", "counting", "done", "failed"]
    assert spec.states["done"].final is True
    assert spec.control is not None
    assert set(spec.control.commands) == {"start", "pause", "resume", "stop"}
    assert spec.transitions[2].guards == ["not below_limit"]
    assert spec.transitions[3].dest == "="
    assert spec.transitions[3].auto is False


def test_base_machine_parses_with_every_source_form() -> None:
    """A state, a ``"*"`` and a list are all valid sources; ``sources`` gives a list."""
    spec, _, problems = parse_definition(BASE)
    assert problems == []
    assert spec is not None
    assert [t.sources for t in spec.transitions] == [["idle"], ["idle"], ["*"], ["idle"]]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    dest: done\n",
            "    dets: done\n",
            Problem("transitions[3].dets", 23, "unknown key 'dets' (did you mean 'dest'?)"),
            id="unknown-key-did-you-mean",
        ),
        pytest.param(
            '  document: "{id}.json"\n',
            '  document: "{id}.json"\n  id_prefx: tiny\n',
            Problem("storage.id_prefx", 10, "unknown key 'id_prefx' (did you mean 'id_prefix'?)"),
            id="unknown-nested-key-did-you-mean",
        ),
        pytest.param(
            "version: 1\n",
            "version: 1\ncolour: red\n",
            Problem("colour", 3, "unknown key 'colour'"),
            id="unknown-key-nothing-close",
        ),
        pytest.param(
            "    dest: done\n",
            "",
            Problem("transitions[3].dest", 21, "required key is missing"),
            id="missing-transition-key",
        ),
        pytest.param(
            "initial: idle\n",
            "",
            Problem("initial", 1, "required key is missing"),
            id="missing-top-level-key",
        ),
        pytest.param(
            "final: true",
            "final: yes",
            Problem("states.done.final", 16, "must be true or false (got 'yes')"),
            id="final-yes",
        ),
        pytest.param(
            "event: go,",
            "event: go now,",
            Problem("transitions[0].event", 18, f"{NAME_RULE} (got 'go now')"),
            id="bad-event-name",
        ),
        pytest.param(
            "  idle: {",
            "  9lives: {",
            Problem("states.9lives", 15, f"{NAME_RULE} (got '9lives')"),
            id="bad-state-name",
        ),
        pytest.param(
            "state: {field: phase}",
            "state: {field: my-phase}",
            Problem(
                "state.field",
                6,
                "not a valid field path (names of letters, digits and '_', joined by '.') "
                "(got 'my-phase')",
            ),
            id="bad-field-path",
        ),
        pytest.param(
            "[not ready]",
            "[maybe ready]",
            Problem(
                "transitions[1].guards[0]",
                19,
                "not a valid guard reference (a guard name, or 'not ' and a guard name) "
                "(got 'maybe ready')",
            ),
            id="bad-guard-reference",
        ),
        pytest.param(
            "    start:",
            "    begin:",
            Problem(
                "control.commands.begin",
                13,
                "unknown control command (use one of start, pause, resume, stop)",
            ),
            id="unknown-control-command",
        ),
        pytest.param(
            '  document: "{id}.json"\n',
            '  document: "{id}.json"\n  read_retries: 99\n',
            Problem(
                "storage.read_retries", 10, "Input should be less than or equal to 50 (got 99)"
            ),
            id="retries-out-of-range",
        ),
    ],
)
def test_broken_definition_reports_location_and_line(old: str, new: str, expected: Problem) -> None:
    """Each broken definition yields no spec and a problem naming its location and line."""
    spec, _, problems = parse_definition(_variant(old, new))
    assert spec is None
    assert expected in problems


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("", 1, id="empty-file"),
        pytest.param("- name: tiny\n", 1, id="list"),
        pytest.param("just some text\n", 1, id="scalar"),
    ],
)
def test_a_file_that_is_not_a_mapping_is_one_problem(text: str, line: int) -> None:
    """An empty or non-mapping file is one problem for the whole file."""
    spec, _, problems = parse_definition(text)
    assert spec is None
    assert problems == [Problem("", line, "a machine file must be a mapping of keys to values")]


def test_malformed_yaml_is_one_problem() -> None:
    """YAML that does not parse is reported once, with its line, and no spec."""
    spec, loaded, problems = parse_definition(BASE + "  - {event: [oops\n")
    assert spec is None
    assert loaded is None
    assert len(problems) == 1
    assert problems[0].line == 26
    assert problems[0].message.startswith("malformed YAML")


def test_duplicate_key_alone_rejects_the_definition() -> None:
    """A duplicate key is a problem even when the remaining data validates."""
    spec, _, problems = parse_definition(
        _variant("initial: idle\n", "initial: idle\ninitial: go\n")
    )
    assert spec is None
    assert problems == [Problem("", 8, "duplicate key 'initial'")]


def test_every_problem_in_a_file_is_reported() -> None:
    """Several independent mistakes are all reported at once, each at its own line."""
    text = _variant("final: true", "final: no")
    text = text.replace("event: go,", "evnt: go,").replace("    start:", "    begin:")
    text = text.replace(
        "description: A tiny machine.\n", "description: A tiny machine.\nname: again\n"
    )
    spec, _, problems = parse_definition(text)
    assert spec is None
    found = {(p.location, p.line) for p in problems}
    assert {
        ("", 4),
        ("states.done.final", 17),
        ("transitions[0].evnt", 19),
        ("transitions[0].event", 19),
        ("control.commands.begin", 14),
    } <= found


def test_read_definition_names_the_file_in_every_problem(tmp_path: Path) -> None:
    """Reading a broken file raises one DefinitionError listing ``file:line: location: message``."""
    path = tmp_path / "machine.yaml"
    path.write_text(_variant("    dest: done\n", "    dets: done\n"), encoding="utf-8")
    with pytest.raises(DefinitionError) as caught:
        read_definition(path)
    assert f"{path}:23: transitions[3].dets: unknown key 'dets' (did you mean 'dest'?)" in (
        caught.value.problems
    )
    assert f"{path}:21: transitions[3].dest: required key is missing" in caught.value.problems
    assert str(path) in str(caught.value)


def test_read_definition_of_a_missing_file_is_a_definition_error(tmp_path: Path) -> None:
    """A machine file that cannot be read is a DefinitionError, not an OSError."""
    with pytest.raises(DefinitionError, match="cannot read machine file"):
        read_definition(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("loc", "text"),
    [
        pytest.param(("transitions", 3, "dest"), "transitions[3].dest", id="list-index"),
        pytest.param(("states", "idle", "final"), "states.idle.final", id="keys"),
        pytest.param((), "", id="whole-file"),
    ],
)
def test_format_location(loc: tuple[str | int, ...], text: str) -> None:
    """Locations read like ``transitions[3].dest``."""
    assert format_location(loc) == text


def test_problem_renders_with_and_without_line() -> None:
    """A problem renders as ``source:line: location: message``; parts it lacks are left out."""
    assert Problem("initial", 7, "bad").render("m.yaml") == "m.yaml:7: initial: bad"
    assert Problem("", None, "bad").render("m.yaml") == "m.yaml: bad"


def test_guard_name_splits_negation() -> None:
    """``not x`` is the guard ``x`` negated."""
    assert guard_name("not ready") == ("ready", True)
    assert guard_name("ready") == ("ready", False)


def test_did_you_mean_suggests_only_close_words() -> None:
    """A suggestion is given for a near miss and omitted for an unrelated word."""
    assert did_you_mean("dets", ["dest", "event"]) == " (did you mean 'dest'?)"
    assert did_you_mean("zzz", ["dest", "event"]) == ""


def test_a_name_registered_twice_is_refused() -> None:
    """Registering a second, different guard under a taken name is an error (it would silently
    replace the first); registering the same one again is harmless."""
    from fsm.base.errors import DefinitionError
    from fsm.model.registry import Registry

    registry = Registry()

    def ready(doc: object, ctx: object) -> bool:
        return True

    def other(doc: object, ctx: object) -> bool:
        return False

    registry.guard(ready)
    registry.guard(ready)
    with pytest.raises(DefinitionError, match="guard 'ready' is registered twice"):
        registry.guard(name="ready")(other)


def test_the_hooks_a_file_may_name_are_the_typed_hooks() -> None:
    """machine.yaml's `hooks:` table accepts exactly the hooks the engine calls, typed."""
    from fsm.model.definition import HooksSpec
    from fsm.model.registry import HOOK_NAMES

    assert tuple(HooksSpec.model_fields) == HOOK_NAMES
