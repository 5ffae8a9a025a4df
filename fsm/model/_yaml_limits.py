"""The limits a machine file's YAML must keep, checked on its events before anything is built.

A machine file may come from anywhere (a cloned repository, a plugin), so reading one must end
quickly with "bad input" whatever it holds. PyYAML alone does not: ~400 bytes of anchors and
aliases (each level a list of nine aliases to the one before) expand to 400 million nodes and
hang past 60 s at 2.4 GB; an alias inside the node it names recurses without end; 30,000
nested brackets overflow the C stack in libyaml's composer (a segfault); tags such as
``!!python/name:os.system`` ask for constructors a data file has no use for.

libyaml's parser keeps its own stack, so its *events* are safe to read whatever the nesting.
:func:`first_problem` walks them once and stops at the first limit broken, before a node is
composed:

* nesting: at most :data:`MAX_DEPTH` (100) levels of lists and mappings, counting the levels an
  alias brings in where it is used (machine files use about 6);
* aliases: anchors, aliases and merge keys (``<<: *base``) are allowed, but all aliases together
  may bring in at most :data:`MAX_ALIAS_NODES` (10,000) nodes and :data:`MAX_ALIAS_BYTES` (1 MiB)
  of scalar text, each alias counting the nodes and text of what it names, aliases in it
  included (so the cost of a bomb is counted, not paid: a few aliases of one long string weigh
  as much as many aliases of short ones); an alias inside the node it names (a recursive alias)
  is refused;
* tags: only plain data: ``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null`` and
  ``!!timestamp`` on scalars, ``!!seq`` and ``!!map`` on lists and mappings (and ``!``).

The size limit (:data:`MAX_BYTES`) is checked by the readers before parsing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import yaml

__all__ = [
    "MAX_ALIAS_BYTES",
    "MAX_ALIAS_NODES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "first_problem",
    "flow_nesting_problem",
]

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_ALIAS_NODES = 10_000
MAX_ALIAS_BYTES = 1024 * 1024

_STANDARD = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(
    {"!"} | {_STANDARD + name for name in ("str", "int", "float", "bool", "null", "timestamp")}
)
_SEQUENCE_TAGS = frozenset({"!", _STANDARD + "seq"})
_MAPPING_TAGS = frozenset({"!", _STANDARD + "map"})


@dataclass
class _Open:
    """A list or mapping whose end event has not come yet."""

    anchor: str | None
    first_node: int  # the node count when it opened, itself included
    first_byte: int  # the scalar text counted before it opened
    level: int
    deepest: int  # the deepest level reached inside it, aliases expanded


def first_problem(events: Iterable[yaml.Event]) -> tuple[int, str] | None:
    """The first limit the YAML ``events`` break, as (1-based line, message), or None.

    Stops reading events at the first problem: nothing after it is parsed.
    """
    import yaml  # only when a machine file is parsed: a cached definition needs no YAML

    nodes = 0
    text = 0  # characters of scalars, aliased ones counted again
    through_aliases = 0
    text_through_aliases = 0
    # anchor -> (nodes, levels, scalar text) of what it names
    anchored: dict[str, tuple[int, int, int]] = {}
    open_: list[_Open] = []
    for event in events:
        line = event.start_mark.line + 1 if event.start_mark is not None else 1
        if isinstance(event, yaml.AliasEvent):
            name = event.anchor
            if any(o.anchor == name for o in open_):
                return line, f"alias '*{name}' is inside the node it names (a recursive alias)"
            size, levels, length = anchored.get(name or "", (1, 0, 0))
            nodes += size
            text += length
            through_aliases += size
            text_through_aliases += length
            if through_aliases > MAX_ALIAS_NODES:
                return line, (
                    f"aliases expand to more than {MAX_ALIAS_NODES} nodes (at '*{name}'); "
                    "write the repeated parts out instead"
                )
            if text_through_aliases > MAX_ALIAS_BYTES:
                return line, (
                    f"aliases expand to more than {MAX_ALIAS_BYTES} bytes of text (at "
                    f"'*{name}'); write the repeated parts out instead"
                )
            reached = len(open_) + levels
            if reached > MAX_DEPTH:
                return line, f"nested deeper than {MAX_DEPTH} levels (through alias '*{name}')"
            if open_:
                open_[-1].deepest = max(open_[-1].deepest, reached)
        elif isinstance(event, yaml.ScalarEvent):
            if event.tag is not None and event.tag not in _SCALAR_TAGS:
                return line, _refused_tag(event.tag)
            nodes += 1
            text += len(event.value)
            if event.anchor is not None:
                anchored[event.anchor] = (1, 0, len(event.value))
        elif isinstance(event, yaml.CollectionStartEvent):
            is_list = isinstance(event, yaml.SequenceStartEvent)
            if event.tag is not None and event.tag not in (
                _SEQUENCE_TAGS if is_list else _MAPPING_TAGS
            ):
                return line, _refused_tag(event.tag)
            nodes += 1
            level = len(open_) + 1
            if level > MAX_DEPTH:
                return line, f"nested deeper than {MAX_DEPTH} levels"
            open_.append(_Open(event.anchor, nodes, text, level, level))
        elif isinstance(event, yaml.CollectionEndEvent):
            done = open_.pop()
            if open_:
                open_[-1].deepest = max(open_[-1].deepest, done.deepest)
            if done.anchor is not None:
                anchored[done.anchor] = (
                    nodes - done.first_node + 1,
                    done.deepest - done.level + 1,
                    text - done.first_byte,
                )
    return None


def flow_nesting_problem(text: str) -> tuple[int, str] | None:
    """Where brackets in ``text`` open more than :data:`MAX_DEPTH` levels, as (line, message).

    libyaml's scanner reads a whole run of opening brackets before it hands out the first event
    (each could start a key), and refuses the run past its own limit in its own words, so a file
    nested that deep never reaches :func:`first_problem`. This scan gives fsm's verdict instead;
    the readers call it only after the parser failed, so an approximate reading of YAML is enough:
    brackets inside quoted text and comments do not count.
    """
    depth = 0
    line = 1
    quote = ""
    comment = False
    previous = "\n"
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\n":
            line += 1
            comment = False
        elif comment:
            pass
        elif quote:
            if quote == '"' and char == "\\":
                index += 1  # the escaped character cannot end the text
            elif char == quote:
                quote = ""
        elif char in "\"'" and previous in " \t\n[{,:":
            quote = char
        elif char == "#" and previous in " \t\n":
            comment = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line, f"nested deeper than {MAX_DEPTH} levels"
        elif char in "]}":
            depth = max(0, depth - 1)
        previous = char
        index += 1
    return None


def _refused_tag(tag: str) -> str:
    shown = "!!" + tag[len(_STANDARD) :] if tag.startswith(_STANDARD) else tag
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return (
        f"tag '{shown}' is not allowed: a machine file holds plain data (text, numbers, "
        "booleans, null, lists and mappings)"
    )
