"""Workspaces and instances: loading, validating and committing instance documents.

A :class:`Workspace` is a folder plus its configuration (fsm.toml, option overrides, clock,
executor, the store its instances are kept in). An :class:`Instance` is one machine instance in
it: it reads its document (validated), knows its FSM state and control status, and commits new
versions through the transaction (:mod:`fsm.engine.transaction`: validated, merged with what other
writers changed meanwhile, written atomically with its journal record, followed by the
``after_save`` hook). The engine (:mod:`fsm.engine.engine`) and the control plane
(:mod:`fsm.engine.control`) build on it. Documents and journals are kept by the workspace's store,
used only through :class:`fsm.store.protocol.Store` (the store is chosen by
:mod:`fsm.store.selection`: files unless fsm.toml, ``FSM_STORE`` or ``Workspace(storage=...)`` say
otherwise).
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import time
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from fsm.base import jsonio
from fsm.base.clock import Clock, SystemClock
from fsm.base.errors import (
    CorruptDocumentError,
    DocumentInputError,
    FsmError,
    InputError,
    OptionsError,
)
from fsm.base.files import confined_to
from fsm.base.ids import validate_id
from fsm.base.log import EventLog, get_logger
from fsm.base.update import apply_update
from fsm.engine.definitions import keep_definition
from fsm.engine.rules import DocumentRules, Loaded
from fsm.engine.transaction import Transaction
from fsm.model.config import WorkspaceConfig, load_config, resolve_options
from fsm.model.context import Context
from fsm.model.definition import describe_validation, did_you_mean
from fsm.model.discovery import open_machine
from fsm.model.identity import DEFINITION
from fsm.model.machine import Machine
from fsm.model.paths import value_at
from fsm.model.records import CreateRecord, Record
from fsm.store.journal import RotatingLog
from fsm.store.protocol import Folders, JournalLog, Layout, Store, StoreFactory
from fsm.store.selection import check_settings, chosen, factory, store_settings

if TYPE_CHECKING:  # made when first needed (see Workspace.executor)
    from fsm.process.executor import Executor

__all__ = ["QUEUE", "Instance", "Loaded", "Workspace"]

QUEUE = "queue"
"""The key of the create record's ``extra`` naming the queue given to ``fsm new --queue``."""
_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")


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
        self._executor = executor
        self._storage = storage

    @property
    def executor(self) -> Executor:
        """What runs the commands and agents of the workspace's instances (made when first
        needed: commands that run none, ``fsm status``, import no executor)."""
        if self._executor is None:
            from fsm.process.executor import SubprocessExecutor

            self._executor = SubprocessExecutor(self.path, self.config.agents)
        return self._executor

    def machine(self, name: str) -> Machine:
        """The machine named (or at path) ``name``: installed, or named in this workspace's
        ``[machines]``."""
        return open_machine(name, self.path)

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
        from fsm.model.settings import misplaced_hint

        return resolve_options(
            machine.options_model,
            machine.name,
            table,
            self.option_overrides,
            self.option_texts,
            lambda key: misplaced_hint(machine, key, given_as="option"),
        )

    def layout_for(self, machine: Machine, options: BaseModel | None = None) -> Layout:
        """What the store of ``machine``'s instances in this workspace is made from."""
        opts = options if options is not None else self.options_for(machine)
        storage = machine.spec.storage
        return Layout(
            self.path,
            machine.name,
            storage.document,
            storage.meta,
            opts.model_dump(),
            read_retries=storage.read_retries,
            retry_interval=storage.retry_interval_ms / 1000,
            settings=store_settings(self.config.store),
            space=self.space,
            queue=self.space if machine.spec.needs_workspace else None,
            runs=(
                str(machine.spec.version),
                *(str(m.from_version) for m in machine.spec.migrations),
            ),
        )

    @property
    def space(self) -> str:
        """The name this workspace's instances are kept under in a store several workspaces
        share: ``space`` in ``[store]`` ('' when fsm.toml names none: never guessed from the
        folder's name, which two projects may share; see
        :attr:`fsm.store.protocol.Layout.space`)."""
        named = self.config.store.get("space")
        return named if isinstance(named, str) else ""

    def store_factory(self) -> StoreFactory:
        """What makes this workspace's stores: the factory it was given, else that of the store
        fsm.toml or ``FSM_STORE`` names (:mod:`fsm.store.selection`)."""
        if self._storage is None:
            name, where = chosen(self.config.store)
            check_settings(name, self.config.store)
            self._storage = factory(name, where)
        return self._storage

    def store_for(self, machine: Machine, options: BaseModel | None = None) -> Store:
        """The store of ``machine``'s instances in this workspace (see :meth:`store_factory`)."""
        return self.store_factory()(self.layout_for(machine, options))

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

    def __init__(
        self,
        workspace: Workspace,
        machine: Machine,
        instance_id: str,
        *,
        store: Store | None = None,
        options: BaseModel | None = None,
    ) -> None:
        """``store`` and ``options``: the machine's store and options in ``workspace``, when the
        caller made them already (a worker drives many instances of one machine with one store:
        what it knows of them, and its connections, are kept from one to the next)."""
        self.workspace = workspace
        self.machine = machine
        self.id = instance_id
        self.options = options if options is not None else workspace.options_for(machine)
        self.store: Store = (
            store if store is not None else workspace.store_for(machine, self.options)
        )
        self.folders: Folders = self.store.folders(instance_id)
        self.log_file = RotatingLog(self.folders.meta / "log.ndjson", workspace.path)
        self.log = EventLog(
            get_logger("fsm"),
            self.log_file,
            workspace.clock,
            machine=machine.name,
            instance=instance_id,
        )
        self.rules = DocumentRules(
            machine,
            workspace.clock,
            where=self.store.describe(instance_id),
            after_save=self._saved,
        )
        self.transaction = Transaction(self.store, instance_id, self.rules, self.log)
        self.journal: JournalLog = self.transaction.journal
        self._committed: Loaded | None = None
        self._fresh: Loaded | None = None
        """The version a worker's claim read with the claim (:meth:`take_claimed`), until the
        next :meth:`load` takes it."""
        self._executor: Executor | None = None
        self.external_paths: list[str] = self.rules.external_paths

    @property
    def executor(self) -> Executor:
        """What runs this instance's commands: the workspace's, recording them beside the
        instance's log when it can (see :mod:`fsm.process.orphans`)."""
        if self._executor is None:
            from fsm.process.executor import RecordsCommands

            executor = self.workspace.executor
            if isinstance(executor, RecordsCommands):
                executor = executor.for_instance(self.running_folder)
            self._executor = executor
        return self._executor

    @property
    def running_folder(self) -> Path:
        """Where the commands this instance runs on this host are recorded
        (:mod:`fsm.process.orphans`)."""
        return self.folders.meta / "running"

    @property
    def where(self) -> str:
        """Where the instance's document is, for messages."""
        return self.rules.where

    @property
    def clock(self) -> Clock:
        """The workspace clock."""
        return self.workspace.clock

    def context(self, *, interactive: bool = False, reconfigure: bool = False) -> Context:
        """The context handed to guards, actions and hooks."""
        return Context(
            machine=self.machine.name,
            instance_id=self.id,
            workspace=self.workspace.path,
            instance_dir=self.folders.files,
            meta_dir=self.folders.meta,
            options=self.options,
            clock=self.workspace.clock,
            log=self.log.logger,
            executor=self.executor,
            interactive=interactive,
            reconfigure=reconfigure,
            read_stored=self._stored,
            read_permissions=lambda: self.store.permissions(self.id),
        )

    def _stored(self) -> dict[str, Any] | None:
        try:
            return self.store.read(self.id).data
        except FsmError:
            return None

    def confined(self) -> contextlib.AbstractContextManager[None]:
        """Meanwhile, the side files machines write through :mod:`fsm.helpers` stay inside the
        workspace (the engine runs guards, actions and hooks in it)."""
        return confined_to(self.workspace.path)

    def exists(self) -> bool:
        """True when the document exists (it does when a claim just read it)."""
        return self._fresh is not None or self.store.exists(self.id)

    def validate(self, data: Mapping[str, Any]) -> BaseModel:
        """Validate JSON data with the document model (raises ValidationError)."""
        return self.rules.validate(data)

    def load(self) -> Loaded:
        """Read and validate the document; corrupt or invalid ones raise CorruptDocumentError.

        When the document holds exactly the bytes this instance committed last, the version
        validated then is returned instead of parsing and validating them again (a step of a
        large document saves most of its CPU time). Only once: a version handed to guards and
        actions is never handed out again, as a fresh read never would be.
        """
        fresh, self._fresh = self._fresh, None
        if fresh is not None:
            return self.transaction.reconcile(fresh)
        committed, self._committed = self._committed, None
        if committed is not None and self.store.is_current(self.id, committed.raw):
            return committed
        return self.transaction.reconcile(self.load_unchecked())

    def take_claimed(self, raw: bytes) -> Loaded:
        """The version in ``raw``, the document as a worker's claim read it in the claim's own
        statement a moment ago: the next :meth:`load` returns it instead of reading the document
        again (once: every later load reads, as every step boundary must). Raises
        CorruptDocumentError as :meth:`load` would."""
        try:
            data = jsonio.loads(raw)
        except jsonio.JsonError as exc:
            raise CorruptDocumentError(
                f"corrupt document {self.where}: not valid JSON ({exc})"
            ) from exc
        if not isinstance(data, dict):
            raise CorruptDocumentError(
                f"corrupt document {self.where}: expected a JSON object, "
                f"found {type(data).__name__}"
            )
        self._fresh = self.rules.loaded(data, raw)
        return self._fresh

    def peek(self) -> Loaded:
        """The current version for display (progress lines): like :meth:`load`, but the version
        this process committed last is kept for the next :meth:`load`."""
        committed = self._committed
        if committed is not None and self.store.is_current(self.id, committed.raw):
            return committed
        return self.load_unchecked()

    def load_unchecked(self) -> Loaded:
        """Read and validate the document as the store holds it (see :meth:`load`)."""
        return self.transaction.read()

    def loaded_from(self, raw: bytes) -> Loaded:
        """The version of the document held in ``raw`` (CorruptDocumentError when invalid)."""
        return self.rules.loaded_from(raw)

    def status_of(self, data: Mapping[str, Any]) -> str | None:
        """The control status in ``data`` (None for machines without a control block)."""
        return self.rules.status_of(data)

    def core_hash(self, data: Mapping[str, Any]) -> str:
        """The hash of what only fsm writes in ``data`` (see
        :meth:`fsm.engine.rules.DocumentRules.core_hash`)."""
        return self.rules.core_hash(data)

    def commit(
        self,
        data: Mapping[str, Any],
        record: Record,
        *,
        base: Loaded | None,
        locked: bool = False,
    ) -> Loaded:
        """Validate ``data``, merge other writers' changes since ``base``, journal and write it
        (see :mod:`fsm.engine.transaction`). With ``locked`` the caller holds the document lock
        already.

        A result that cannot be committed because of the store is parked.
        """
        saved = self.transaction.commit(data, record, base=base, locked=locked)
        if saved.state in self.machine.states:  # else a fresh load reports it corrupt
            self._committed = saved
        return saved

    def journal_failure(self, record: Record, *, base: Loaded) -> Loaded:
        """Journal a failed step that changes no document (see :mod:`fsm.engine.transaction`)."""
        return self.transaction.journal_failure(record, base=base)

    def repair(self) -> list[str]:
        """Make journal and document agree after a crash (see :mod:`fsm.engine.transaction`)."""
        return self.transaction.repair()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Keep what a run uses at every step open meanwhile: what the store keeps (the
        document lock, the journal, the document's folder) and the log. Opening them anew for
        each step cost more than the rest of a step's bookkeeping."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.store.session(self.id))
            stack.enter_context(self.log_file.kept_open())
            yield

    def settle(self) -> None:
        """End of an operation: take in a write another program made into a version the store
        replaced last, and let go of what the store kept to watch (see
        :mod:`fsm.engine.transaction`)."""
        self.transaction.settle()

    def _saved(self, loaded: Loaded) -> None:
        # Looked up at each call: an instance whose after_save is replaced (a test) is heard.
        self.after_save(loaded)

    def after_save(self, loaded: Loaded) -> None:
        """Run the machine's ``after_save`` hook; its failure is logged, never fatal."""
        hook = self.machine.hooks.after_save
        if hook is None:
            return
        try:
            hook(loaded.doc, self.context())
        except Exception as exc:
            self.log.error("after_save_failed", traceback=traceback.format_exc(), error=str(exc))

    def create(
        self, inputs: Mapping[str, Any], *, actor: str = "cli", queue: str | None = None
    ) -> Loaded:
        """Create the document from ``inputs`` in the machine's initial state.

        ``queue``: the queue of workers that run it (``fsm new --queue``), kept in the create
        record; by default the workspace's (see :attr:`fsm.store.protocol.Layout.queue`).
        """
        if queue is not None and not _QUEUE.fullmatch(queue):
            raise InputError(
                f"queue '{queue}' is not a queue name (letters, digits, '.', '_', '-' and "
                "'/', at most 200)"
            )
        if self.exists():
            raise InputError(f"instance '{self.id}' already exists ({self.where})")
        from fsm.model.inputs import check_document_size, input_problems

        # Every problem of the inputs at once: the keys' (see fsm.model.inputs), then the hook's.
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
            default = value_at(doc, control.field)
            if default is not None:
                data = apply_update(data, {control.field: default})
        with self.store.lock(self.id):
            if self.exists():
                raise InputError(f"instance '{self.id}' already exists ({self.where})")
            record = CreateRecord(
                machine=self.machine.name,
                dest=initial,
                actor=actor,
                duration_ms=round((time.monotonic() - started) * 1000, 3),
                extra={
                    DEFINITION: self.machine.identity.to_json(),
                    **({QUEUE: queue} if queue is not None else {}),
                },
            )
            loaded = self.commit(data, record, base=None, locked=True)
        keep_definition(self.folders, self.machine, self.workspace.path, self.store)
        self.log.info("instance_created", state=loaded.state, status=loaded.status)
        return loaded
