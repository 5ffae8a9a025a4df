"""Workspaces and instances: loading, validating and committing instance documents.

A :class:`Workspace` is a folder plus its configuration (fsm.toml, option overrides, clock,
executor). An :class:`Instance` is one machine instance in it: it reads its document (validated),
knows its FSM state and control status, and commits new versions (validated, merged with what
other writers changed meanwhile, written atomically, journaled, followed by the ``after_save``
hook). The engine (:mod:`fsm.engine`) and the control plane (:mod:`fsm.control`) build on it.
Documents and journals are kept by the workspace's store, used only through the protocols of
:mod:`fsm.storage` (files unless the workspace is given another store).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm import jsonio
from fsm.clock import Clock, SystemClock
from fsm.config import WorkspaceConfig, load_config, resolve_options
from fsm.context import Context
from fsm.definition import describe_validation, did_you_mean
from fsm.discovery import open_machine
from fsm.errors import (
    CorruptDocumentError,
    DocumentInputError,
    InputError,
    OptionsError,
    StoreError,
    UnsafePathError,
    UnwritableDocumentError,
)
from fsm.executor import Executor, RecordsCommands, SubprocessExecutor
from fsm.journal import RotatingLog
from fsm.log import EventLog, get_logger
from fsm.machine import Machine
from fsm.records import CreateRecord, Record
from fsm.storage import Committing, JournalLog, Store, StoreFactory
from fsm.store import FileStore, InstancePaths, validate_id
from fsm.update import MISSING, apply_update, canonical_hash

__all__ = ["Instance", "Loaded", "Workspace"]


@dataclass(frozen=True)
class Loaded:
    """A version of an instance document: JSON data, exact bytes, model, state and status."""

    data: dict[str, Any]
    raw: bytes
    doc: BaseModel
    state: str
    status: str | None


class Workspace:
    """A folder that instances live in, with its configuration."""

    def __init__(
        self,
        path: Path | str = ".",
        *,
        options: Mapping[str, Any] | None = None,
        option_texts: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        executor: Executor | None = None,
        config: WorkspaceConfig | None = None,
        storage: StoreFactory | None = None,
    ) -> None:
        self.path = Path(path).resolve()
        self.config = config if config is not None else load_config(self.path)
        self.option_overrides = dict(options or {})
        self.option_texts = dict(option_texts or {})
        self.clock: Clock = clock or SystemClock()
        self.executor: Executor = executor or SubprocessExecutor(self.path, self.config.agents)
        self._storage = storage

    def machine(self, name: str) -> Machine:
        """The machine named (or at path) ``name``."""
        return open_machine(name)

    def options_for(self, machine: Machine) -> BaseModel:
        """The validated options of ``machine`` in this workspace.

        A ``[machine.X]`` table whose name is a near miss of this machine's (``ccw_loop`` for
        ``ccw-loop``) is an error rather than silently ignored.
        """
        table = self.config.machines.get(machine.name)
        if table is None:
            for name in self.config.machines:
                hint = did_you_mean(name, [machine.name])
                if hint:
                    raise OptionsError(
                        f"{self.path / 'fsm.toml'}: [machine.{name}] names no machine{hint}"
                    )
            table = {}
        from fsm.settings import misplaced_hint

        return resolve_options(
            machine.options_model,
            machine.name,
            table,
            self.option_overrides,
            self.option_texts,
            lambda key: misplaced_hint(machine, key, given_as="option"),
        )

    def store_for(self, machine: Machine, options: BaseModel | None = None) -> FileStore:
        """The store of ``machine``'s instances in this workspace."""
        opts = options if options is not None else self.options_for(machine)
        storage = machine.spec.storage
        return FileStore(
            self.path,
            storage.document,
            storage.meta,
            opts.model_dump(),
            read_retries=storage.read_retries,
            retry_interval=storage.retry_interval_ms / 1000,
            indent=storage.indent,
        )

    def storage_for(self, machine: Machine, options: BaseModel) -> Store:
        """Where ``machine``'s instances are kept: the store this workspace was given, else
        its files (:meth:`store_for`)."""
        if self._storage is not None:
            return self._storage(self.path, machine, options)
        return self.store_for(machine, options)

    def instance(self, machine: Machine | str, instance_id: str) -> Instance:
        """An existing-or-not instance handle (nothing is read yet)."""
        resolved = self.machine(machine) if isinstance(machine, str) else machine
        return Instance(self, resolved, validate_id(instance_id))

    def new_id(self, machine: Machine) -> str:
        """A fresh id: ``<prefix>-YYYYMMDDTHHMMSS-<8 hex>`` in UTC."""
        prefix = machine.spec.storage.id_prefix or machine.name
        stamp = self.clock.now().strftime("%Y%m%dT%H%M%S")
        return f"{prefix}-{stamp}-{secrets.token_hex(4)}"


