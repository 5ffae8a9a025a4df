"""Whether the installed definition of a machine can run an instance, and migrating it when not.

An instance runs under the definition its journal names last (:mod:`fsm.model.identity`). Against
the installed one (:func:`compatibility`):

=====================================  =========================================================
recorded vs. installed                 what a run, a step, a fired event or a worker does
=====================================  =========================================================
no record (an instance from before)    run, as before
same graph                             run
same ``version:``, another graph       run when the instance's state exists in the installed
                                       graph and its document validates (the first step record
                                       names the new graph); else refuse, naming the problem
an older version, a migration from it  migrate (one ``migrate`` record), then run
an older version, no migration         refuse, naming both versions and what to do
a newer version than installed         refuse: old code never runs an instance migrated onwards
=====================================  =========================================================

A refusal is a :class:`~fsm.base.errors.VersionMismatchError` (exit 2) and changes nothing.
A step never re-executes history (it reads the current state and document), so only this
*technical* compatibility gates a run; whether the new definition would have decided the same
steps is ``fsm replay --decisions``'s question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from fsm.base.errors import CorruptDocumentError, VersionMismatchError
from fsm.base.update import apply_update, get_path
from fsm.engine.definitions import keep_definition, stored_definition
from fsm.engine.rules import Loaded
from fsm.model.definition import describe_validation
from fsm.model.identity import DEFINITION, Identity, same_version
from fsm.model.machine import FieldCodec
from fsm.model.migrations import MIGRATION, Chain, chain_from, edge_map, mapping_text
from fsm.model.patch import diff
from fsm.model.records import MigrateRecord

if TYPE_CHECKING:
    from fsm.engine.instance import Instance

__all__ = [
    "Compatibility",
    "MigrationPlan",
    "apply_migration",
    "compatibility",
    "masked_options",
    "plan_migration",
    "raw_state",
    "recorded_of",
    "refusal",
]

Kind = Literal["same", "unrecorded", "graph", "migrate", "refused"]


@dataclass(frozen=True)
class Compatibility:
    """How the installed definition stands to the one an instance runs under."""

    kind: Kind
    recorded: Identity | None
    installed: Identity
    chain: Chain | None = None
    reason: str = ""
    """Why a run is refused (``kind`` refused), in one line."""

    @property
    def runnable(self) -> bool:
        """Whether the installed definition can run it (directly or by migrating it)."""
        return self.kind != "refused"


def masked_options(options: Any) -> dict[str, Any]:
    """The options' JSON as a step record keeps it: values whose name or look is a secret's
    (:mod:`fsm.process.redaction`) masked."""
    from fsm.process.redaction import MASK, is_secret_name, looks_like_token

    data = options.model_dump(mode="json") if hasattr(options, "model_dump") else {}
    return {
        key: MASK
        if is_secret_name(key) or (isinstance(value, str) and looks_like_token(value))
        else value
        for key, value in data.items()
    }


def recorded_of(instance: Instance) -> Identity | None:
    """The definition the instance's journal names last (None: it names none). Read from the
    end, looking only at objects that carry one (no record is typed on the way)."""
    for data in instance.journal.backwards():
        if DEFINITION in data:
            found = Identity.from_json(data[DEFINITION])
            if found is not None:
                return found
    return None


def compatibility(instance: Instance, recorded: Identity | None = None) -> Compatibility:
    """How the installed definition of ``instance``'s machine stands to the one it runs under
    (``recorded``: when the caller read it already)."""
    machine = instance.machine
    installed = machine.identity
    if recorded is None:
        recorded = recorded_of(instance)
    if recorded is None:
        return Compatibility("unrecorded", None, installed)
    if recorded.graph == installed.graph and same_version(recorded.version, installed.version):
        return Compatibility("same", recorded, installed)
    name = machine.name
    if same_version(recorded.version, installed.version):
        return Compatibility("graph", recorded, installed)
    was, now = recorded.label(name), installed.label(name)
    if _newer(recorded.version, installed.version):
        reason = (
            f"instance '{instance.id}' runs under {was}, newer than the installed {now}: "
            f"run it where {name} {recorded.version} is installed"
        )
        return Compatibility("refused", recorded, installed, reason=reason)
    chain = chain_from(machine.spec, recorded.version)
    if chain is None:
        reason = (
            f"instance '{instance.id}' was started under {was}; the installed {now} has no "
            f"migration from version {recorded.version}: add one to the machine file's "
            f"migrations, or run it where {name} {recorded.version} is installed"
        )
        return Compatibility("refused", recorded, installed, reason=reason)
    return Compatibility("migrate", recorded, installed, chain=chain)


def _newer(one: int | str, other: int | str) -> bool:
    """Whether version ``one`` is known to be later than ``other`` (numbers only: the order of
    other names is the migrations')."""
    try:
        return int(one) > int(other)
    except ValueError:
        return False


def refusal(instance: Instance, found: Compatibility) -> str:
    """Why the installed definition cannot run the instance now ("" when it can): a refusal,
    or, under another graph of the same version, the state or document it does not accept."""
    if found.kind == "refused":
        return found.reason
    if found.kind != "graph":
        return ""
    try:
        instance.load_unchecked()
    except CorruptDocumentError as exc:
        assert found.recorded is not None
        name = instance.machine.name
        return (
            f"instance '{instance.id}' was started under {found.recorded.label(name)}; the "
            f"installed {found.installed.label(name)} cannot run it: {exc}"
        )
    return ""


@dataclass(frozen=True)
class MigrationPlan:
    """What migrating one instance does: its state and document before and after."""

    instance_id: str
    chain: Chain
    source: str
    dest: str
    base: Loaded
    data: dict[str, Any]
    changes: list[dict[str, Any]]
    edges: dict[str, int]

    def text(self, machine: str) -> str:
        """``loop-1: ccw-loop 1 -> 2: state validating -> validate, 2 changes``."""
        state = (
            f"state {self.source} -> {self.dest}"
            if self.source != self.dest
            else (f"state {self.source} kept")
        )
        count = len(self.changes)
        return (
            f"{self.instance_id}: {machine} {self.chain.start} -> {self.chain.end}: {state}, "
            f"{count} change{'' if count == 1 else 's'} to the document"
        )


def plan_migration(instance: Instance, found: Compatibility) -> MigrationPlan:
    """Work out the migration ``found`` calls for, changing nothing; VersionMismatchError when
    the instance cannot migrate (its state mapped to nothing, or the result does not fit the
    installed definition)."""
    chain = found.chain
    assert chain is not None
    assert found.recorded is not None
    machine = instance.machine
    snapshot = instance.store.read(instance.id)
    data: dict[str, Any] = dict(snapshot.data)
    ctx = instance.context()
    where = f"instance '{instance.id}' ({machine.name} {chain.start} -> {chain.end})"
    for step in chain.steps:
        if step.update is None:
            continue
        hook = machine.registry.hooks.get(step.update)
        if hook is None:
            raise VersionMismatchError(f"{where}: no registered hook '{step.update}'")
        try:
            data = apply_update(data, hook(data, ctx) or {})
        except Exception as exc:
            raise VersionMismatchError(
                f"{where}: migration hook '{step.update}' failed: {type(exc).__name__}: {exc}"
            ) from exc
    source = _state_of(instance, data, where)
    dest = chain.states.get(source, source)
    if dest is None:
        raise VersionMismatchError(
            f"{where}: state '{source}' cannot migrate (its migration maps it to null): run it "
            f"where {machine.name} {chain.start} is installed until it leaves '{source}'"
        )
    if dest not in machine.states:
        raise VersionMismatchError(
            f"{where}: state '{source}' becomes '{dest}', which the installed definition lacks: "
            "map it in the migration's states"
        )
    rules = instance.rules
    try:
        if isinstance(machine.codec, FieldCodec):
            data = apply_update(data, {machine.codec.path: dest})
            doc = rules.validate(data)
        else:
            doc = rules.validate(data)
            data = apply_update(data, machine.codec.write(doc, dest))
            doc = rules.validate(data)
    except ValidationError as exc:
        raise VersionMismatchError(
            f"{where}: the migrated document does not validate: {describe_validation(exc)}"
        ) from exc
    base = Loaded(snapshot.data, snapshot.raw, doc, source, rules.status_of(snapshot.data))
    old = stored_definition(instance.folders, machine.name, found.recorded.graph, instance.store)
    edges = edge_map(old, machine.spec, chain) if old is not None else {}
    return MigrationPlan(
        instance.id, chain, source, dest, base, data, diff(snapshot.data, data), edges
    )


def raw_state(instance: Instance) -> str:
    """The state the instance's document is in, read as the installed definition would read it
    but without requiring the state to be one of its own."""
    data = instance.store.read(instance.id).data
    return _state_of(instance, data, f"instance '{instance.id}'")


def _state_of(instance: Instance, data: dict[str, Any], where: str) -> str:
    """The state ``data`` is in, read before it fits the installed definition."""
    codec = instance.machine.codec
    if isinstance(codec, FieldCodec):
        value = get_path(data, codec.path)
        return str(value) if isinstance(value, str | int) else ""
    try:
        return codec.read(instance.rules.validate(data))
    except ValidationError as exc:
        raise VersionMismatchError(
            f"{where}: the document does not validate before its state is migrated (add an "
            f"update hook to the migration): {describe_validation(exc)}"
        ) from exc


def apply_migration(instance: Instance, plan: MigrationPlan, *, actor: str) -> Loaded:
    """Commit ``plan`` as one ``migrate`` record (its patch included, as every record's)."""
    machine = instance.machine
    chain = plan.chain
    renamed = {old: new for old, new in chain.states.items() if old != new}
    reason = f"{machine.name} {chain.start} -> {chain.end}"
    if renamed:
        reason += f": {mapping_text(renamed)}"
    record = MigrateRecord(
        source=plan.source,
        dest=plan.dest,
        reason=reason,
        actor=actor,
        extra={
            DEFINITION: machine.identity.to_json(),
            MIGRATION: {
                "from": chain.start,
                "to": chain.end,
                "states": renamed,
                "events": dict(chain.events),
                "edges": plan.edges,
            },
        },
    )
    saved = instance.commit(plan.data, record, base=plan.base)
    keep_definition(instance.folders, machine, instance.workspace.path, instance.store)
    instance.log.info("instance_migrated", source=plan.source, dest=plan.dest, reason=reason)
    return saved
