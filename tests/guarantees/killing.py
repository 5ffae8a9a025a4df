"""Kill points: ``fsm run`` in a forked child that SIGKILLs itself at one instrumented call.

The instrumented calls are where a crash can leave something half done: the commit's temporary
file, journal append and replace (or exchange), the ``after_save`` hook, the updates of actions,
the commands and agents actions run, and the side files machines write. Each is a kill point
twice, just before and just after the call.

A point is named ``<version>|<call>:<before or after>|<n>``: the document version being worked
on (how many versions the journal records), the call, and how many times that call happened
since. An uninterrupted run lists every point it passes (the *dry run*); a run continuing an
instance after a kill passes the same points for the same versions, so a kill can target any
point of the dry run. Points inside the crash repair of
:meth:`fsm.engine.transaction.Transaction.repair` are named ``repair|<call>|<n>`` and targeted by
number.
"""

from __future__ import annotations

import functools
import json
import os
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm.base import files
from fsm.cli import main
from fsm.engine import engine, instance
from fsm.engine.transaction import Transaction
from fsm.process.executor import SubprocessExecutor
from fsm.store import file_swap, journal
from fsm.view import progress
from tests.guarantees.forked import fork_call

__all__ = ["POINTS", "Target", "run_killed"]

assert progress  # imported here, once, rather than by every forked run
POINTS: list[tuple[Any, str]] = [
    (file_swap, "write_temporary_open"),
    (file_swap, "exchange"),
    (file_swap, "replace"),
    (journal.Journal, "write_all"),
    (instance.Instance, "after_save"),
    (engine, "apply_update"),
    (SubprocessExecutor, "run"),
    (files, "atomic_write_bytes"),
    (files, "write_temporary"),
    (files, "append_text"),
]
"""(owner, attribute) of every instrumented call; see the module docstring."""

VERSION_KINDS = {"create", "control", "transition", "error", "merge", "recover"}
"""Journal records that describe a version of the document (``repair`` records do not)."""


@dataclass
class Target:
    """Where a run dies: the ``repair``-th point of its crash repair, else the first point of
    ``wanted`` at or after ``after`` in the dry run's order (never, without either)."""

    order: dict[str, int] = field(default_factory=dict)
    wanted: set[str] = field(default_factory=set)
    after: int = 0
    repair: int = 0


class _Points:
    """Names the points a child passes and kills it at its target."""

    def __init__(self, target: Target | None, report: int, journal_path: Path) -> None:
        self.target = target
        self.report = report
        self.journal_path = journal_path
        self.version: int | None = None
        self.seen: Counter[str] = Counter()
        self.repairing = 0
        self.repair_points = 0

    def _versions_journaled(self) -> int:
        try:
            lines = self.journal_path.read_bytes().splitlines()
        except FileNotFoundError:
            return 0
        return sum(json.loads(line).get("kind") in VERSION_KINDS for line in lines if line)

    def hit(self, call: str) -> None:
        if self.repairing:
            self.repair_points += 1
            name = f"repair|{call}|{self.repair_points}"
            if self.target is not None and self.repair_points == self.target.repair:
                self._die(name)
            return
        if self.version is None:
            self.version = self._versions_journaled()
        self.seen[call] += 1
        name = f"{self.version}|{call}|{self.seen[call]}"
        target = self.target
        if target is None:
            os.write(self.report, f"{name}\n".encode())
        elif name in target.wanted and target.order[name] >= target.after:
            self._die(name)
        if call.startswith("Journal.write_all[") and call.endswith(":after"):
            kinds = call[len("Journal.write_all[") : call.index("]")].split("+")
            versions = sum(kind in VERSION_KINDS for kind in kinds)
            if versions:
                self.version += versions
                self.seen.clear()

    def _die(self, name: str) -> None:
        os.write(self.report, f"{name}\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)


def _label(owner: Any, name: str, args: tuple[Any, ...]) -> str:
    label = f"{getattr(owner, '__name__', owner)}.{name}".removeprefix("fsm.")
    if owner is journal.Journal and len(args) > 1 and isinstance(args[1], list):
        label += f"[{'+'.join(record.kind for record in args[1])}]"
    return label


def _instrument(points: _Points) -> None:
    for owner, name in POINTS:
        original = getattr(owner, name, None)
        if original is None:
            continue

        def wrapped(
            *args: Any,
            _original: Callable[..., Any] = original,
            _owner: Any = owner,
            _name: str = name,
            **kwargs: Any,
        ) -> Any:
            call = _label(_owner, _name, args)
            points.hit(f"{call}:before")
            result = _original(*args, **kwargs)
            points.hit(f"{call}:after")
            return result

        setattr(owner, name, functools.wraps(original)(wrapped))
    repair = Transaction.repair

    def repairing(self: Transaction) -> list[str]:
        points.repairing += 1
        try:
            return repair(self)
        finally:
            points.repairing -= 1

    Transaction.repair = repairing  # type: ignore[method-assign]


def run_killed(
    workspace: Path,
    machine: Path,
    instance_id: str,
    journal_path: Path,
    target: Target | None,
    report: Path,
) -> int:
    """Fork ``fsm run`` of the instance, dying at ``target`` (None: a dry run, every point it
    passes written to ``report``); return the child's pid. The point it died at is the last
    line of ``report``; its output is beside it (``.out``)."""

    def body() -> int:
        fd = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        _instrument(_Points(target, fd, journal_path))
        return main(
            ["run", str(machine), instance_id, "-C", str(workspace), "--log-level", "error"]
        )

    return fork_call(body, report.with_suffix(".out"))
