"""The context handed to guards, actions and hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

__all__ = ["Context", "OptionsT_co", "TransitionInfo"]

# OptionsT_co is the machine's options model: Context[LoopOptions] types ctx.options as
# LoopOptions.
if TYPE_CHECKING:
    from pydantic import BaseModel
    from typing_extensions import TypeVar

    from fsm.base.clock import Clock
    from fsm.process.executor import Executor

    OptionsT_co = TypeVar("OptionsT_co", bound=BaseModel, covariant=True, default=BaseModel)
else:
    # At run time the bound is only a name: fsm ls imports this module and never needs pydantic.
    from typing import TypeVar

    OptionsT_co = TypeVar("OptionsT_co", bound="BaseModel", covariant=True)


@dataclass(frozen=True)
class TransitionInfo:
    """The transition being taken: its event, source and destination states."""

    event: str
    source: str
    dest: str


@dataclass(frozen=True)
class Context(Generic[OptionsT_co]):
    """Everything an action may use besides the document.

    ``workspace`` is the folder the instance works on; ``instance_dir`` is the instance's folder
    in it, where the machine keeps its side files (progress files, reports: for the file store,
    the folder of the document), and ``meta_dir`` where fsm keeps the instance's log and the
    records of its running commands. Where the document itself is kept is the store's business:
    :meth:`stored_document` reads it as the store holds it now. ``options`` is the
    machine's validated options model (an instance of the class the machine registered, so a
    function annotated ``ctx: Context[MyOptions]`` reads ``ctx.options.x`` typed, without a
    cast). ``log`` is a structlog logger bound with machine, instance
    and state. ``transition`` is set while an action or guard runs for a transition.
    ``interactive`` is true when a person drives the run (``fsm run --interactive``).
    ``reconfigure`` is true when the person running asked that the workspace's options as they
    are now replace those a machine pinned in the instance when it started (``fsm run
    --reconfigure``): a machine that pins its configuration refuses a changed one otherwise.
    ``failed_action`` names the action (or ``guard <name>``, or ``validation``) whose failure an
    ``on_error`` hook is recording.
    """

    machine: str
    instance_id: str
    workspace: Path
    instance_dir: Path
    meta_dir: Path
    options: OptionsT_co
    clock: Clock
    log: Any
    executor: Executor
    transition: TransitionInfo | None = None
    interactive: bool = False
    reconfigure: bool = False
    failed_action: str | None = None
    read_stored: Callable[[], dict[str, Any] | None] | None = field(
        default=None, repr=False, compare=False
    )
    """What :meth:`stored_document` calls (the instance's store)."""

    read_permissions: Callable[[], int | None] | None = field(
        default=None, repr=False, compare=False
    )
    """What :meth:`side_file_mode` asks (the instance's store)."""

    observer: Callable[[str, Callable[[], Any]], Any] | None = field(
        default=None, repr=False, compare=False
    )
    """What :meth:`observe` calls (the engine's recorder of a step's observations, or a
    decision replay serving recorded ones back)."""

    def observe(self, name: str, read: Callable[[], Any]) -> Any:
        """``read()``'s value (JSON: lists, dicts, text, numbers), recorded in the step's
        journal record under ``name``: what a guard reads besides the document and the options
        (a side file, a task list). ``fsm replay --decisions`` serves the recorded value back
        instead of reading again, so a changed guard can be judged on what the step saw. The
        first value of a name in a step is the one kept."""
        return read() if self.observer is None else self.observer(name, read)

    def side_file_mode(self) -> int:
        """The permission bits for a new file the machine writes for this instance (a report, a
        backup manifest): what the umask gives a new file, and no more than the stored
        document's own bits allow, so a private (``chmod 600``) document keeps its side files
        private too."""
        from fsm.base.files import current_umask

        mode = 0o666 & ~current_umask()
        kept = None if self.read_permissions is None else self.read_permissions()
        return mode if kept is None else mode & kept

    def stored_document(self) -> dict[str, Any] | None:
        """The instance's document as its store holds it now (its JSON object; None when there
        is none or it cannot be read)."""
        return None if self.read_stored is None else self.read_stored()

    def for_transition(self, event: str, source: str, dest: str) -> Context[OptionsT_co]:
        """A copy of this context for one transition."""
        return replace(self, transition=TransitionInfo(event, source, dest))