class Instance:
    """One instance of a machine in a workspace."""

    def __init__(self, workspace: Workspace, machine: Machine, instance_id: str) -> None:
        self.workspace = workspace
        self.machine = machine
        self.id = instance_id
        self.options = workspace.options_for(machine)
        self.store: Store = workspace.storage_for(machine, self.options)
        self.paths: InstancePaths = self.store.paths(instance_id)
        self.journal: JournalLog = self.store.journal(instance_id)
        self.log = EventLog(
            get_logger("fsm"),
            RotatingLog(self.paths.log, workspace.path),
            workspace.clock,
            machine=machine.name,
            instance=instance_id,
        )
        self._committed: Loaded | None = None
        self._core_plans: dict[tuple[str, ...], tuple[frozenset[str], dict[str, Any]]] = {}
        self.committer: Committing = self.store.committer(self)
        self.executor: Executor = workspace.executor
        if isinstance(workspace.executor, RecordsCommands):
            # Commands of this instance are recorded beside its journal (see fsm.orphans).
            self.executor = workspace.executor.for_instance(self.paths.meta / "running")
        control = machine.spec.control
        self.external_paths: list[str] = list(machine.spec.external_fields)
        if control is not None:
            self.external_paths += [control.field, *control.owned]

    @property
    def clock(self) -> Clock:
        """The workspace clock."""
        return self.workspace.clock

    def context(self, *, interactive: bool = False) -> Context:
        """The context handed to guards, actions and hooks."""
        return Context(
            machine=self.machine.name,
            instance_id=self.id,
            workspace=self.workspace.path,
            document_path=self.paths.document,
            meta_dir=self.paths.meta,
            options=self.options,
            clock=self.workspace.clock,
            log=self.log.logger,
            executor=self.executor,
            interactive=interactive,
        )

    def exists(self) -> bool:
        """True when the document exists."""
        return self.store.exists(self.id)

    def validate(self, data: Mapping[str, Any]) -> BaseModel:
        """Validate JSON data with the document model (raises ValidationError)."""
        return self.machine.document_model.model_validate(data)

    def load(self) -> Loaded:
        """Read and validate the document; corrupt or invalid ones raise CorruptDocumentError.

        When the file holds exactly the bytes this instance committed last, the version
        validated then is returned instead of parsing and validating them again (a step of a
        large document saves most of its CPU time). Only once: a version handed to guards and
        actions is never handed out again, as a fresh read never would be.
        """
        committed, self._committed = self._committed, None
        if committed is not None and self.committer.still(committed.raw):
            return committed
        return self.committer.reconcile(self.load_unchecked())

    def peek(self) -> Loaded:
        """The current version for display (progress lines): like :meth:`load`, but the version
        this process committed last is kept for the next :meth:`load`."""
        committed = self._committed
        if committed is not None and self.committer.still(committed.raw):
            return committed
        return self.load_unchecked()

    def load_unchecked(self) -> Loaded:
        """Read and validate the document as it is on disk (see :meth:`load`)."""
        snapshot = self.store.read(self.id)
        return self._loaded(snapshot.data, snapshot.raw)

    def loaded_from(self, raw: bytes) -> Loaded:
        """The version of the document held in ``raw`` (CorruptDocumentError when invalid)."""
        try:
            data = jsonio.loads(raw)
        except jsonio.JsonError as exc:
            raise CorruptDocumentError(f"not a JSON document: {exc}") from exc
        if not isinstance(data, dict):
            raise CorruptDocumentError("not a JSON object")
        return self._loaded(data, raw)

    def _loaded(self, data: dict[str, Any], raw: bytes) -> Loaded:
        try:
            doc = self.validate(data)
        except ValidationError as exc:
            raise CorruptDocumentError(
                f"document {self.paths.document} does not validate: {describe_validation(exc)}"
            ) from exc
        state = self.machine.codec.read(doc)
        if state not in self.machine.states:
            raise CorruptDocumentError(
                f"document {self.paths.document} is in unknown state '{state}'"
            )
        return Loaded(data, raw, doc, state, self.status_of(data))

    def status_of(self, data: Mapping[str, Any]) -> str | None:
        """The control status in ``data`` (None for machines without a control block)."""
        control = self.machine.spec.control
        if control is None:
            return None
        current: Any = data
        for part in control.field.split("."):
            current = current.get(part) if isinstance(current, Mapping) else None
        return None if current is None else str(current)

    def entered(self, data: dict[str, Any], state: str) -> dict[str, Any]:
        """``data`` with the control status that entering ``state`` sets, if it sets one."""
        status = self.machine.states[state].status
        control = self.machine.spec.control
        if status is None or control is None:
            return data
        return apply_update(data, {control.field: status})

    def core_hash(self, data: Mapping[str, Any]) -> str:
        """The hash of ``data`` without the fields other programs may change (external fields,
        the control status and what it owns, top-level keys the model does not define) and the
        touch timestamps: what only fsm writes."""
        kept, nested = self._core_plan()
        core = {key: value for key, value in data.items() if key in kept}
        if nested:
            core = apply_update(core, nested)
        return canonical_hash(core)

    def _core_plan(self) -> tuple[frozenset[str], dict[str, Any]]:
        """What :meth:`core_hash` keeps: the model's top-level keys but those stripped whole,
        and the deletions of the stripped paths that lie deeper (a hash per step: worked out
        once per list of paths)."""
        paths = (*self.external_paths, *self.machine.spec.storage.touch)
        plan = self._core_plans.get(paths)
        if plan is None:
            whole = {path for path in paths if "." not in path}
            kept = self.machine.document_keys - whole
            nested = {path: MISSING for path in paths if "." in path and path.split(".")[0] in kept}
            plan = self._core_plans[paths] = (kept, nested)
        return plan

    def touched(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` with the storage ``touch`` fields set to now."""
        touch = self.machine.spec.storage.touch
        if not touch:
            return dict(data)
        now = self.clock.iso()
        if all("." not in path for path in touch):
            return {**data, **dict.fromkeys(touch, now)}
        return apply_update(data, dict.fromkeys(touch, now))

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Validate ``data``, merge other writers' changes since ``base``, journal and write it
        (see :mod:`fsm.commit`). With ``locked`` the caller holds the document lock already.

        A result that cannot be committed because of the store is parked in the meta folder.
        """
        try:
            saved = self.committer.commit(data, record, base=base, locked=locked)
        except (CorruptDocumentError, UnwritableDocumentError, UnsafePathError):
            raise  # parked already, the step's own fault, or nowhere safe to park it
        except StoreError as exc:
            parked = self.committer.park(data)
            raise StoreError(f"{exc}; the step's result was kept in {parked}") from exc
        if saved.state in self.machine.states:  # else a fresh load reports it corrupt
            self._committed = saved
        return saved

    def journal_failure(self, record: Record, *, base: Loaded) -> Loaded:
        """Journal a failed step that changes no document (see :class:`fsm.commit.Committer`)."""
        return self.committer.journal_failure(record, base=base)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Keep the files a run uses at every step open meanwhile: the document lock, the
        journal, the log and the document's folder (to ``fsync`` it). Opening them anew for
        each step cost more than the rest of a step's bookkeeping."""
        log_file = self.log.file
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.store.keeping_locks_open(self.id))
            stack.enter_context(self.journal.kept_open())
            if log_file is not None:
                stack.enter_context(log_file.kept_open())
            stack.enter_context(self.committer.files_kept_open())
            yield

    def settle(self) -> None:
        """End of an operation: catch a write that another program made into the document
        fsm replaced last, and release the file (see :mod:`fsm.commit`)."""
        self.committer.settle()

    def after_save(self, loaded: Loaded) -> None:
        """Run the machine's ``after_save`` hook; its failure is logged, never fatal."""
        hook = self.machine.hooks.after_save
        if hook is None:
            return
        try:
            hook(loaded.doc, self.context())
        except Exception as exc:
            self.log.error("after_save_failed", traceback=traceback.format_exc(), error=str(exc))

    def create(self, inputs: Mapping[str, Any], *, actor: str = "cli") -> Loaded:
        """Create the document from ``inputs`` in the machine's initial state."""
        if self.exists():
            raise InputError(f"instance '{self.id}' already exists ({self.paths.document})")
        from fsm.inputs import check_document_size, input_problems

        # Every problem of the inputs at once: the keys' (see fsm.inputs), then the hook's.
        problems, accepted = input_problems(self.machine, inputs)
        name = self.machine.name
        hook = self.machine.hooks.create
        started = time.monotonic()
        try:
            created = hook(dict(accepted), self.context()) if hook else dict(accepted)
        except ValidationError as exc:
            problems.append(describe_validation(exc, limit=10))
            raise DocumentInputError(
                f"cannot create {name} instance: {'; '.join(problems)}"
            ) from exc
        except InputError as exc:
            raise DocumentInputError("; ".join([*problems, str(exc)])) from exc
        except (TypeError, ValueError) as exc:
            problems.append(str(exc))
            raise DocumentInputError(
                f"cannot create {name} instance: {'; '.join(problems)}"
            ) from exc
        if problems:
            raise DocumentInputError("; ".join(problems))
        try:
            if isinstance(created, BaseModel):
                data = created.model_dump(mode="json", by_alias=True, exclude_unset=True)
            else:
                data = json.loads(json.dumps(created, allow_nan=False))
            check_document_size(self.machine, data)
            doc = self.validate(data)
        except ValidationError as exc:
            raise DocumentInputError(
                f"cannot create {name} instance: {describe_validation(exc, limit=10)}"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise DocumentInputError(f"cannot create {name} instance: {exc}") from exc
        initial = self.machine.spec.initial
        if self.machine.codec.read(doc) != initial:
            data = apply_update(data, self.machine.codec.write(doc, initial))
        control = self.machine.spec.control
        if control is not None and self.status_of(data) is None:
            # The status is read from the file: a default the model fills in must be written.
            default = _model_value(doc, control.field)
            if default is not None:
                data = apply_update(data, {control.field: default})
        with self.store.document_lock(self.id):
            if self.exists():
                raise InputError(f"instance '{self.id}' already exists ({self.paths.document})")
            record = CreateRecord(
                machine=self.machine.name,
                dest=initial,
                actor=actor,
                duration_ms=round((time.monotonic() - started) * 1000, 3),
            )
            loaded = self.commit(data, record, base=None, locked=True)
        self.log.info("instance_created", state=loaded.state, status=loaded.status)
        return loaded


def _model_value(doc: BaseModel, path: str) -> Any:
    """The value at dotted ``path`` of the validated ``doc`` (None when absent), as JSON."""
    current: Any = doc
    for part in path.split("."):
        current = getattr(current, part, None)
        if current is None:
            return None
    return current.value if isinstance(current, Enum) else current
