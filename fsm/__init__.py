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

from fsm.base.clock import Clock, SimulatedClock, SystemClock
from fsm.base.errors import (
    ControlRefusedError,
    CorruptDocumentError,
    DefinitionError,
    DiagramRenderError,
    DocumentInputError,
    EventNotAllowedError,
    FileTooLargeError,
    ForeignInstanceError,
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
    PatchError,
    RefusedError,
    StoreError,
    StoreUnreachableError,
    UnknownInstanceError,
    UnknownMachineError,
    UnsafePathError,
    UnwritableDocumentError,
    VersionMismatchError,
)

if TYPE_CHECKING:
    from fsm.engine.control import ControlPlane
    from fsm.engine.engine import Engine
    from fsm.engine.instance import Instance, Workspace
    from fsm.engine.retry import retry
    from fsm.model.context import Context, TransitionInfo
    from fsm.model.machine import Machine
    from fsm.model.outcome import RunResult, StepResult, Verdict
    from fsm.model.registry import Recovery, Registry, Reopening, Update
    from fsm.process.executor import AgentCommand, ExecResult, Executor, SubprocessExecutor

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
    "ForeignInstanceError",
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
    "PatchError",
    "Recovery",
    "RefusedError",
    "Registry",
    "Reopening",
    "RunResult",
    "SimulatedClock",
    "StepResult",
    "StoreError",
    "StoreUnreachableError",
    "SubprocessExecutor",
    "SystemClock",
    "TransitionInfo",
    "UnknownInstanceError",
    "UnknownMachineError",
    "UnsafePathError",
    "UnwritableDocumentError",
    "Update",
    "Verdict",
    "VersionMismatchError",
    "Workspace",
    "retry",
]

_LAZY = {
    "Context": "fsm.model.context",
    "TransitionInfo": "fsm.model.context",
    "Recovery": "fsm.model.registry",
    "Registry": "fsm.model.registry",
    "Reopening": "fsm.model.registry",
    "Update": "fsm.model.registry",
    "AgentCommand": "fsm.process.executor",
    "ExecResult": "fsm.process.executor",
    "Executor": "fsm.process.executor",
    "SubprocessExecutor": "fsm.process.executor",
    "ControlPlane": "fsm.engine.control",
    "Engine": "fsm.engine.engine",
    "RunResult": "fsm.model.outcome",
    "StepResult": "fsm.model.outcome",
    "Verdict": "fsm.model.outcome",
    "Instance": "fsm.engine.instance",
    "Workspace": "fsm.engine.instance",
    "Machine": "fsm.model.machine",
    "retry": "fsm.engine.retry",
}


def __getattr__(name: str) -> Any:
    """Import the engine, the registry and the executors only when they are used: ``fsm
    status`` stays fast, and the console script catches signals before the heavy imports."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fsm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
