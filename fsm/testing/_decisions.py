"""A replay of decisions as a test: journals of real runs kept as fixtures, replayed against the
machine's definition in the checkout (:mod:`fsm.engine.decisions`)::

    from fsm.testing import export_journals, replay_decisions

    # once, from a workspace where the machine ran for real:
    export_journals(workspace, "ccw-loop", Path("tests/journals/ccw-loop"))

    def test_the_loop_still_decides_as_it_did() -> None:
        replay_decisions("ccw-loop", Path("tests/journals/ccw-loop")).assert_same()

``assert_same()`` fails naming each journal's first step the definition would decide otherwise,
with the guards that flipped; steps it cannot decide are listed in the report, never a failure.
"""

from __future__ import annotations

from pathlib import Path

from fsm.engine.decisions import DecisionReport, Replayer
from fsm.engine.instance import Workspace
from fsm.engine.replay_decisions import candidate_machine, replay_files
from fsm.model.discovery import open_machine

__all__ = ["export_journals", "replay_decisions"]


def export_journals(
    workspace: Workspace | Path, machine: str, dest: Path, ids: list[str] | None = None
) -> list[Path]:
    """Copy the journals of ``machine``'s instances (``ids``, default all) in ``workspace`` to
    ``dest`` as ``<id>.ndjson`` fixtures; return the files written."""
    space = workspace if isinstance(workspace, Workspace) else Workspace(Path(workspace))
    loaded = space.machine(machine)
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for instance_id in ids or sorted(space.store_for(loaded).list_ids()):
        instance = space.instance(loaded, instance_id)
        target = dest / f"{instance_id}.ndjson"
        with target.open("w", encoding="utf-8") as out:
            for _, line, _ in instance.journal.scan():
                out.write(line + "\n")
        written.append(target)
    return written


def replay_decisions(
    machine: str | Path,
    journals: Path,
    *,
    definition: Path | None = None,
    workspace: Path | None = None,
) -> DecisionReport:
    """Replay the fixtures (``*.ndjson``) in ``journals``, recorded under ``machine`` (a name or
    a machine.yaml path), against ``definition`` (default: ``machine`` itself); the options
    replayed guards see are ``workspace``'s (default: the machine's defaults)."""
    installed = open_machine(str(machine))
    candidate = candidate_machine(installed, definition)
    space = Workspace(workspace or journals)
    return replay_files(Replayer(installed, candidate, space.options_for(candidate)), journals)
