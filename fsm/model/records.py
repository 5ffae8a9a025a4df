"""Journal records: one typed definition per kind, built by the writers, parsed once by readers.

Every journal line is one record. Fields every kind has (:class:`Record`): ``time``, ``kind``,
``event``, ``source`` and ``dest`` (the state before and after), ``actor``, ``duration_ms``,
``merged`` (written only when true: the step was merged with another writer's change), then the
*stamp* of the document the record leads to (``state``, ``status``, ``doc_hash`` of its bytes,
``core_hash`` of the fields only fsm writes; added by the commit, absent in records that change no
document in journals written before failed steps were stamped), and ``format``. The kinds:

============  ===========================================================================
kind          its own fields
============  ===========================================================================
create        ``machine`` (absent before fsm ls told machines sharing a folder apart); the
              definition it was created under in ``extra`` (:mod:`fsm.model.identity`)
transition    ``transition`` (index in the definition), ``guards`` (each evaluated guard:
              ``transition``, ``guard``, ``result``), ``actions`` (names run), and
              ``agents`` when the step ran an agent (see :func:`agent_runs`)
error         as transition, plus ``action`` (what failed), ``error``, ``traceback``
control       ``status_from``, ``status_to``, ``reason`` (``event`` is the command, or
              ``external`` for a change another program made)
merge         ``reason`` (another program's change re-applied)
repair        ``reason`` (what a crash repair did)
recover       ``machine``, ``notes``, ``moved_aside`` (the corrupt document kept aside)
retry         ``status_from``, ``status_to``, ``items`` (what was reopened), ``reason``: a failed
              instance reopened from its final state (``event`` is ``retry``)
migrate       ``reason``: the instance moved from state ``source`` of an earlier ``version:``
              to ``dest`` of the installed one (``event`` is ``migrate``; its ``migration``
              and ``definition`` in ``extra``, see :mod:`fsm.model.migrations`)
command       ``inputs``, ``reason``: a command of the machine's own (``event`` is its name,
              e.g. ccw-loop's ``add_task``), the state unchanged
============  ===========================================================================

A transition or error record of an event a person fired with a reason (``fsm fire --reason``)
holds it under ``reason`` in ``extra``.

A record that leads to a new version of the document also says what changed against the version
it replaced: a JSON Patch under ``changes``, or only the changed paths under ``changed`` when the
patch is large (:mod:`fsm.model.patch`; :func:`record_changes`, :func:`changed_paths`). Like
``agents`` these keys live in ``extra``: journals written before them, and fsms that do not know
them, read as before.

A record of a kind this fsm does not know (written by a newer fsm, or by hand) is read as an
:class:`UnknownRecord`; keys a definition does not name are kept in ``extra`` (and written back by
:meth:`Record.to_json`). A record of a known kind whose fields do not fit raises
:class:`~fsm.base.errors.JournalRecordError` naming the line; the journal's readers report it and
skip the line, as they do an unreadable one.

**Format.** Each record says which journal format it was written in (``format``): a journal is
appended to by whichever fsm runs next, so one journal may hold records of several formats, and a
reader starting from its end (``fsm history --tail``) never sees its first line. A record without
``format`` (every journal written before this field existed) is format 1, which has the same
fields as format 2. Format 3 says what is checked, not what the fields mean: its records are
linked into a chain (``chain``, the last key of the line, :mod:`fsm.store.chain`), which ``fsm
replay`` checks; records of formats 1 and 2 have no link and are not checked so. A higher format
than :data:`FORMAT` means a newer fsm changed what the fields mean: such a record is refused with a
clear error (upgrade fsm) rather than misread. Adding a field is not a new format: older readers
keep it in ``extra``.

**Representation.** Frozen dataclasses: the writers build them with their ``__init__`` (typed
keywords: renaming a field is a mypy error at every writer and reader). Readers get them from
:func:`parse_record`, which does not go through ``__init__``: the parsed JSON object becomes the
instance's ``__dict__`` as it is (a missing field reads as its default, a class attribute), and
types are checked per *signature* (kind, keys, and the JSON type of each value): a signature is
checked field by field once, then only looked up. List elements (``guards``, ``actions``,
``notes``: shown, never interpreted by fsm) are checked with a signature's first record only.

Measured on 100,000 journal lines (on top of the JSON parse, about 2 µs a line): the frozen
``__init__`` with hand-written checks cost 4.7 µs a record; pydantic validating the line into a
discriminated union of models (``TypeAdapter.validate_json``) 2.1 µs, into typed dicts 2.5 µs,
a whole block at once more than the JSON parse itself; checking every field with ``map`` over
``dict.get`` 2 to 3 µs; the signature and the ``__dict__`` adoption about 1.4 µs. ``fsm replay``
went from 136,000 to 113,000 records a second, ``fsm history`` from 110,000 to 92,000
(``history --json`` shows the lines as they are and did not change).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Self, TypedDict

from fsm.base.errors import JournalRecordError
from fsm.model._record_shapes import Shape, fits, misfit, shape_of, unreadable_format

__all__ = [
    "AGENT_RUNS",
    "CHAINED",
    "CHANGED",
    "CHANGES",
    "DEFINITION",
    "FIRED",
    "FORMAT",
    "OBSERVED",
    "OPTIONS",
    "CommandRecord",
    "ControlRecord",
    "CreateRecord",
    "ErrorRecord",
    "GuardResult",
    "MergeRecord",
    "MigrateRecord",
    "Record",
    "RecoverRecord",
    "RepairRecord",
    "RetryRecord",
    "TransitionRecord",
    "UnknownRecord",
    "agent_runs",
    "changed_paths",
    "parse_record",
    "record_changes",
    "version_named",
]

FORMAT = 3
"""The journal format this fsm writes, and the highest it reads."""
CHAINED = 3
"""The first format whose records are linked into a chain (:mod:`fsm.store.chain`): a record of
this format or newer without its link was tampered with."""


class _NoExtra(Mapping[str, Any]):
    """The ``extra`` of a record without unknown keys: empty, immutable and hashable, so that it
    can be the field's default (a class attribute, which parsed records fall back on)."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0


