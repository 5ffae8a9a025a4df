"""Running commands and agent CLIs for actions: the executor protocol and fsm's subprocess executor,
and which files a run changed (snapshots of the workspace before and after it).

Public: the names are defined in :mod:`fsm.process.executor` and :mod:`fsm.process.changes`.
"""

from fsm.process.changes import (
    MAX_FILES,
    SKIPPED_FOLDERS,
    Snapshot,
    changed_files,
    is_known,
    take_snapshot,
    workspace_files,
)
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
    "MAX_FILES",
    "SKIPPED_FOLDERS",
    "AgentCommand",
    "AgentMode",
    "ChecksAgents",
    "ExecResult",
    "Executor",
    "RecordsCommands",
    "Snapshot",
    "SubprocessExecutor",
    "agent_problem",
    "changed_files",
    "is_known",
    "read_agent_result",
    "take_snapshot",
    "workspace_files",
]
