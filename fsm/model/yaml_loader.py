"""Strict YAML loading for machine files.

PyYAML's safe loader follows YAML 1.1, where ``on``, ``off``, ``yes`` and ``no`` silently become
booleans: an event named ``on`` would turn into ``True``. Here only ``true`` and ``false`` are
booleans; the YAML 1.1 words stay strings, so a boolean field given ``yes`` is rejected by the
schema instead of being guessed (and ``=`` is the text ``=``, not YAML 1.1's "value" tag).
Duplicate mapping keys are errors (PyYAML keeps the last one). Every value's line is recorded so
that problems can name ``file:line``.

Hostile files are read with limits (size, nesting, alias expansion, plain-data tags only; see
:mod:`fsm.model._yaml_limits`): breaking one is a problem like a syntax error, found before any node
is built, so a machine file never hangs, crashes or runs code while it is read.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.model import _yaml_limits
from fsm.model._yaml_limits import MAX_ALIAS_NODES, MAX_BYTES, MAX_DEPTH

if TYPE_CHECKING:
    import yaml

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "LoadedYaml",
    "YamlProblem",
    "load_yaml",
    "read_yaml_file",
]

Location = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"


@functools.cache
def _strict_loader() -> type[yaml.SafeLoader]:
    """SafeLoader (libyaml's when available) whose booleans are only ``true``/``false``.

    Made (and PyYAML imported) when a machine file is first parsed: a command that finds the
    definition checked already (:mod:`fsm.base.cache`) never needs YAML.
    """
    import yaml

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _StrictLoader(base):  # type: ignore[valid-type,misc]
        """SafeLoader whose booleans are only ``true``/``false``."""

    # YAML 1.1's "value" tag (a bare ``=``) has no constructor: it stays text, like ``dest: "="``.
    dropped = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:value"}
    _StrictLoader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in dropped]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _StrictLoader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )
    return _StrictLoader


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


def read_yaml_file(path: Path) -> str:
    """The text of the YAML file at ``path``, read only as far as the size limit.

    Raises OSError, UnicodeDecodeError, or ValueError when the file is larger than
    :data:`MAX_BYTES` (a FIFO or ``/dev/zero`` named as a machine file ends at once).
    """
    from fsm.base.reading import FileTooLargeError, read_limited

    try:
        raw = read_limited(path, MAX_BYTES)
    except FileTooLargeError as exc:
        raise ValueError(str(exc)) from exc
    return raw.decode("utf-8")


def load_yaml(text: str) -> tuple[LoadedYaml | None, list[YamlProblem]]:
    """Parse ``text`` strictly; return the data (or None) and every problem found.

    The data is None when the text cannot be read at all: malformed YAML or a broken limit
    (one problem then says which).
    """
    import yaml

    if len(text) > MAX_BYTES:  # characters: the readers check the bytes before decoding
        return None, [YamlProblem(1, f"larger than the limit of {MAX_BYTES} bytes")]
    strict = _strict_loader()
    try:
        limit = _yaml_limits.first_problem(yaml.parse(text, Loader=strict))
        if limit is not None:
            return None, [YamlProblem(*limit)]
        loader = strict(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        nesting = _yaml_limits.flow_nesting_problem(text)
        if nesting is not None:
            return None, [YamlProblem(*nesting)]
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        if context and problem.startswith("but "):  # "expected a single document ..., but ..."
            problem = f"{context}, {problem}"
        return None, [YamlProblem(line, f"malformed YAML: {problem}")]
    if node is None:
        return LoadedYaml(None), []
    builder = _Builder(loader)
    data = builder.build(node, (), builder.lines)
    return LoadedYaml(data, builder.lines), builder.problems


class _Builder:
    """Python data from composed nodes, with the line of every location and the problems.

    The limits were checked on the events, so the recursion is at most ``MAX_DEPTH`` deep and
    aliases are built at most ``MAX_ALIAS_NODES`` extra times.
    """

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.lines: dict[Location, int] = {}
        self.problems: list[YamlProblem] = []
        # Keys a mapping wrote itself, found before its merge keys are flattened in place (an
        # aliased mapping is built again, already flattened).
        self._own_keys: dict[int, set[int]] = {}

    def build(self, node: yaml.Node, location: Location, lines: dict[Location, int]) -> Any:
        import yaml

        lines[location] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, location, lines)
        if isinstance(node, yaml.SequenceNode):
            return [
                self.build(item, (*location, index), lines) for index, item in enumerate(node.value)
            ]
        try:
            return self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # An explicit tag on a value it cannot read (``!!int abc``, ``!!bool maybe``), or an
            # integer beyond Python's digit limit.
            value = node.value if len(node.value) <= 40 else node.value[:37] + "..."
            tag = node.tag.rpartition(":")[2]
            reason = "too many digits" if "integer string conversion" in str(exc) else "invalid"
            self.problems.append(
                YamlProblem(node.start_mark.line + 1, f"cannot read '{value}' as {tag}: {reason}")
            )
            return None

    def _mapping(
        self, node: yaml.MappingNode, location: Location, lines: dict[Location, int]
    ) -> dict[Any, Any]:
        import yaml

        # Keys merged in by ``<<: *anchor`` may be overridden by the mapping's own keys (YAML's
        # merge rule); only a key written twice in the mapping itself is a duplicate.
        own_keys = self._own_keys.get(id(node))
        if own_keys is None:
            own_keys = {id(key) for key, _ in node.value if key.tag != _MERGE_TAG}
            self._own_keys[id(node)] = own_keys
            try:
                self.loader.flatten_mapping(node)
            except yaml.MarkedYAMLError as exc:  # ``<<: 1``: a merge key needs mappings
                mark = exc.problem_mark or node.start_mark
                self.problems.append(YamlProblem(mark.line + 1, f"malformed merge: {exc.problem}"))
                return {}
        mapping: dict[Any, Any] = {}
        written: set[Any] = set()
        for key_node, value_node in node.value:
            key = self.build(key_node, location, {})
            line = key_node.start_mark.line + 1
            if not isinstance(key, str | int):
                self.problems.append(YamlProblem(line, f"mapping key {key!r} is not a name"))
                continue
            if key in written:
                self.problems.append(YamlProblem(line, f"duplicate key {key!r}"))
                continue
            if id(key_node) in own_keys:
                written.add(key)
            mapping[key] = self.build(value_node, (*location, key), lines)
            # A block value starts on the line after its key; problems belong on the key's line.
            lines[(*location, key)] = line
        return mapping
