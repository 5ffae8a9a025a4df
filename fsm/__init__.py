"""fsm: an explicit finite-state-machine orchestrator.

Machines are data (a YAML definition plus a module of guards and actions), checked before they
run, driven by a small engine on ``transitions``, persisted atomically with a journal, controlled
from other processes, and drawn as diagrams. The Python API::

    from fsm import Engine, Workspace

    workspace = Workspace("path/to/project")
    machine = workspace.machine("ccw-loop")
    instance = workspace.instance(machine, workspace.new_id(machine))
    instance.create({"title": "Fix the parser", "description": "..."})
    result = Engine(instance).run(max_steps=50)
    print(result.outcome, result.state, result.exit_code)

Everything the ``fsm`` command does is a function or method here first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fsm.clock import Clock, SimulatedClock, SystemClock
from fsm.context import Context, TransitionInfo
from fsm.errors import (
    ControlRefusedError,
    CorruptDocumentError,
    DefinitionError,
    DiagramRenderError,
    DocumentInputError,
    EventNotAllowedError,
    FileTooLargeError,
    FsmError,
    GuardRejectedError,
    InputError,
    InputTooLargeError,
    InstanceHeldError,
    InvalidIdError,
    JournalMismatchError,
    JournalRecordError,
    LeaseLostError,
    LockHeldError,
    MissingRequirementError,
    NotARegularFileError,
    OptionsError,
    RefusedError,
    StoreError,
    UnknownInstanceError,
    UnknownMachineError,
    UnsafePathError,
    UnwritableDocumentError,
)
from fsm.executor import AgentCommand, ExecResult, Executor, SubprocessExecutor
from fsm.registry import Recovery, Registry, Reopening, Update

if TYPE_CHECKING:
    from fsm.control import ControlPlane
    from fsm.engine import Engine
    from fsm.instance import Instance, Workspace
    from fsm.machine import Machine
    from fsm.outcome import RunResult, StepResult, Verdict

__all__ = [
    "AgentCommand",
    "Clock",
    "Context",
    "ControlPlane",
    "ControlRefusedError",
    "CorruptDocumentError",
    "DefinitionError",
    "DiagramRenderError",
    "DocumentInputError",
    "Engine",
    "EventNotAllowedError",
    "ExecResult",
    "Executor",
    "FileTooLargeError",
    "FsmError",
    "GuardRejectedError",
    "InputError",
    "InputTooLargeError",
    "Instance",
    "InstanceHeldError",
    "InvalidIdError",
    "JournalMismatchError",
    "JournalRecordError",
    "LeaseLostError",
    "LockHeldError",
    "Machine",
    "MissingRequirementError",
    "NotARegularFileError",
    "OptionsError",
    "Recovery",
    "RefusedError",
    "Registry",
    "Reopening",
    "RunResult",
    "SimulatedClock",
    "StepResult",
    "StoreError",
    "SubprocessExecutor",
    "SystemClock",
    "TransitionInfo",
    "UnknownInstanceError",
    "UnknownMachineError",
    "UnsafePathError",
    "UnwritableDocumentError",
    "Update",
    "Verdict",
    "Workspace",
]

_LAZY = {
    "ControlPlane": "fsm.control",
    "Engine": "fsm.engine",
    "RunResult": "fsm.outcome",
    "StepResult": "fsm.outcome",
    "Verdict": "fsm.outcome",
    "Instance": "fsm.instance",
    "Workspace": "fsm.instance",
    "Machine": "fsm.machine",
}


def __getattr__(name: str) -> Any:
    """Import the engine and the store only when they are used (keeps ``fsm status`` fast)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fsm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
