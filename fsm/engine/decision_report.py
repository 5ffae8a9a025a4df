"""What a replay of decisions reports (:mod:`fsm.engine.decisions`): per journal, the steps
decided alike, those that could not be decided and why, and the first divergence, with each
guard's value and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from fsm.model.definition import guard_name

__all__ = [
    "Decision",
    "DecisionReport",
    "Divergence",
    "GuardValue",
    "JournalDecisions",
    "flipped",
]


@dataclass(frozen=True)
class GuardValue:
    """A guard's value at a step (as declared: ``not x`` holds when x does not), and whether it
    was ``recorded`` or ``evaluated``."""

    guard: str
    holds: bool | None
    source: str

    @property
    def own(self) -> tuple[str, bool | None]:
        """The guard's name and its own value (before a ``not``)."""
        name, negated = guard_name(self.guard)
        return name, None if self.holds is None else self.holds != negated

    def text(self) -> str:
        shown = "?" if self.holds is None else "T" if self.holds else "F"
        return f"{self.guard}={shown}" + (" (evaluated)" if self.source == "evaluated" else "")


@dataclass(frozen=True)
class Decision:
    """A transition chosen (None: none enabled, the instance would wait), with guard values."""

    event: str | None
    dest: str | None
    guards: tuple[GuardValue, ...]

    def text(self, source: str) -> str:
        move = f"{self.event}: {source} -> {self.dest}" if self.event else "none (it would wait)"
        values = " ".join(value.text() for value in self.guards)
        return f"{move}  {values}".rstrip()


@dataclass(frozen=True)
class Divergence:
    """The first step a journal's candidate decides otherwise."""

    step: int
    line: int
    state: str
    recorded: Decision
    candidate: Decision
    flipped: tuple[str, ...]
    """Guards whose values differ (``name: recorded -> candidate``), or why none did."""

    def lines(self, name: str) -> list[str]:
        return [
            f"{name}: step {self.step} (journal line {self.line}), state {self.state}",
            f"  recorded:  {self.recorded.text(self.state)}",
            f"  candidate: {self.candidate.text(self.state)}",
            f"  flipped:   {', '.join(self.flipped)}",
        ]


@dataclass
class JournalDecisions:
    """What the replay of one journal found."""

    name: str
    steps: int = 0
    same: int = 0
    undecidable: list[tuple[int, str]] = field(default_factory=list)
    """(journal line, why) of each step the candidate could not decide."""
    divergence: Divergence | None = None


@dataclass
class DecisionReport:
    """Every journal's replay (and, when asked, the forecast of unfinished instances)."""

    machine: str
    journals: list[JournalDecisions] = field(default_factory=list)
    forecast: list[str] = field(default_factory=list)
    """One line per unfinished instance whose next step would change course."""

    @property
    def diverged(self) -> list[JournalDecisions]:
        return [j for j in self.journals if j.divergence is not None]

    @property
    def steps(self) -> int:
        return sum(j.steps for j in self.journals)

    def lines(self) -> list[str]:
        """The report as ``fsm replay --decisions`` prints it."""
        undecided = [j for j in self.journals if j.undecidable and j.divergence is None]
        same = len(self.journals) - len(self.diverged) - len(undecided)
        out = [
            f"{self.machine}: {len(self.journals)} journals, {self.steps} steps: {same} same, "
            f"{len(self.diverged)} diverge, {len(undecided)} with undecidable steps"
        ]
        for journal in self.journals:
            if journal.divergence is not None:
                out += journal.divergence.lines(journal.name)
            for line, why in journal.undecidable[:3]:
                out.append(f"{journal.name}: journal line {line} undecidable: {why}")
            if len(journal.undecidable) > 3:
                out.append(f"{journal.name}: and {len(journal.undecidable) - 3} more undecidable")
        out += self.forecast
        return out

    def assert_same(self) -> None:
        """Raise AssertionError listing every divergence (undecidable steps are not one)."""
        if self.diverged or self.forecast:
            raise AssertionError("\n".join(self.lines()))


def flipped(recorded: tuple[GuardValue, ...], candidate: tuple[GuardValue, ...]) -> tuple[str, ...]:
    """The guards whose own values differ between the recorded step and the candidate's
    choice (``name T -> F``), or why none did."""
    before = dict(value.own for value in recorded)
    flipped = tuple(
        f"{name} {_tf(before[name])} -> {_tf(own)}"
        for name, own in (value.own for value in candidate)
        if name in before and before[name] != own
    )
    if flipped:
        return flipped
    new = [value.text() for value in candidate if value.own[0] not in before]
    said = "no guard the recorded step evaluated changed value"
    if new:
        return (f"{said}; evaluated only now: {', '.join(new)}",)
    return (f"{said}: the candidate's transitions use them otherwise (order or guard lists)",)


def _tf(value: bool | None) -> str:
    return "?" if value is None else "T" if value else "F"
