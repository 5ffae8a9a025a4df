"""How the machine names an agent run in issue errors, execution records and the report.

The executor already hands out agent results with the command redacted and the hidden values
scrubbed from the output (:mod:`fsm.process.redaction`): a token in an fsm.toml agent command never
reaches these files. This module only words the line.
"""

from __future__ import annotations

from fsm.executor import ExecResult

__all__ = ["describe_agent_run"]


def describe_agent_run(tool: str, result: ExecResult) -> str:
    """One line saying how agent ``tool`` ended."""
    if result.error is not None:
        return result.error  # the executor's own errors name the tool or the program only
    return f"agent '{tool}' {result.describe()}"
