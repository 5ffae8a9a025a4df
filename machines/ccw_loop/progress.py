"""The progress files of a loop, ``{state_dir}/{loop_id}.progress/``, as the original skill's File
Sync table.

Markdown for people (``develop.md``, ``debug.md``, ``validate.md``, ``summary.md``), NDJSON logs
appended one record per event (``changes.log``, ``debug.log``), and the JSON records of the
unified layout (``hypotheses.json``, ``test-results.json``). The markdown is append-only after
its header, and its headings have a fixed shape (``### Iteration 3 – task-001 (...)``) because
recovery reads them back when the master file is lost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsm.helpers import append_text, atomic_write_text

from .model import DevelopTask, Hypothesis, LoopState, TestResult

__all__ = ["ProgressFiles", "task_line"]


def task_line(task: DevelopTask) -> str:
    """``- [x] task-001 (bash/write): description``: one task in develop.md's task list."""
    mark = "x" if task.status == "completed" else " "
    return f"- [{mark}] {task.id} ({task.tool or 'agent'}/{task.mode}): {task.description}"


@dataclass(frozen=True)
class ProgressFiles:
    """The files of one loop's progress folder."""

    folder: Path
    root: Path | None = None
    """The workspace: nothing is written through a link out of it."""

    @classmethod
    def of(cls, instance_dir: Path, loop_id: str, root: Path | None = None) -> ProgressFiles:
        """The progress folder of ``loop_id`` beside its master file."""
        return cls(instance_dir / f"{loop_id}.progress", root)

    def path(self, name: str) -> Path:
        """A file of the folder (``develop.md``, ``changes.log``, ...)."""
        return self.folder / name

    def start_develop(
        self, doc: LoopState, tasks: list[DevelopTask], mode: str, max_errors: int, now: str
    ) -> None:
        """Write develop.md's header: the loop, its limits, its task list, an empty timeline."""
        lines = [
            "# Development progress",
            "",
            f"- Loop ID: {doc.loop_id}",
            f"- Task: {doc.title}",
            f"- Description: {doc.description}",
            f"- Mode: {mode}",
            f"- Max errors: {max_errors}",
            f"- Started: {now}",
            "",
            "## Tasks",
            "",
            *[task_line(task) for task in tasks],
            "",
            "## Progress Timeline",
            "",
            "",
        ]
        self._write("develop.md", "\n".join(lines))

    def record_task(self, iteration: int, task: DevelopTask, output: str, now: str) -> None:
        """Append a task's timeline entry to develop.md and its line to changes.log."""
        files = ", ".join(task.files_changed) or "(none detected)"
        entry = [
            f"### Iteration {iteration} – {task.id} ({now})",
            "",
            f"- Description: {task.description}",
            f"- Tool: {task.tool or 'agent'}, Mode: {task.mode}",
            f"- Files changed: {files}",
            f"- Status: {task.status.upper()}",
        ]
        command = task.extra("agent_command") or task.extra("command")
        if command:
            shown = str(command).replace("`", "'")
            entry.append(f"- Command: `{shown}`")
        if task.extra("error"):
            entry.append(f"- Error: {task.extra('error')}")
        entry.append("")
        if output.strip():
            entry += ["```", _tail(output, 40), "```", ""]
        self._append("develop.md", "\n".join(entry) + "\n")
        record: dict[str, Any] = {
            "timestamp": now,
            "iteration": iteration,
            "task_id": task.id,
            "description": task.description,
            "tool": task.tool,
            "mode": task.mode,
            "files_changed": task.files_changed,
            "result": "success" if task.status == "completed" else "failed",
        }
        for key in (
            "error",
            "fixes",
            "attempt",
            "agent_command",
            "command",
            "prompt_template",
            "on_error",
        ):
            if task.extra(key) is not None:
                record[key] = task.extra(key)
        self._append("changes.log", json.dumps(record, ensure_ascii=False) + "\n")

    def record_debug(
        self,
        iteration: int,
        round_number: int,
        debug_block: dict[str, Any],
        new: list[Hypothesis],
        now: str,
    ) -> None:
        """Append a debug round to debug.md and debug.log; rewrite hypotheses.json."""
        lines = [f"## Round {round_number} – iteration {iteration} ({now})", ""]
        bug = str(debug_block.get("active_bug") or "(none)").splitlines()[0]
        lines.append(f"- Bug: {bug}")
        for h in new:
            lines += [
                "",
                f"### {h.id} ({h.status}, likelihood {h.likelihood})",
                "",
                f"- Hypothesis: {h.description}",
                f"- Testable condition: {h.testable_condition}",
                f"- Logging point: {h.logging_point}",
                f"- Verdict: {h.verdict_reason or 'none'}",
            ]
        confirmed = debug_block.get("confirmed_hypothesis")
        lines += ["", f"- Root cause: {confirmed or 'not confirmed'}", "", ""]
        if not self.path("debug.md").exists():
            self._write("debug.md", "# Debug understanding\n\n")
        self._append("debug.md", "\n".join(lines))
        for h in new:
            record = {
                "timestamp": now,
                "iteration": iteration,
                "round": round_number,
                "hid": h.id,
                "status": h.status,
                "evidence": h.evidence,
                "verdict_reason": h.verdict_reason,
            }
            self._append("debug.log", json.dumps(record, ensure_ascii=False) + "\n")
        self.write_hypotheses(debug_block)

    def write_hypotheses(self, debug_block: dict[str, Any]) -> None:
        """Rewrite hypotheses.json: the whole debug block (recovery reads it back)."""
        self._write("hypotheses.json", json.dumps(debug_block, indent=2, ensure_ascii=False))

    def record_validation(
        self, iteration: int, run_number: int, record: dict[str, Any], rows: list[TestResult]
    ) -> None:
        """Append a run to validate.md and rewrite test-results.json with it."""
        summary = record["summary"]
        verdict = "PASSED" if record["passed"] else "FAILED"
        lines = [
            f"## Run {run_number} – iteration {iteration} – {verdict} ({record['timestamp']})",
            "",
            f"- Command: `{record['command']}`",
            "",
            "| Total | Passed | Failed | Skipped | Duration | Pass Rate |",
            "| --- | --- | --- | --- | --- | --- |",
            f"| {summary['total']} | {summary['passed']} | {summary['failed']} | "
            f"{summary['skipped']} | {summary['duration_ms']} ms | {summary['pass_rate']:.1f}% |",
            "",
            f"- Coverage: {_show_coverage(record.get('coverage'))}",
            f"- Exit status: {record.get('exit_code')}",
            f"- Verdict: {record.get('verdict')}",
        ]
        if record.get("error"):
            lines.append(f"- Error: {record['error']}")
        for row in rows:
            if row.status == "failed":
                lines += ["", f"### FAILED {row.test_name}", "", f"- {row.error_message or ''}"]
        lines += ["", ""]
        if not self.path("validate.md").exists():
            self._write("validate.md", "# Validation report\n\n")
        self._append("validate.md", "\n".join(lines))
        self._write("test-results.json", json.dumps(record, indent=2, ensure_ascii=False))

    def write_summary(self, text: str) -> None:
        """Write summary.md."""
        self._write("summary.md", text)

    def _write(self, name: str, text: str) -> None:
        atomic_write_text(self.path(name), _for_people(name, text), root=self.root)

    def _append(self, name: str, text: str) -> None:
        append_text(self.path(name), _for_people(name, text), root=self.root)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Control characters but newline and tab (ESC, BEL, carriage return, C1, bidirectional
overrides): a command's or agent's output carries them, and a markdown file shown with cat or
less would make the terminal obey them."""


def _for_people(name: str, text: str) -> str:
    """``text`` as a markdown file is written: its control characters escaped (``\\x1b``);
    the logs (NDJSON) escape them as JSON does already."""
    if not name.endswith(".md") or _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(
        lambda found: (
            f"\\x{ord(found.group()):02x}"
            if ord(found.group()) < 256
            else f"\\u{ord(found.group()):04x}"
        ),
        text.replace("\r\n", "\n"),
    )


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]).replace("```", "'''")


def _show_coverage(value: object) -> str:
    return f"{value:.1f}%" if isinstance(value, int | float) else "not measured"
