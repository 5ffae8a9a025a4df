"""The text of ``fsm history``: one line per journal record.

Its own module: ``fsm history`` imports it without the control plane and the replay check of
:mod:`fsm.view.inspect` (which names :func:`history_line` too).
"""

from __future__ import annotations

from fsm.model.records import (
    AGENT_RUNS,
    ControlRecord,
    ErrorRecord,
    MergeRecord,
    Record,
    RepairRecord,
    RetryRecord,
    TransitionRecord,
    agent_runs,
)
from fsm.view.terminal import one_line

__all__ = ["history_line"]


def history_line(record: Record) -> str:
    """One line of ``fsm history``: when, what, from where to where, who and why."""
    time = record.time or "?"
    if not time.isprintable():
        time = one_line(time)
    if type(record) is not TransitionRecord or AGENT_RUNS in record.extra:
        return time + _history_rest(record)
    # A journal's steps repeat a few (event, source, dest, actor): each one's text is made
    # once (escaping works character by character, so the parts escape as the whole would).
    key = (record.event, record.source, record.dest, record.actor)
    rest = _STEP_TEXTS.get(key)
    if rest is None:
        if len(_STEP_TEXTS) >= _MAX_STEP_TEXTS:  # a journal of ever new steps
            _STEP_TEXTS.clear()
        rest = _STEP_TEXTS[key] = _history_rest(record)
    return time + rest


def _history_rest(record: Record) -> str:
    """What follows the time on a record's line of ``fsm history``."""
    kind = record.kind
    event = record.event or ""
    move = f"{record.source or '-'} -> {record.dest or '-'}"
    extra = why = ""
    if isinstance(record, ControlRecord):
        extra = f" status {record.status_from} -> {record.status_to}"
    elif isinstance(record, RetryRecord):
        items = ", ".join(record.items) or "nothing named"
        extra = f" status {record.status_from} -> {record.status_to} reopened {items}"
    elif isinstance(record, ErrorRecord):
        extra = f" {record.error}"
    if (
        isinstance(record, (ControlRecord, MergeRecord, RepairRecord, RetryRecord))
        and record.reason
    ):
        why = f" ({record.reason})"
    who = f" by {record.actor}" if record.actor else ""
    runs = ""
    if AGENT_RUNS in record.extra:
        from fsm.process.agent_runs import run_line

        runs = "".join(f" [{run_line(run)}]" for run in agent_runs(record))
    # One record, one line, whatever the reason or error holds.
    return one_line(f" {kind:<10} {event:<12} {move}{extra}{who}{why}{runs}")


_STEP_TEXTS: dict[tuple[str | None, ...], str] = {}
_MAX_STEP_TEXTS = 1024
