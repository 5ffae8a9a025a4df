"""Strict YAML loading for machine files.

PyYAML's safe loader follows YAML 1.1, where ``on``, ``off``, ``yes`` and ``no`` silently become
booleans: an event named ``on`` would turn into ``True``. Here only ``true`` and ``false`` are
booleans; the YAML 1.1 words stay strings, so a boolean field given ``yes`` is rejected by the
schema instead of being guessed. Duplicate mapping keys are errors (PyYAML keeps the last one).
Every value's line is recorded so that problems can name ``file:line``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["LoadedYaml", "YamlProblem", "load_yaml"]

Location = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"


# libyaml when PyYAML was built with it, else the pure-Python loader.
_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_Base):  # type: ignore[valid-type,misc]
    """SafeLoader (libyaml's when available) whose booleans are only ``true``/``false``."""


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


@dataclass(frozen=True)
class YamlProblem:
    """A problem found while reading YAML, with the 1-based line it is on."""

    line: int
    message: str


@dataclass
class LoadedYaml:
    """The data of a YAML document and the line of every location in it."""

    data: Any
    lines: dict[Location, int] = field(default_factory=dict)

    def line_of(self, location: Location) -> int | None:
        """Return the line of ``location``, or of its nearest recorded parent."""
        loc = tuple(location)
        while True:
            if loc in self.lines:
                return self.lines[loc]
            if not loc:
                return None
            loc = loc[:-1]


def load_yaml(text: str) -> tuple[LoadedYaml | None, list[YamlProblem]]:
    """Parse ``text`` strictly; return the data (or None) and every problem found."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, [YamlProblem(line, f"malformed YAML: {problem}")]
    finally:
        loader.dispose()
    if node is None:
        return LoadedYaml(None), []
    result = LoadedYaml(None)
    problems: list[YamlProblem] = []
    result.data = _build(loader, node, (), result.lines, problems)
    return result, problems


def _build(
    loader: _StrictLoader,
    node: yaml.Node,
    location: Location,
    lines: dict[Location, int],
    problems: list[YamlProblem],
) -> Any:
    lines[location] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        # Keys merged in by ``<<: *anchor`` may be overridden by the mapping's own keys (YAML's
        # merge rule); only a key written twice in the mapping itself is a duplicate.
        own_keys = {id(key_node) for key_node, _ in node.value if key_node.tag != _MERGE_TAG}
        loader.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        written: set[Any] = set()
        for key_node, value_node in node.value:
            key = _build(loader, key_node, location, {}, problems)
            if not isinstance(key, str | int):
                problems.append(
                    YamlProblem(key_node.start_mark.line + 1, f"mapping key {key!r} is not a name")
                )
                continue
            if key in written:
                problems.append(YamlProblem(key_node.start_mark.line + 1, f"duplicate key {key!r}"))
                continue
            if id(key_node) in own_keys:
                written.add(key)
            mapping[key] = _build(loader, value_node, (*location, key), lines, problems)
            # A block value starts on the line after its key; problems belong on the key's line.
            lines[(*location, key)] = key_node.start_mark.line + 1
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [
            _build(loader, item, (*location, index), lines, problems)
            for index, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)
