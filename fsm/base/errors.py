"""The one exception tree of fsm.

Every error knows the exit code the command line maps it to, and its message is one readable
line saying what went wrong, where, and (when there is one) what to do::

    FsmError                      exit 1   internal error: a bug, or an environment failure
    ├── DiagramRenderError                 an image could not be rendered (Graphviz refused)
    ├── InputError                exit 2   bad input from the user
    │   ├── UnknownMachineError            no machine of that name is registered
    │   ├── UnknownInstanceError           no instance of that id in the workspace
    │   ├── InvalidIdError                 an instance id that would escape its folder
    │   ├── DefinitionError                a machine file with problems (all of them listed)
    │   ├── OptionsError                   machine options or fsm.toml that do not validate
    │   ├── DocumentInputError             --set / --input values that do not make a document
    │   └── MissingRequirementError        a run needs an agent or program that is not there
    ├── RefusedError              exit 3   the request is legal input but not allowed now
    │   ├── EventNotAllowedError           no transition for that event from the current state
    │   ├── GuardRejectedError             transitions exist, every guard said no
    │   └── ControlRefusedError            a control command illegal in the current status
    └── StoreError                exit 6   the persisted instance cannot be used
        ├── CorruptDocumentError           the document does not parse or does not validate
        ├── LockHeldError                  another run holds the instance
        │   ├── LeaseLostError             a run lost its lease: its writes are refused
        │   ├── InstanceHeldError  exit 3  a live holder (a worker) has the instance: named
        │   └── ForeignInstanceError exit 3 the instance belongs to another workspace: named
        ├── StoreUnreachableError          the store cannot be reached (within its deadline)
        ├── JournalMismatchError           the journal does not reproduce the document
        ├── JournalRecordError             a journal line that is not a record fsm can read
        ├── UnsafePathError                a path through a symbolic link, or out of the workspace
        └── UnwritableDocumentError        a document that is not strict JSON or not UTF-8

Two OSErrors stand outside the tree: :class:`NotARegularFileError` and :class:`FileTooLargeError`,
raised by :func:`fsm.base.reading.read_limited` where a plain read would raise an OSError, so that
every caller that reports a file it cannot read reports these too, in its own words.

Exit codes 0, 4 and 5 are outcomes of a run, not errors (see :class:`fsm.model.outcome.RunResult`).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ControlRefusedError",
    "CorruptDocumentError",
    "DefinitionError",
    "DiagramRenderError",
    "DocumentInputError",
    "EventNotAllowedError",
    "FileTooLargeError",
    "ForeignInstanceError",
    "FsmError",
    "GuardRejectedError",
    "InputError",
    "InputTooLargeError",
    "InstanceHeldError",
    "InvalidIdError",
    "JournalMismatchError",
    "JournalRecordError",
    "LeaseLostError",
    "LockHeldError",
    "MissingRequirementError",
    "NotARegularFileError",
    "OptionsError",
    "PatchError",
    "RefusedError",
    "StoreError",
    "StoreUnreachableError",
    "UnknownInstanceError",
    "UnknownMachineError",
    "UnsafePathError",
    "UnwritableDocumentError",
    "VersionMismatchError",
]


class FsmError(Exception):
    """Root of every error fsm raises on purpose."""

    exit_code = 1


class DiagramRenderError(FsmError):
    """An image could not be rendered (pygraphviz missing, or Graphviz refused the DOT)."""


class InputError(FsmError):
    """The user gave input that cannot be used."""

    exit_code = 2


class UnknownMachineError(InputError):
    """No machine of that name is registered."""


class UnknownInstanceError(InputError):
    """No instance of that id exists in the workspace."""


class InvalidIdError(InputError):
    """An instance id that is unsafe to use as a file name."""


class OptionsError(InputError):
    """Machine options (from fsm.toml or -o) or fsm.toml itself are invalid."""


class DocumentInputError(InputError):
    """Values given to create a document do not validate."""


class InputTooLargeError(DocumentInputError):
    """Creation inputs, or the document they make, larger than a document may be (HTTP 413)."""


class MissingRequirementError(InputError):
    """A run needs agents or programs that are not available; ``missing`` lists each one."""

    def __init__(self, subject: str, missing: Sequence[str]) -> None:
        self.missing = list(missing)
        super().__init__(f"{subject} cannot run: " + "; ".join(self.missing))


class VersionMismatchError(InputError):
    """The installed definition of a machine cannot run an instance started under another one
    (no migration from its version, a newer version, or a state the new graph lacks)."""


class DefinitionError(InputError):
    """A machine definition has problems; ``problems`` lists every one of them."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        first = self.problems[0] if self.problems else "unknown problem"
        more = f" (and {count - 1} more; run 'fsm check {source}')" if count > 1 else ""
        # A problem rendered with its location already names the source: say it once.
        shown = first if first.startswith(f"{source}:") else f"{source}: {first}"
        super().__init__(f"{shown}{more}")