_NO_EXTRA: Mapping[str, Any] = _NoExtra()


class GuardResult(TypedDict):
    """One guard evaluated while choosing a transition (``guard`` None: it had no guard;
    ``result`` None: the guard raised)."""

    transition: int
    guard: str | None
    result: bool | None


@dataclass(frozen=True, kw_only=True)
class Record:
    """What every record has (see the module docstring); a kind adds its own fields."""

    KIND: ClassVar[str] = ""
    kind: str
    time: str | None = None
    # No defaults here: a default would become every kind's, and a kind that needs the field
    # would silently not (dataclasses take an inherited class attribute as the default).
    event: str | None
    source: str | None
    dest: str | None
    actor: str | None = None
    duration_ms: float | None = None
    merged: bool = False
    state: str | None = None
    status: str | None = None
    doc_hash: str | None = None
    core_hash: str | None = None
    format: int = FORMAT
    chain: str | None = field(default=None, compare=False, repr=False)
    """The record's link in the journal's chain (read, never written by :meth:`to_json`: the
    journal links a line when it appends it, :mod:`fsm.store.chain`)."""
    extra: Mapping[str, Any] = field(default=_NO_EXTRA, repr=False)

    def as_merged(self) -> Self:
        """This record, marked as a step merged with another writer's change."""
        return self._with({"merged": True})

    def stamped(
        self,
        *,
        time: str,
        state: str,
        status: str | None,
        doc_hash: str,
        core_hash: str,
        changes: Mapping[str, Any] | None = None,
    ) -> Self:
        """This record as the commit writes it: when, the document it led to, and what changed
        (``changes``: :func:`fsm.model.patch.changes_of`'s answer, kept under :data:`CHANGES` or
        :data:`CHANGED`)."""
        stamp: dict[str, Any] = {
            "time": time,
            "state": state,
            "status": status,
            "doc_hash": doc_hash,
            "core_hash": core_hash,
        }
        if changes:
            stamp["extra"] = {**self.extra, **changes}
        return self._with(stamp)

    def with_changes(self, changes: Mapping[str, Any]) -> Self:
        """This record saying what changed (:func:`fsm.model.patch.changes_of`'s answer)."""
        return self._with({"extra": {**self.extra, **changes}})

    def _with(self, changes: Mapping[str, Any]) -> Self:
        """A copy with ``changes`` (fields whose types the signature already gives): the
        fields taken over as they are, a tenth of what ``dataclasses.replace`` costs, which
        checks and builds each field again (once per persisted step)."""
        copy = object.__new__(type(self))
        _ADOPT(copy, "__dict__", {**self.__dict__, **changes})
        return copy

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the journal line (keys the definition does not name included)."""
        out: dict[str, Any] = {"time": self.time} if self.time is not None else {}
        out["kind"] = self.kind
        for name in _body(type(self)):
            value = getattr(self, name)
            out[name] = list(value) if type(value) is tuple else value
        if self.actor is not None:
            out["actor"] = self.actor
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.merged:
            out["merged"] = True
        if self.doc_hash is not None:
            out.update(state=self.state, status=self.status, doc_hash=self.doc_hash)
            if self.core_hash is not None:
                out["core_hash"] = self.core_hash
        out["format"] = self.format
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


@dataclass(frozen=True, kw_only=True)
class CreateRecord(Record):
    """The instance was created in ``dest``."""

    KIND: ClassVar[str] = "create"
    kind: Literal["create"] = field(default="create", init=False)
    event: None = None
    source: None = None
    dest: str
    machine: str | None = None


@dataclass(frozen=True, kw_only=True)
class TransitionRecord(Record):
    """A step: transition number ``transition`` taken on ``event`` from ``source`` to ``dest``."""

    KIND: ClassVar[str] = "transition"
    kind: Literal["transition"] = field(default="transition", init=False)
    event: str
    source: str
    dest: str
    transition: int
    guards: Sequence[GuardResult] = ()
    actions: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True)
class ErrorRecord(Record):
    """A step that failed in ``action`` (an action, a guard, or the validation)."""

    KIND: ClassVar[str] = "error"
    kind: Literal["error"] = field(default="error", init=False)
    event: str
    source: str
    dest: str
    transition: int
    guards: Sequence[GuardResult] = ()
    action: str
    error: str
    traceback: str | None = None


@dataclass(frozen=True, kw_only=True)
class ControlRecord(Record):
    """A control command (``event``) that moved the status (and perhaps the state)."""

    KIND: ClassVar[str] = "control"
    kind: Literal["control"] = field(default="control", init=False)
    event: str
    source: str
    dest: str
    status_from: str | None
    status_to: str | None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class MergeRecord(Record):
    """Another program's change that a commit replaced was re-applied."""

    KIND: ClassVar[str] = "merge"
    kind: Literal["merge"] = field(default="merge", init=False)
    event: None = None
    source: str
    dest: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class RepairRecord(Record):
    """A crash was repaired; the instance is in ``state``."""

    KIND: ClassVar[str] = "repair"
    kind: Literal["repair"] = field(default="repair", init=False)
    event: None = None
    source: str
    dest: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class RecoverRecord(Record):
    """A corrupt or missing document was rebuilt in ``dest``."""

    KIND: ClassVar[str] = "recover"
    kind: Literal["recover"] = field(default="recover", init=False)
    event: None = None
    source: None = None
    dest: str
    machine: str | None = None
    notes: Sequence[str] = ()
    moved_aside: str | None = None


