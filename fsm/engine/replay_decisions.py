"""``fsm replay --decisions``: the journals of a workspace (or fixture files) replayed against a
candidate definition, and the forecast of its unfinished instances (:mod:`fsm.engine.decisions`
does the replay)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fsm.base.errors import CorruptDocumentError, InputError, StoreError
from fsm.engine.decisions import DecisionReport, Replayer, Undecidable, next_choice, refusing
from fsm.model.machine import Machine, load_machine
from fsm.store.journal import Journal

if TYPE_CHECKING:
    from fsm.engine.instance import Instance, Workspace

__all__ = ["candidate_machine", "forecast", "replay_decisions", "replay_files"]


def candidate_machine(installed: Machine, definition: Path | None) -> Machine:
    """The definition to replay against: the machine file at ``definition`` (the installed one
    when None); InputError when it is another machine's."""
    if definition is None:
        return installed
    candidate = load_machine(definition)
    if candidate.name != installed.name:
        raise InputError(f"{definition} defines machine '{candidate.name}', not '{installed.name}'")
    return candidate


def replay_decisions(
    workspace: Workspace,
    installed: Machine,
    definition: Path | None,
    *,
    ids: Sequence[str] = (),
    journals: Path | None = None,
) -> DecisionReport:
    """Replay the journals of ``ids`` (default: every instance of ``installed`` in
    ``workspace``), or the ``*.ndjson`` files in ``journals``, against ``definition``; with
    the workspace's journals, forecast the unfinished instances too."""
    candidate = candidate_machine(installed, definition)
    replayer = Replayer(installed, candidate, workspace.options_for(candidate))
    report = DecisionReport(candidate.name)
    if journals is not None:
        if ids:
            raise InputError("--journals replays the files in the folder: give no ID")
        return replay_files(replayer, journals)
    names = list(ids) or sorted(workspace.store_for(installed).list_ids())
    instances = []
    for instance_id in names:
        instance = workspace.instance(installed, instance_id)
        if not instance.exists():
            raise InputError(f"no {installed.name} instance '{instance_id}' ({instance.where})")
        instances.append(instance)
        report.journals.append(replayer.replay(instance_id, instance.journal.entries()))
    if candidate is not installed:
        report.forecast = forecast(instances, candidate)
    return report


def replay_files(replayer: Replayer, folder: Path) -> DecisionReport:
    """The replay of the journal files (``*.ndjson``, named by instance) in ``folder``
    (InputError when there are none)."""
    files = sorted(folder.glob("*.ndjson"))
    if not files:
        raise InputError(f"no journals (*.ndjson) in {folder}")
    report = DecisionReport(replayer.candidate.name)
    for file in files:
        report.journals.append(replayer.replay(file.stem, Journal(file).entries()))
    return report


def forecast(instances: Sequence[Instance], candidate: Machine) -> list[str]:
    """One line per unfinished instance whose next automatic step would change course under
    ``candidate`` (or that it cannot run at all); guards evaluated on the document as it is now,
    the workspace's files read as they are, nothing run."""
    lines: list[str] = []
    for instance in instances:
        try:
            loaded = instance.load()
        except (CorruptDocumentError, StoreError):
            continue  # not the installed definition's to run either
        state = loaded.state
        if instance.machine.is_final(state):
            continue
        ctx = refusing(instance.context())
        try:
            before = next_choice(instance.machine, state, loaded.doc, ctx)
        except Undecidable as exc:
            before = f"cannot tell ({exc})"
        if state not in candidate.states:
            lines.append(
                f"forecast: {instance.id} in state {state}: the candidate has no state {state}"
            )
            continue
        try:
            doc = candidate.document_model.model_validate(loaded.data)
            after = next_choice(candidate, state, doc, ctx)
        except Undecidable as exc:
            after = f"cannot tell ({exc})"
        except Exception as exc:  # the candidate's model refuses the document
            after = f"cannot run it: {type(exc).__name__}: {exc}".splitlines()[0]
        if after != before:
            lines.append(
                f"forecast: {instance.id} in state {state}: now {before}; "
                f"under the candidate {after}"
            )
    return lines