class RefusedError(FsmError):
    """The request is well-formed but not allowed in the instance's current state."""

    exit_code = 3


class EventNotAllowedError(RefusedError):
    """No transition for that event leaves the current state."""


class GuardRejectedError(RefusedError):
    """Transitions for the event exist, but every one of them was refused by a guard."""


class ControlRefusedError(RefusedError):
    """A control command (start, pause, resume, stop) is illegal in the current status."""


class StoreError(FsmError):
    """The persisted instance cannot be read, locked or trusted."""

    exit_code = 6


class CorruptDocumentError(StoreError):
    """The instance document does not parse as JSON or does not validate."""


class LockHeldError(StoreError):
    """Another process holds the instance's run lock."""


class LeaseLostError(LockHeldError):
    """A run's lease on an instance is no longer the instance's (it expired and another run
    took it over): the store refuses its writes (the fencing token is stale)."""


class InstanceHeldError(LockHeldError):
    """A live holder (a worker, another ``fsm run``) has the instance's lease, and the store
    names it: the request is refused for now (exit 3, like a command refused), nothing is
    wrong with the store."""

    exit_code = 3


class ForeignInstanceError(LockHeldError):
    """The instance belongs to another workspace than the one asking to run it (a shared
    store's row whose recorded workspace is not its space, or is unknown): refused, both named,
    nothing run (exit 3)."""

    exit_code = 3


class StoreUnreachableError(StoreError):
    """The store's server cannot be reached (down, or not answering within the deadline):
    what remains to do is not tried one by one, each waiting for it."""


class JournalMismatchError(StoreError):
    """Replaying the journal does not reproduce the persisted document."""


class JournalRecordError(StoreError):
    """A journal line holds JSON that does not fit its record kind, or was written in a newer
    journal format (see :mod:`fsm.model.records`); ``line`` is its number."""

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        self.problem = problem
        super().__init__(f"journal line {line}: {problem}")


class UnsafePathError(StoreError):
    """A file fsm would use is a symbolic link, or lies behind one leading out of the workspace."""


class UnwritableDocumentError(StoreError):
    """A document holds values JSON or UTF-8 cannot carry (NaN, lone surrogates)."""


class _FileRefused(OSError):
    """A file fsm will not read; its message is the words alone, without "[Errno 22]"."""

    def __str__(self) -> str:
        if self.filename is not None:
            return f"{self.filename}: {self.strerror}"
        return str(self.strerror)


class NotARegularFileError(_FileRefused):
    """The path names a FIFO, a device, a socket or a folder, which fsm never reads."""


class FileTooLargeError(_FileRefused):
    """The file is larger than the limit of what fsm reads of its kind."""


class PatchError(ValueError):
    """A JSON Patch (a journal record's ``changes``) that does not apply to the document it is
    given; replay and time travel turn it into a problem naming the record."""
