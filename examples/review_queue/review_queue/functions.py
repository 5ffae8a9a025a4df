"""Guards, actions and hooks of the review queue: one file reviewed per step."""

from __future__ import annotations

import shlex
from typing import Any

from fsm import Context, Registry, Update, Verdict

from .model import Item, ReviewInputs, ReviewOptions, ReviewQueue

registry = Registry()
registry.document(ReviewQueue)
registry.options(ReviewOptions)
registry.inputs(ReviewInputs)

PROMPT = """Review the file {path} in this folder for bugs and unclear code.
Do not edit anything. End your answer with one line: APPROVE, or CHANGES: <what must change>."""


@registry.guard
def has_pending(doc: ReviewQueue, ctx: Context[ReviewOptions]) -> bool:
    """True while a file waits for its review."""
    return bool(doc.pending())


@registry.action
def review_next(doc: ReviewQueue, ctx: Context[ReviewOptions]) -> Update:
    """Check the next pending file, then have the reviewer read it; record what it said."""
    item = doc.pending()[0]
    reviewed = _review(item.path, ctx)
    return {"items": [reviewed if other is item else other for other in doc.items]}


def _review(path: str, ctx: Context[ReviewOptions]) -> Item:
    """The file's review: the check command's failure, or the reviewer's last line."""
    options = ctx.options
    if options.check_command:
        check = ctx.executor.shell(options.check_command.replace("{path}", shlex.quote(path)))
        if not check.ok:
            return Item(path=path, status="changes", note=check.describe())
    answer = ctx.executor.agent(options.reviewer, PROMPT.format(path=path))
    if not answer.ok:
        return Item(path=path, status="failed", note=answer.describe())
    last = (answer.stdout.strip().splitlines() or [""])[-1].strip()
    if last == "APPROVE":
        return Item(path=path, status="approved")
    if last.startswith("CHANGES:"):
        return Item(path=path, status="changes", note=last.removeprefix("CHANGES:").strip())
    return Item(path=path, status="failed", note=f"no verdict in the answer: {last[:200]}")


@registry.action
def mark_stopped(doc: ReviewQueue, ctx: Context[ReviewOptions]) -> Update:
    """Say that a person stopped the queue (the ``stop`` command's action)."""
    return {"stop_reason": "stopped by the user"}


@registry.hook
def new_queue(inputs: dict[str, Any], ctx: Context[ReviewOptions]) -> ReviewQueue:
    """A queue of the files given to ``fsm new``; each must exist in the workspace."""
    given = ReviewInputs.model_validate(inputs)
    missing = [path for path in given.files if not (ctx.workspace / path).is_file()]
    if missing:
        raise ValueError(f"no such file in the workspace: {', '.join(missing)}")
    items = [Item(path=path) for path in given.files]
    # Only fields set here are written: the status must be, for start to find it.
    return ReviewQueue(status="created", phase="queued", title=given.title, items=items)


@registry.hook
def needs(doc: ReviewQueue, ctx: Context[ReviewOptions]) -> list[str]:
    """What a run needs and lacks: the reviewer agent, and the check command's program."""
    if not doc.pending():
        return []
    options, missing = ctx.options, []
    if not ctx.executor.has_agent(options.reviewer):
        missing.append(
            f"agent '{options.reviewer}' (option reviewer) is not available: add "
            f"[agent.{options.reviewer}] command = [...] to fsm.toml, or put it on PATH"
        )
    program = (shlex.split(options.check_command) or [""])[0]
    if program and not ctx.executor.has_program(program):
        missing.append(f"program '{program}' (option check_command) is not installed")
    return missing


@registry.hook
def judge(doc: ReviewQueue) -> Verdict:
    """Success only when every file was approved; the reason names each other file and why."""
    approved = sum(item.status == "approved" for item in doc.items)
    counted = f"{approved} of {len(doc.items)} files approved"
    if doc.stop_reason:
        return Verdict(False, f"{doc.stop_reason}; {counted}")
    others = [item for item in doc.items if item.status != "approved"]
    if others:
        why = "; ".join(f"{item.path}: {item.status} ({item.note})" for item in others)
        return Verdict(False, f"{counted}; {why}")
    return Verdict(True, counted)


@registry.hook
def progress(doc: ReviewQueue) -> dict[str, str]:
    """The queue's progress for ``fsm status``."""
    done = len(doc.items) - len(doc.pending())
    return {"reviewed": f"{done} of {len(doc.items)} files"}