@dataclass(frozen=True, kw_only=True)
class RetryRecord(Record):
    """A failed instance reopened by ``fsm retry``: from final state ``source`` to ``dest``, the
    status from ``status_from`` to ``status_to``, ``items`` (the machine's names) reopened."""

    KIND: ClassVar[str] = "retry"
    kind: Literal["retry"] = field(default="retry", init=False)
    event: str = "retry"
    source: str
    dest: str
    status_from: str | None
    status_to: str | None
    items: Sequence[str] = ()
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class MigrateRecord(Record):
    """The instance was migrated from state ``source`` of an earlier version of its machine to
    ``dest`` of the installed one (``reason`` says what changed)."""

    KIND: ClassVar[str] = "migrate"
    kind: Literal["migrate"] = field(default="migrate", init=False)
    event: str = "migrate"
    source: str
    dest: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class CommandRecord(Record):
    """A command of the machine's own (``fsm command``): ``event`` its name, in state
    ``source`` (= ``dest``); its inputs, as validated, ride in ``extra`` under ``inputs``."""

    KIND: ClassVar[str] = "command"
    kind: Literal["command"] = field(default="command", init=False)
    event: str
    source: str
    dest: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class UnknownRecord(Record):
    """A record of a kind this fsm does not know: the common fields that fit, the rest in
    ``extra``."""

    event: str | None = None
    source: str | None = None
    dest: str | None = None


_KINDS: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (
        CreateRecord,
        TransitionRecord,
        ErrorRecord,
        ControlRecord,
        MergeRecord,
        RepairRecord,
        RecoverRecord,
        RetryRecord,
        MigrateRecord,
        CommandRecord,
    )
}
_COMMON = frozenset(f.name for f in fields(Record))
_WRITTEN_APART = _COMMON - {"event", "source", "dest"}


