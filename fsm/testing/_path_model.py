"""What the search of :mod:`fsm.testing.paths` works with: the answers a call may get, a
scenario, and what the search found."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fsm.coverage.report import machine_report
from fsm.coverage.tally import Edge, Tally
from fsm.model.machine import Machine
from fsm.testing._scripted import Answer, Call, Reply

__all__ = [
    "DEFAULT_ANSWERS",
    "Answers",
    "Exploration",
    "Found",
    "Move",
    "Option",
    "Scenario",
    "agent_says",
    "edits",
]


@dataclass(frozen=True)
class _Edits:
    path: str
    reply: Reply

    def __call__(self, call: Call) -> Reply:
        target = call.cwd / self.path
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as out:
            out.write("edited by a scripted agent\n")
        return self.reply


def edits(path: str, reply: Reply) -> Answer:
    """An answer that appends a line to ``path`` (relative to the call's folder), as an agent
    that changes files would, then gives ``reply``."""
    return _Edits(path, reply)


@dataclass(frozen=True)
class Option:
    """One answer a call may get: a reply, perhaps after editing a file."""

    label: str
    reply: Reply
    edit: str | None = None

    def answer(self) -> Answer:
        return self.reply if self.edit is None else edits(self.edit, self.reply)

    def source(self) -> str:
        """The answer as Python source for a generated test."""
        fields = [
            f"{name}={getattr(self.reply, name)!r}"
            for name, default in Reply.__dataclass_fields__.items()
            if getattr(self.reply, name) != default.default
        ]
        reply = f"Reply({', '.join(fields)})"
        return reply if self.edit is None else f"edits({self.edit!r}, {reply})"


@dataclass(frozen=True)
class Answers:
    """The options of the calls of one kind (``agent``, ``shell``, ``run``), of one tool (None:
    any) whose text matches ``match`` (a regular expression, searched; None: every call)."""

    kind: Literal["agent", "shell", "run"]
    tool: str | None
    options: tuple[Option, ...]
    match: str | None = None

    def matches(self, call: Call) -> bool:
        if call.kind != self.kind or self.tool not in (None, call.tool):
            return False
        return self.match is None or re.search(self.match, call.text) is not None


EDITED = "fsm-scripted-edit.txt"
_COMMAND = (
    Option("exits 0", Reply()),
    Option("exits 1", Reply(exit_code=1, stdout="1 failed")),
    Option("times out", Reply(timed_out=True)),
)
DEFAULT_ANSWERS = (
    Answers(
        "agent",
        None,
        (
            Option("edits a file, exits 0", Reply(stdout="done"), edit=EDITED),
            Option("changes nothing, exits 0", Reply(stdout="done")),
            Option("exits 1", Reply(exit_code=1, stderr="agent failed")),
            Option("times out", Reply(timed_out=True)),
        ),
    ),
    Answers("shell", None, _COMMAND),
    Answers("run", None, _COMMAND),
)
"""What any agent, shell command or program may answer when a machine declares nothing."""


def agent_says(texts: Sequence[str]) -> list[Answers]:
    """Answers any agent may give, each exit 0 with one of ``texts`` on stdout (what a machine's
    actions look for in an agent's answer: ``APPROVE``, ``CHANGES: ...``)."""
    options = tuple(Option(f"says {text}", Reply(stdout=text)) for text in texts)
    return [Answers("agent", None, options)] if options else []


Move = tuple[str, ...]
"""``("step",)``, ``("fire", event)`` or ``("control", command)``."""


@dataclass(frozen=True)
class Scenario:
    """One scripted scenario: creation inputs, moves, and the answer chosen for each call."""

    inputs: int
    moves: tuple[Move, ...]
    choices: tuple[int, ...]
    repeats: int = 0
    before: int = 0
    """Journal records when the path's last move began (a move that wrote none is not
    repeated)."""


Found = tuple[Scenario, list[tuple[int, int]], list[str], dict[str, Any]]
"""A path, the (rule, option) of its calls, the states it went through, its last document."""


@dataclass
class Exploration:
    """What :func:`explore` found."""

    machine: Machine
    inputs: list[dict[str, Any]]
    files: dict[str, str]
    answers: tuple[Answers, ...]
    best: dict[Edge, Found]
    """Each edge taken: the first (shortest) path, its calls, its states, its last document."""
    tally: Tally
    control: dict[tuple[str, str], Found] = field(default_factory=dict)
    """Each control command given, by (command, status it was given in): likewise."""
    runs: int = 0
    seconds: float = 0.0
    truncated: bool = False

    def missed(self) -> list[str]:
        """Each declared edge no path took, with the reason the journals give."""
        report = machine_report(self.machine, self.tally)
        return [
            f"{e['source']} --{e['event']}--> {e['dest']} (#{e['transition']}): {e['reason']}"
            for e in report["edges"]
            if not e["count"]
        ]
