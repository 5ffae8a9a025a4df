"""Collecting a test session's journal records per machine, in process and from subprocesses.

A :class:`Collector` watches the engine's journal (:mod:`fsm.engine.observe`): every record any
instance writes, in any store, is counted for the machine definition it belongs to (machines are
told apart by their definition's path: two test machines may share a name). Records appended to
a file by subprocesses (:data:`fsm.engine.observe.RECORDS_FILE`) are counted at the end.

Which machines are reported: those named (``--fsm-cov=ccw-loop,counter``), or, when none is
named, every machine whose definition lies outside the temporary folder (a machine a test writes
into ``tmp_path`` for one test is not one whose coverage anybody tracks). A machine named is
reported from the temporary folder only when it has no definition elsewhere (a copy of a bundled
machine one test makes is left out; a project copied into ``tmp_path`` to run is reported).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from fsm.base.errors import FsmError, JournalRecordError
from fsm.coverage.report import full_report, machine_report
from fsm.coverage.tally import Tally
from fsm.engine.observe import watch
from fsm.model.machine import Machine, load_machine
from fsm.model.records import Record, parse_record

__all__ = ["Collector"]


class Collector:
    """Counts journal records per machine definition (see the module docstring)."""

    def __init__(self) -> None:
        self.machines: dict[str, tuple[Machine, Tally, frozenset[str]]] = {}
        self._stop: Callable[[], None] | None = None

    def start(self) -> None:
        """Watch the engine's journal writes from now on."""
        self._stop = watch(self.seen)

    def stop(self) -> None:
        """Stop watching."""
        if self._stop is not None:
            self._stop()
            self._stop = None

    def _entry(self, machine: Machine) -> tuple[Machine, Tally, frozenset[str]]:
        key = str(machine.path)
        entry = self.machines.get(key)
        if entry is None:
            finals = frozenset(n for n, s in machine.states.items() if s.final)
            entry = self.machines[key] = (machine, Tally(), finals)
        return entry

    def seen(self, machine: Machine, instance_id: str, records: Sequence[Record]) -> None:
        """Count ``records`` just written to ``instance_id``'s journal (the watcher)."""
        _, tally, finals = self._entry(machine)
        tally.add(f"{machine.path}:{instance_id}", records, finals)

    def read_file(self, path: Path) -> None:
        """Count the records subprocesses appended to ``path`` (unreadable lines skipped)."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        loaded: dict[str, Machine | None] = {}
        for number, line in enumerate(text.splitlines(), 1):
            try:
                entry: dict[str, Any] = json.loads(line)
                record = parse_record(entry["record"], number)
                where = str(entry["path"])
                instance_id = str(entry["id"])
            except (ValueError, KeyError, TypeError, JournalRecordError):
                continue
            if where not in loaded:
                loaded[where] = self._load(where)
            machine = loaded[where]
            if machine is not None:
                self.seen(machine, instance_id, [record])

    def _load(self, where: str) -> Machine | None:
        known = self.machines.get(where)
        if known is not None:
            return known[0]
        try:
            return load_machine(where)
        except (FsmError, OSError):
            return None  # a definition a test removed since: its records cannot be placed

    def report(self, names: Collection[str] = ()) -> dict[str, Any]:
        """The JSON report of the machines chosen (see the module docstring)."""
        temporary = Path(tempfile.gettempdir()).resolve()
        chosen: dict[str, list[tuple[Machine, Tally]]] = {}
        kept: dict[str, list[tuple[Machine, Tally]]] = {}
        for machine, tally, _ in self.machines.values():
            if names and machine.name not in names:
                continue
            in_temporary = machine.path.resolve().is_relative_to(temporary)
            (kept if in_temporary else chosen).setdefault(machine.name, []).append((machine, tally))
        for name, found in kept.items():
            # A machine named is reported from a test's folder only when it has no other
            # definition: the copy one test makes of a bundled machine is not that machine.
            if names and name not in chosen:
                chosen[name] = found
        reports = {}
        for name, found in chosen.items():
            for machine, tally in found:
                # Two definitions of one name (a copy in a test's folder): told apart by path.
                label = name if len(found) == 1 else f"{name} ({machine.path})"
                reports[label] = machine_report(machine, tally)
        return full_report(reports)
