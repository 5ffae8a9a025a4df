"""Generated paths: for each edge of a machine, the shortest scripted scenario that takes it.

:func:`explore` searches, breadth first, over what a test may do to an instance (creation inputs,
automatic steps, manual events, control commands) and what its actions' agents and commands may
answer (:class:`Answers`: options per call, with defaults for agents, shell commands and programs:
exit 0 with a file edited or with none, exit 1, a timeout). Every path runs from scratch on the
real engine, in memory (:class:`~fsm.testing.MemoryStorage`), with a
:class:`~fsm.testing.ScriptedExecutor`. Answers are chosen call by call: a path's calls beyond its
script take their first option, and each later option of each such call becomes a sibling path.

Documents are abstracted by the state, the control status and the values of the guards of the
transitions leaving the state: a path reaching an abstract state already seen is not branched
again, only stepped on (up to ``loop_limit`` times: a budget loop runs until its guard flips).
The search ends when every edge is taken, or at ``depth`` moves, ``runs`` paths or ``seconds``;
what it did not take it names, with the reason :mod:`fsm.coverage.report` gives.

:func:`write_tests` turns the shortest path to each edge into a plain pytest test: a harness,
the scripted answers, the moves, then the path and the document the search saw, asserted.
"""

from __future__ import annotations

import os
import pprint
import re
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fsm.base.errors import FsmError
from fsm.coverage.report import machine_report
from fsm.coverage.tally import Edge, Tally, targets_of
from fsm.model.machine import Machine
from fsm.model.records import ControlRecord, TransitionRecord
from fsm.store.memory import MemoryStorage
from fsm.testing._driver import Driver
from fsm.testing._harness import Harness
from fsm.testing._scripted import Answer, Call, Reply, ScriptedExecutor

