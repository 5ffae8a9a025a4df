"""``add_task``: the dashboard's add-task, as a command of the machine (``fsm command ccw-loop ID
add_task``, the Add task form of ``fsm serve``).

The task is appended to the loop's dashboard task file, ``{instance dir}/{loop id}/tasks.jsonl``,
in the dashboard's own line format (``task_id`` ``task-{ms}-{8 hex}``, ``order`` one past the
highest), so the dashboard lists it and develop takes it as it takes one the dashboard added.
The dashboard rewrites that file without a trailing newline: a newline is written first when the
file does not end with one, so the record never glues onto the last line. The document itself is
not changed (develop loads the task when it takes the next one); the journal's ``command`` record
holds the task.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.helpers import atomic_write_text, ensure_folder

from .model import LoopState
from .options import LoopContext
from .tasks import task_list_paths

__all__ = ["NewTask", "add_task"]


class NewTask(BaseModel):
    """What the dashboard's add-task form takes."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid")

    description: str = Field(min_length=1, max_length=4000, pattern=r"\S")
    """What the task is, e.g. "Add a --verbose flag to the CLI"."""
    tool: Literal["bash", "gemini", "qwen", "codex", "claude"] | None = None
    """The agent CLI that does it (default: the loop's fix_tool)."""
    mode: Literal["analysis", "write", "review"] = "write"
    """write: it may change files; analysis and review: it only reads."""
    command: str | None = None
    """A shell command run for the task instead of an agent (tool bash), e.g. "make lint"."""
    on_error: Literal["continue", "pause", "fail_fast"] = "continue"
    """What the loop does when the task fails."""


def add_task(doc: LoopState, ctx: LoopContext, task: NewTask) -> dict[str, Any]:
    """Append ``task`` to the loop's dashboard task file; the document is left as it is."""
    path = task_list_paths(ctx.instance_dir, ctx.instance_id)[1]
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    now = ctx.clock.iso()
    record: dict[str, Any] = {
        "task_id": f"task-{int(time.time() * 1000)}-{secrets.token_hex(4)}",
        "description": task.description.strip(),
        "mode": task.mode,
        "prompt_template": task.description.strip(),
        "order": _next_order(text),
        "created_at": now,
        "updated_at": now,
        "on_error": task.on_error,
    }
    if task.tool is not None:  # none named: the loop's fix_tool does it
        record["tool"] = task.tool
    if task.command:
        record["command"] = task.command
    separator = "\n" if text and not text.endswith("\n") else ""
    ensure_folder(path.parent, ctx.workspace)
    atomic_write_text(path, text + separator + json.dumps(record) + "\n")
    return {}


def _next_order(text: str) -> int:
    orders = []
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        rest = line.strip()
        while rest:
            try:
                value, end = decoder.raw_decode(rest)
            except json.JSONDecodeError:
                break
            if isinstance(value, dict) and isinstance(value.get("order"), int | float):
                orders.append(int(value["order"]))
            rest = rest[end:].lstrip()
    return max(orders) + 1 if orders else 0
