"""Production joined with tests: which edges real runs took, and which of them no test takes.

``fsm coverage MACHINE --journals [WORKSPACE]`` reads the journal of every instance of the
machine in a workspace's store (its files, or the database fsm.toml or ``FSM_STORE`` names), the
same records a test session's plugin counts, and tallies them (:class:`fsm.coverage.tally.Tally`).
With ``--tests REPORT`` (a ``pytest --fsm-cov-report=json:REPORT``) it lists the edges real runs
take that no test takes, most taken first, and the declared edges neither takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fsm.base.errors import JournalRecordError
from fsm.coverage.report import machine_report, machine_section
from fsm.coverage.tally import Tally
from fsm.engine.instance import Workspace
from fsm.model.machine import Machine
from fsm.model.records import CreateRecord, Record

__all__ = ["Joined", "join", "production_tally"]


def production_tally(workspace: Workspace, machine: Machine) -> Tally:
    """The tally of every journal of ``machine``'s instances in ``workspace``'s store (a record
    that does not parse is skipped, as the journal's readers skip it)."""
    store = workspace.store_for(machine)
    finals = frozenset(name for name, state in machine.states.items() if state.final)
    tally = Tally()
    for instance_id in store.list_ids():
        records: list[Record] = [
            entry
            for _, entry in store.journal(instance_id).entries()
            if entry is not None and not isinstance(entry, JournalRecordError)
        ]
        first = records[0] if records else None
        if isinstance(first, CreateRecord) and first.machine not in (None, machine.name):
            continue  # another machine's instance kept in the same folder
        tally.add(instance_id, records, finals)
    return tally


@dataclass(frozen=True)
class Joined:
    """Real runs' report, and where it meets the tests'."""

    production: dict[str, Any]
    untested: list[tuple[str, int]]
    """Edges real runs took that no test takes, with their count, most taken first."""
    neither: list[str]
    """Declared edges neither real runs nor tests take."""


def _edge_text(edge: Mapping[str, Any]) -> str:
    return f"{edge['source']} --{edge['event']}--> {edge['dest']} (#{edge['transition']})"


def join(machine: Machine, tally: Tally, tests: Mapping[str, Any] | None) -> Joined:
    """Real runs' report of ``machine``, joined with a test report when one is given."""
    production = machine_report(machine, tally)
    if tests is None:
        return Joined(production, [], [])
    tested = machine_section(tests, machine.name, str(machine.path))
    by_key = {(e["source"], e["transition"]): e["count"] for e in tested["edges"]}
    untested: list[tuple[str, int]] = []
    neither: list[str] = []
    for edge in production["edges"]:
        test_count = by_key.get((edge["source"], edge["transition"]), 0)
        if edge["count"] and not test_count:
            untested.append((_edge_text(edge), edge["count"]))
        elif not edge["count"] and not test_count:
            neither.append(_edge_text(edge))
    untested.sort(key=lambda item: (-item[1], item[0]))
    return Joined(production, untested, neither)


def _times(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"


def render(joined: Joined, name: str, *, tests: bool) -> list[str]:
    """The lines ``fsm coverage`` prints."""
    report = joined.production
    summary = report["summary"]["edges"]
    lines = [
        f"{name}: {report['instances']} instances; real runs took "
        f"{summary['taken']} of {summary['declared']} declared edges"
    ]
    taken = sorted(
        (e for e in report["edges"] if e["count"]), key=lambda e: (-e["count"], _edge_text(e))
    )
    if not tests:
        lines.extend(f"  {_edge_text(e)}: taken {_times(e['count'])}" for e in taken)
        lines.extend(f"  {_edge_text(e)}: not taken" for e in report["edges"] if not e["count"])
        return lines
    if joined.untested:
        lines.append("edges real runs take that no test takes:")
        lines.extend(
            f"  {text}: taken {_times(count)} by real runs; no test takes it"
            for text, count in joined.untested
        )
    else:
        lines.append("every edge real runs take is taken by a test")
    if joined.neither:
        lines.append("declared edges neither real runs nor tests take:")
        lines.extend(f"  {text}" for text in joined.neither)
    return lines