__all__ = [
    "DEFAULT_ANSWERS",
    "Answers",
    "Exploration",
    "Option",
    "Scenario",
    "agent_says",
    "edits",
    "explore",
    "input_variants",
    "write_tests",
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


@dataclass
class _Run:
    calls: list[tuple[int, int]] = field(default_factory=list)
    """(rule, option) of each call, in order."""


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


class _Replay:
    """Runs one path on a fresh harness."""

    def __init__(self, exploration: Exploration, path: Scenario) -> None:
        self.x = exploration
        self.path = path
        self.run = _Run()
        executor = ScriptedExecutor()
        # The last rule added answers first: defaults first, the machine's own after them.
        for index in reversed(range(len(exploration.answers))):
            rule = exploration.answers[index]
            chooser = self._chooser(index)
            if rule.kind == "agent":
                executor.on_agent(rule.tool, chooser, match=rule.match)
            elif rule.kind == "shell":
                executor.on_shell(chooser, match=rule.match)
            else:
                executor.on_run(chooser, match=rule.match, program=rule.tool)
        self.harness: Harness[Any] = Harness(
            exploration.machine, storage=MemoryStorage(), executor=executor
        )

    def _chooser(self, rule: int) -> Answer:
        def choose(call: Call) -> Reply | None:
            position = len(self.run.calls)
            choices = self.path.choices
            option = choices[position] if position < len(choices) else 0
            self.run.calls.append((rule, option))
            answer = self.x.answers[rule].options[option].answer()
            return answer(call) if callable(answer) else answer

        return choose

    def play(self) -> Driver[Any] | None:
        """The driver after the path's moves; None when a move was refused."""
        for name, text in self.x.files.items():
            target = self.harness.root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        try:
            driver = self.harness.create(self.x.inputs[self.path.inputs])
            for move in self.path.moves:
                if move[0] == "step":
                    driver.step()
                elif move[0] == "fire":
                    driver.fire(move[1])
                else:
                    driver.control(move[1])
        except FsmError:
            return None
        return driver

    def close(self) -> None:
        self.harness.close()


def _abstract(machine: Machine, driver: Driver[Any]) -> tuple[Any, ...]:
    """State, status and the values of the guards deciding at the state."""
    loaded = driver.instance.peek()
    ctx = driver.instance.context()
    vector: list[bool | None] = []
    for transition in machine.transitions_from(loaded.state):
        tctx = ctx.for_transition(
            transition.event, loaded.state, transition.dest_from(loaded.state)
        )
        for guard in transition.guards:
            try:
                vector.append(guard.holds(loaded.doc, tctx))
            except Exception:  # a guard that raises decides too: its value is "raised"
                vector.append(None)
    return (loaded.state, loaded.status, tuple(vector))


def _moves(machine: Machine, driver: Driver[Any]) -> list[Move]:
    loaded = driver.instance.peek()
    moves: list[Move] = [("step",)]
    manual = [t.event for t in machine.transitions_from(loaded.state) if not t.auto]
    moves.extend(("fire", event) for event in dict.fromkeys(manual))
    control = machine.spec.control
    if control is not None and not machine.is_final(loaded.state):
        moves.extend(
            ("control", command)
            for command, spec in control.commands.items()
            if loaded.status in spec.sources
        )
    return moves


def explore(
    machine: Machine,
    *,
    inputs: Sequence[Mapping[str, Any]] | None = None,
    files: Mapping[str, str] | None = None,
    answers: Sequence[Answers] = (),
    depth: int = 30,
    runs: int = 5000,
    seconds: float = 60.0,
    loop_limit: int = 30,
    key: Callable[[Any], Hashable] | None = None,
) -> Exploration:
    """Search for the shortest scripted path to each edge of ``machine`` (module docstring).

    ``inputs``: creation inputs to try (each a root of the search; default:
    :func:`input_variants`); ``files``: written into the
    workspace before creating (a path relative to it -> its text); ``answers``: the machine's
    own answer options, tried before :data:`DEFAULT_ANSWERS`. ``key``: a function of the
    document refining the abstract state (each set of inputs is searched apart already).
    """
    x = Exploration(
        machine,
        [dict(i) for i in inputs] if inputs is not None else input_variants(machine),
        dict(files or {}),
        (*answers, *DEFAULT_ANSWERS),
        {},
        Tally(),
    )
    declared = targets_of(machine)
    targets = set(declared.edges)
    commands = set(declared.control)
    finals = frozenset(name for name, state in machine.states.items() if state.final)
    started = time.monotonic()
    queue = deque(Scenario(index, (), ()) for index in range(len(x.inputs)))
    seen: set[tuple[Any, ...]] = set()
    while queue and not (targets <= set(x.best) and commands <= set(x.control)):
        if x.runs >= runs or time.monotonic() - started > seconds:
            x.truncated = True
            break
        path = queue.popleft()
        x.runs += 1
        replay = _Replay(x, path)
        try:
            driver = replay.play()
            if driver is None:
                continue
            records = driver.records()
            x.tally.add(str(x.runs), records, finals)
            calls = replay.run.calls
            states = driver.path()
            for record in records:
                if isinstance(record, TransitionRecord):
                    edge = Edge(record.source, record.event, record.dest, record.transition)
                    if edge not in x.best:
                        x.best[edge] = (path, list(calls), states, driver.data)
                elif isinstance(record, ControlRecord) and record.status_from is not None:
                    given = (record.event, record.status_from)
                    if given in commands and given not in x.control:
                        x.control[given] = (path, list(calls), states, driver.data)
            # Siblings: each later option of each call the path did not script.
            for position in range(len(path.choices), len(calls)):
                rule, _ = calls[position]
                padding = (0,) * (position - len(path.choices))
                for option in range(1, len(x.answers[rule].options)):
                    queue.append(
                        Scenario(path.inputs, path.moves, (*path.choices, *padding, option))
                    )
            if machine.is_final(driver.state) or len(path.moves) >= depth:
                continue
            abstract = (path.inputs, *_abstract(machine, driver))
            if key is not None:
                abstract += (key(driver.doc),)
            fixed = (*path.choices, *(0,) * (len(calls) - len(path.choices)))
            if abstract in seen:
                if path.moves and path.repeats < loop_limit and len(records) > path.before:
                    again = (*path.moves, ("step",))
                    queue.append(
                        Scenario(path.inputs, again, fixed, path.repeats + 1, len(records))
                    )
                continue
            seen.add(abstract)
            queue.extend(
                Scenario(path.inputs, (*path.moves, move), fixed, 0, len(records))
                for move in _moves(machine, driver)
            )
        finally:
            replay.close()
    x.seconds = time.monotonic() - started
    return x


def input_variants(machine: Machine) -> list[dict[str, Any]]:
    """Creation inputs worth trying when none are given: the defaults, then, one field at a
    time, an integer at its lower bound, a flag flipped, a list emptied. A field without a
    default makes no variant (give ``inputs``)."""
    model = machine.inputs_model
    if model is None:
        return [{}]
    variants: list[dict[str, Any]] = [{}]
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        bounds = [getattr(m, "ge", None) for m in info.metadata]
        if isinstance(default, bool):
            variants.append({name: not default})
        elif isinstance(default, int) and not isinstance(default, bool):
            low = next((b for b in bounds if isinstance(b, int)), None)
            if low is not None and low != default:
                variants.append({name: low})
        elif isinstance(default, list) and default:
            variants.append({name: []})
    return variants


def _block(value: Any, indent: int) -> str:
    """``value`` as Python source, wrapped to fit a 100-column line at ``indent``."""
    text = pprint.pformat(value, width=max(40, 99 - indent), sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)


def _is_path(ref: str) -> bool:
    return "/" in ref or ref.endswith((".yaml", ".yml"))


def _machine_source(ref: str, beside: Path | None) -> str:
    if beside is None or not _is_path(ref):
        return repr(ref)
    relative = os.path.relpath(Path(ref).resolve(), beside.resolve())
    parts = ", ".join(repr(part) for part in Path(relative).parts)
    return f"Path(__file__).parent.joinpath({parts})"


def _identifier(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def _name(edge: Edge) -> str:
    return _identifier(f"test_t{edge.transition}_{edge.source}_{edge.event}_{edge.dest}")


def _rules_source(x: Exploration, calls: list[tuple[int, int]]) -> list[str]:
    used: dict[int, list[int]] = {}
    for index, option in calls:
        used.setdefault(index, []).append(option)
    lines = []
    # Added in the order the search added them: the last added answers first.
    for index in sorted(used, reverse=True):
        rule = x.answers[index]
        args = [rule.options[o].source() for o in used[index]]
        if rule.kind == "agent":
            args.insert(0, repr(rule.tool))
        elif rule.kind == "run":
            args.append(f"program={rule.tool!r}")
        if rule.match is not None:
            args.append(f"match={rule.match!r}")
        line = f"    executor.on_{rule.kind}({', '.join(args)})"
        if len(line) > 99:
            lines.append(f"    executor.on_{rule.kind}(")
            lines.extend(f"        {arg}," for arg in args)
            lines.append("    )")
        else:
            lines.append(line)
    return lines


def _move_source(move: Move) -> str:
    if move[0] == "step":
        return "driver.step()"
    if move[0] == "fire":
        return f"driver.fire({move[1]!r})"
    return f"driver.control({move[1]!r})"


def write_tests(
    exploration: Exploration,
    machine_ref: str,
    *,
    skip: Sequence[Edge] = (),
    beside: Path | None = None,
) -> str:
    """A pytest module with one test per edge the search took (less those in ``skip``, the
    edges a test suite already takes); ``machine_ref`` is how the tests name the machine (a
    registered name, or its machine.yaml path; with ``beside``, the folder the module is written
    to, a path is written relative to the module's own file, so the tests run from anywhere)."""
    x = exploration
    touched = set(x.machine.spec.storage.touch)
    lines = [
        f'"""Generated by fsm test-paths for {x.machine.name}: the shortest scripted path the',
        "search found to each edge, its answers, and the path and document it saw. Regenerate",
        'rather than edit (fsm test-paths MACHINE --out FILE)."""',
        "",
        "from __future__ import annotations",
        "",
        *(["from pathlib import Path"] if beside is not None and _is_path(machine_ref) else []),
        "from typing import Any",
        "",
        "from fsm.testing import Harness, MemoryStorage, Reply, ScriptedExecutor",
        "from fsm.testing.paths import edits",
        "",
        f"MACHINE = {_machine_source(machine_ref, beside)}",
        f"TOUCHED = {sorted(touched)!r}",
        '"""Fields fsm stamps on every write (their values follow the clock)."""',
        "",
        "",
        "def _stable(data: dict[str, Any]) -> dict[str, Any]:",
        "    return {key: value for key, value in data.items() if key not in TOUCHED}",
    ]
    found: list[tuple[str, str, Found]] = [
        (_name(edge), edge.text(), x.best[edge])
        for edge in sorted(x.best, key=lambda e: (e.transition, e.source))
        if edge not in skip
    ]
    found += [
        (_identifier(f"test_control_{command}_from_{status}"), f"{command} from {status}", seen)
        for (command, status), seen in sorted(x.control.items())
    ]
    for name, text, (path, calls, states, data) in found:
        stable = {key: value for key, value in data.items() if key not in touched}
        lines += ["", "", f"def {name}() -> None:", f'    """{text}."""']
        lines.append("    executor = ScriptedExecutor()")
        if not calls:
            lines.append("    # No agent or command is called on this path.")
        lines += _rules_source(x, calls)
        lines.append("    with Harness(MACHINE, storage=MemoryStorage(), executor=executor) as h:")
        for file, content in x.files.items():
            lines.append(f"        (h.root / {file!r}).write_text({content!r})")
        lines.append(f"        driver = h.create({_block(x.inputs[path.inputs], 25)})")
        lines += [f"        {_move_source(move)}" for move in path.moves]
        lines.append(f"        assert driver.path() == {_block(states, 31)}")
        lines.append(f"        assert _stable(driver.data) == {_block(stable, 38)}")
    body = "\n".join(lines) + "\n"
    # Import only what the tests use (a linter flags the rest).
    if "Reply(" not in body.split("def _stable", 1)[1]:
        body = body.replace(
            "MemoryStorage, Reply, ScriptedExecutor", "MemoryStorage, ScriptedExecutor"
        )
    if "edits(" not in body.split("def _stable", 1)[1]:
        body = body.replace("from fsm.testing.paths import edits\n", "")
    return body
