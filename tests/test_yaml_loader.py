"""Strict YAML loading: YAML 1.1 words stay strings, duplicates and syntax errors have lines."""

from __future__ import annotations

import pytest

from fsm.model.yaml_loader import LoadedYaml, YamlProblem, load_yaml


def _load(text: str) -> LoadedYaml:
    loaded, problems = load_yaml(text)
    assert problems == []
    assert loaded is not None
    return loaded


@pytest.mark.parametrize("word", ["on", "off", "yes", "no", "On", "YES", "y", "n"])
def test_yaml_1_1_boolean_words_stay_strings(word: str) -> None:
    """``on``/``off``/``yes``/``no`` (any case) are strings, so an event named ``on`` survives."""
    assert _load(f"event: {word}\n").data == {"event": word}


@pytest.mark.parametrize(
    ("word", "value"),
    [("true", True), ("false", False), ("True", True), ("FALSE", False)],
)
def test_true_and_false_are_booleans(word: str, value: bool) -> None:
    """Only ``true`` and ``false`` become booleans."""
    assert _load(f"final: {word}\n").data == {"final": value}


def test_boolean_words_as_keys_stay_strings() -> None:
    """A key spelled ``on`` is the string ``on``, not ``True``."""
    assert _load("on: 1\nno: 2\n").data == {"on": 1, "no": 2}


def test_other_scalars_keep_their_types() -> None:
    """Numbers, null and quoted text are resolved as usual."""
    data = _load("a: 1\nb: 1.5\nc: null\nd: '1'\ne:\n").data
    assert data == {"a": 1, "b": 1.5, "c": None, "d": "1", "e": None}


def test_duplicate_keys_are_problems_with_their_lines() -> None:
    """Every repeated key is reported on the line of the repetition, top level and nested."""
    text = "a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"
    loaded, problems = load_yaml(text)
    assert problems == [
        YamlProblem(4, "duplicate key 'c'"),
        YamlProblem(5, "duplicate key 'a'"),
    ]
    assert loaded is not None
    assert loaded.data == {"a": 1, "b": {"c": 1}}


def test_merge_key_may_be_overridden() -> None:
    """A key merged from an anchor and written again is an override, not a duplicate."""
    text = "base: &b {k: 1, m: 2}\nitem:\n  <<: *b\n  k: 3\n"
    assert _load(text).data == {"base": {"k": 1, "m": 2}, "item": {"k": 3, "m": 2}}


def test_key_that_is_not_a_name_is_a_problem() -> None:
    """A sequence used as a mapping key is reported with its line."""
    _, problems = load_yaml("a: 1\n? [x, y]\n: 2\n")
    assert problems == [YamlProblem(2, "mapping key ['x', 'y'] is not a name")]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("a: [1, 2\nb: 3\n", 2, id="unclosed-flow-sequence"),
        pytest.param("a: 1\n  b: 2\n", 2, id="bad-indentation"),
        pytest.param("a: 1\nb: 'open\n", 3, id="unclosed-quote"),
        pytest.param("a: 1\n---\nb: 2\n", 2, id="two-documents"),
        pytest.param("a:\n\tb: 1\n", 2, id="tab-indentation"),
    ],
)
def test_malformed_yaml_is_one_problem_with_a_line(text: str, line: int) -> None:
    """Malformed YAML yields no data and exactly one problem on the offending line."""
    loaded, problems = load_yaml(text)
    assert loaded is None
    assert len(problems) == 1
    assert problems[0].line == line
    assert problems[0].message.startswith("malformed YAML: ")


def test_empty_text_is_no_data_and_no_problem() -> None:
    """An empty document loads as None; the schema decides whether that is acceptable."""
    loaded, problems = load_yaml("")
    assert problems == []
    assert loaded is not None
    assert loaded.data is None


def test_lines_are_recorded_for_nested_locations() -> None:
    """Keys, nested keys and list items each record the line they are written on."""
    text = (
        "name: x\n"  # 1
        "states:\n"  # 2
        "  idle:\n"  # 3
        "    description: waiting\n"  # 4
        "transitions:\n"  # 5
        "  - event: go\n"  # 6
        "    dest: done\n"  # 7
        "  - {event: stop, dest: idle}\n"  # 8
    )
    loaded = _load(text)
    assert loaded.line_of(("name",)) == 1
    assert loaded.line_of(("states",)) == 2
    assert loaded.line_of(("states", "idle")) == 3
    assert loaded.line_of(("states", "idle", "description")) == 4
    assert loaded.line_of(("transitions", 0)) == 6
    assert loaded.line_of(("transitions", 0, "dest")) == 7
    assert loaded.line_of(("transitions", 1, "dest")) == 8


def test_line_of_falls_back_to_the_nearest_recorded_parent() -> None:
    """A missing key's location takes the line of the mapping it is missing from."""
    loaded = _load("a: 1\nb:\n  c: 2\n")
    assert loaded.line_of(("b", "missing", 3)) == 2
    assert loaded.line_of(("nowhere",)) == 1


def test_line_of_is_none_without_data() -> None:
    """An empty document has no lines at all."""
    loaded = _load("")
    assert loaded.line_of(("a",)) is None
