"""The text of ``fsm history``: one line per journal record.

Its own module: ``fsm history`` imports it without the control plane and the replay check of
:mod:`fsm.view.inspect` (which names :func:`history_line` too).
"""

from __future__ import annotations

from fsm.model.records import (
    AGENT_RUNS,
    CHANGED,
    CommandRecord,
    ControlRecord,
    ErrorRecord,
    MergeRecord,
    Record,
    RepairRecord,
    RetryRecord,
    TransitionRecord,
    agent_runs,
    record_changes,
)
from fsm.view.terminal import one_line

__all__ = ["change_lines", "history_line"]

SHOWN_VALUE = 80
"""Characters of a changed value ``fsm history --changes`` shows (the rest is cut, with ...)."""


def history_line(record: Record) -> str:
    """One line of ``fsm history``: when, what, from where to where, who and why."""
    time = record.time or "?"
    if not time.isprintable():
        time = one_line(time)
    if (
        type(record) is not TransitionRecord
        or AGENT_RUNS in record.extra
        or "reason" in record.extra
    ):
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
    reason = (
        record.reason
        if isinstance(
            record, (ControlRecord, MergeRecord, RepairRecord, RetryRecord, CommandRecord)
        )
        else record.extra.get("reason")  # an event fired with a reason
    )
    if reason:
        why = f" ({reason})"
    who = f" by {record.actor}" if record.actor else ""
    runs = ""
    if AGENT_RUNS in record.extra:
        from fsm.process.agent_runs import run_line

        runs = "".join(f" [{run_line(run)}]" for run in agent_runs(record))
    # One record, one line, whatever the reason or error holds.
    return one_line(f" {kind:<10} {event:<12} {move}{extra}{who}{why}{runs}")


_STEP_TEXTS: dict[tuple[str | None, ...], str] = {}
_MAX_STEP_TEXTS = 1024


_SIGNS = {"add": "+", "remove": "-", "replace": "~", "move": ">", "copy": "=", "test": "?"}


def change_lines(record: Record) -> list[str]:
    """The lines ``fsm history --changes`` shows under a record: one per operation of its
    patch (``+`` added, ``-`` removed, ``~`` replaced, with the new value cut to
    :data:`SHOWN_VALUE` characters), the paths alone when it kept only those, nothing when it
    changed no document (or was written before records said what changed)."""
    import json

    ops = record_changes(record)
    if ops is None:
        paths = record.extra.get(CHANGED)
        if isinstance(paths, list):
            shown = ", ".join(str(path) or "(the whole document)" for path in paths)
            return [one_line(f"    changed {shown} (a large change: the paths only)")]
        return []
    lines = []
    for op in ops:
        name = str(op.get("op"))
        path = str(op.get("path", ""))
        sign = _SIGNS.get(name, "?")
        if path == "" and name in ("add", "replace"):
            value = op.get("value")
            size = f"{len(value)} fields" if isinstance(value, dict) else "a value"
            lines.append(f"    {sign} (the whole document: {size})")
            continue
        text = f"    {sign} {path}"
        if name in ("move", "copy"):
            text += f" from {op.get('from')}"
        elif "value" in op:
            value = json.dumps(op["value"], ensure_ascii=False, default=str)
            if len(value) > SHOWN_VALUE:
                value = value[: SHOWN_VALUE - 3] + "..."
            text += f" = {value}"
        lines.append(one_line(text))
    return lines