def _body(cls: type[Record]) -> tuple[str, ...]:
    """The fields written between ``kind`` and the common tail, in definition order."""
    body = _BODIES.get(cls)
    if body is None:
        body = _BODIES[cls] = tuple(f.name for f in fields(cls) if f.name not in _WRITTEN_APART)
    return body


_BODIES: dict[type[Record], tuple[str, ...]] = {}


_CONTAINS = frozenset.__contains__
_ADOPT = object.__setattr__
_SHAPES: dict[str, Shape] = {}
"""The shapes of the kinds read so far (derived at the first record of each: cheap imports)."""


def parse_record(data: dict[str, Any], line: int) -> Record:
    """The typed record of ``data``, the object on journal line ``line`` (taken over: the record
    keeps its lists). Raises JournalRecordError naming the line when the object does not fit its
    kind or was written in a newer journal format; a kind this fsm does not know is read as an
    :class:`~fsm.model.records.UnknownRecord`.

    A journal's records come in a few signatures (kind, keys, and the JSON type of each value):
    a signature is checked field by field once, then only looked up. The elements of lists
    (``guards``, ``actions``, ``notes``: shown, never interpreted by fsm's readers) are checked
    with the first record of a signature only: checking them on every record cost more than the
    rest of reading it.
    """
    kind = data.get("kind")
    if type(kind) is not str:  # not a kind at all (nor a key of the checked signatures)
        return _unknown(data, line)
    signature = [*data, *map(type, data.values())]
    # A journal's records of one kind mostly have the signature of the one before: compared
    # as a list, without building and hashing the tuple that finds any other.
    checked = _LAST.get(kind)
    if checked is None or checked[0] != signature:
        checked = _CHECKED.get((kind, *signature))
        if checked is None:
            return _parse_unseen(data, line, kind, signature)
        _LAST[kind] = checked
    _, cls, extra = checked
    version = data.setdefault("format", 1)
    if not 1 <= version <= FORMAT:
        raise unreadable_format(version, line, FORMAT)
    record = object.__new__(cls)
    if extra:
        # The keys the kind does not define (a step's changes, its agent runs), known from the
        # signature: moved into ``extra`` without working them out again.
        pop = data.pop
        data["extra"] = {key: pop(key) for key in extra}
    _ADOPT(record, "__dict__", data)
    return record


def _parse_unseen(data: dict[str, Any], line: int, kind: str, signature: list[Any]) -> Record:
    """Check a record of a signature not seen yet, field by field; remember the signature."""
    cls = _KINDS.get(kind)
    if cls is None:
        return _unknown(data, line)
    shape = _shape(cls)
    # The format first: a newer fsm may have changed what the fields are.
    version = data.get("format", 1)
    if type(version) is not int or not 1 <= version <= FORMAT:
        raise unreadable_format(version, line, FORMAT)
    get = data.get
    if not all(map(_CONTAINS, shape.allowed, map(type, map(get, shape.keys, shape.missing)))):
        raise JournalRecordError(line, misfit(data, shape))
    if not all(fits(data[name]) for name, fits in shape.lists if name in data):
        raise JournalRecordError(line, misfit(data, shape))
    if len(_CHECKED) >= _MAX_SIGNATURES:  # a hostile journal: every line another shape
        _CHECKED.clear()
    extra = tuple(key for key in data if key not in shape.known)
    _CHECKED[(kind, *signature)] = _LAST[kind] = (signature, cls, extra)
    data.setdefault("format", 1)
    record = object.__new__(cls)
    if extra:
        pop = data.pop
        data["extra"] = {key: pop(key) for key in extra}
    _ADOPT(record, "__dict__", data)
    return record


def _shape(cls: type[Record]) -> Shape:
    shape = _SHAPES.get(cls.KIND)
    if shape is None:
        shape = _SHAPES[cls.KIND] = shape_of(cls, _NO_EXTRA, 1)
    return shape


_CHECKED: dict[tuple[Any, ...], tuple[list[Any], type[Record], tuple[str, ...]]] = {}
"""Signatures that fit their kind (the kind, keys, then value types): the signature as
:func:`parse_record` compares it, the kind's class, and the keys it has that the kind does not
define (kept in ``extra``)."""
_LAST: dict[str, tuple[list[Any], type[Record], tuple[str, ...]]] = {}
"""Each known kind's signature checked or found last (as :data:`_CHECKED` holds it)."""
_MAX_SIGNATURES = 512


