"""Running commands and agent CLIs for actions: the executor protocol and fsm's subprocess executor.

Public: the names are defined in :mod:`fsm.process.executor`.
"""

from fsm.process.executor import (
    KNOWN_AGENTS,
    AgentCommand,
    AgentMode,
    ChecksAgents,
    ExecResult,
    Executor,
    RecordsCommands,
    SubprocessExecutor,
    agent_problem,
    read_agent_result,
)

__all__ = [
    "KNOWN_AGENTS",
    "AgentCommand",
    "AgentMode",
    "ChecksAgents",
    "ExecResult",
    "Executor",
    "RecordsCommands",
    "SubprocessExecutor",
    "agent_problem",
    "read_agent_result",
]