def _unknown(data: dict[str, Any], line: int) -> UnknownRecord:
    """A record of a kind this fsm does not know: the common fields that fit are read, every
    other key is kept in ``extra``."""
    version = data.get("format", 1)
    if type(version) is not int or not 1 <= version <= FORMAT:
        raise unreadable_format(version, line, FORMAT)
    shape = _shape(UnknownRecord)
    record = object.__new__(UnknownRecord)
    attrs = record.__dict__
    attrs.update(shape.defaults)
    extra: dict[str, Any] = {}
    kind = data.get("kind")
    attrs["kind"] = kind if type(kind) is str else "?"
    for key, value in data.items():
        if key == "kind" and type(value) is str:
            continue
        if key != "kind" and key in shape.known and fits(shape, key, value):
            attrs[key] = value
        else:
            extra[key] = value
    attrs["extra"] = extra or _NO_EXTRA
    return record


AGENT_RUNS = "agents"
"""The key of a step record's agent runs: a list of objects, one per agent the step ran
(``tool``, ``mode``, ``command``, ``exit_code``, ``ok``, ``duration_ms``, and when known
``version``, ``output``, ``reason``, ``final_message``, ``files_changed``, ``exit_reason``,
``usage``, ``warning``; written by :mod:`fsm.process.agent_runs`). It is written only when the step
ran an agent and is not checked field by field: readers keep it in ``extra``, so journals with it
read as before in every fsm."""


def agent_runs(record: Record) -> list[dict[str, Any]]:
    """The agent runs a step record carries (empty when it ran none, or the key is malformed)."""
    runs = record.extra.get(AGENT_RUNS)
    if not isinstance(runs, list):
        return []
    return [run for run in runs if isinstance(run, dict)]


CHANGES = "changes"
"""The key of a record's JSON Patch (RFC 6902) against the version of the document it replaced
(see :mod:`fsm.model.patch`): written by every record that leads to a new version (format 2 journals
written before it have none). Like :data:`AGENT_RUNS` it is kept in ``extra``, so every fsm reads
journals with it."""
CHANGED = "changed"
"""The key of the paths (JSON Pointers) a record changed, written instead of :data:`CHANGES`
when the patch was larger than :data:`fsm.model.patch.PATCH_LIMIT`."""


OBSERVED = "observed"
"""The key of a step record's observations (:meth:`fsm.model.context.Context.observe`): an object
of names to the JSON values the step's guards and actions read besides the document, the first
read of each name. Written only when the step observed something; kept in ``extra``."""
OPTIONS = "options"
"""The key of the machine's options (their JSON, secrets masked) in the first step record of
each run, as the run's guards and actions saw them: what ``fsm replay --decisions`` evaluates a
changed guard with. Kept in ``extra``."""
FIRED = "fired"
"""The key a step record has (``true``) when its event was fired by name (``fsm fire``, a menu)
rather than chosen among the automatic transitions; kept in ``extra``."""


DEFINITION = "definition"
"""The key of a record's definition identity (``{"version", "graph", "code"}``: see
:mod:`fsm.model.identity`), kept in ``extra`` like a step's changes: journals with it read as
before in every fsm."""


def version_named(record: Mapping[str, Any]) -> str | None:
    """The ``version:`` (as text) a journal record's JSON object names under
    :data:`DEFINITION`; None when it names none."""
    found = record.get(DEFINITION)
    if isinstance(found, Mapping):
        version = found.get("version")
        if isinstance(version, int | str) and not isinstance(version, bool):
            return str(version)
    return None


def record_changes(record: Record) -> list[dict[str, Any]] | None:
    """The record's patch (None when it has none: it changed no document, it kept only the
    paths, or it was written before records said what changed)."""
    ops = record.extra.get(CHANGES)
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        return None
    return ops


def changed_paths(record: Record) -> list[str] | None:
    """The paths the record changed (from its patch, or the paths kept instead of one); None
    when it does not say."""
    ops = record_changes(record)
    if ops is not None:
        return list(dict.fromkeys(str(op.get("path", "")) for op in ops))
    paths = record.extra.get(CHANGED)
    if isinstance(paths, list) and all(isinstance(path, str) for path in paths):
        return paths
    return None
