"""The rules of one machine's documents: what the transaction (:mod:`fsm.engine.transaction`) needs
to know of a document, whatever store keeps it.

:class:`DocumentRules` validates a document, reads its FSM state and control status, sets the
status entering a state sets, stamps the ``touch`` fields, renders the document's text (the
bytes every store keeps exactly), hashes the fields only fsm writes (the journal's core hash)
and runs the machine's ``after_save`` hook. :class:`Loaded` is one version of a document.

It knows the machine, the clock and where to report; it knows nothing of stores or instances,
so the transaction and the stores can be written once for every machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.base import jsonio
from fsm.base.clock import Clock
from fsm.base.errors import CorruptDocumentError, UnwritableDocumentError
from fsm.base.jsonrender import render_document
from fsm.base.update import MISSING, apply_update, canonical_hash
from fsm.model.definition import describe_validation
from fsm.model.machine import Machine

__all__ = ["DocumentRules", "Loaded", "runnable"]


@dataclass(frozen=True)
class Loaded:
    """A version of an instance document: JSON data, exact bytes, model, state and status."""

    data: dict[str, Any]
    raw: bytes
    doc: BaseModel
    state: str
    status: str | None


class DocumentRules:
    """The rules of one machine's documents (see the module docstring).

    ``where`` names the document in messages (its path for files); ``after_save`` is called with
    every version committed (the machine's hook, its failure logged by the caller's wrapper).
    """

    def __init__(
        self,
        machine: Machine,
        clock: Clock,
        *,
        where: str,
        after_save: Callable[[Loaded], None] | None = None,
    ) -> None:
        self.machine = machine
        self.clock = clock
        self.where = where
        self.after_save: Callable[[Loaded], None] = after_save or _nothing
        """Tell the machine's ``after_save`` hook (if any) of a version just committed."""
        self.indent = machine.spec.storage.indent
        control = machine.spec.control
        self.external_paths: list[str] = list(machine.spec.external_fields)
        if control is not None:
            self.external_paths += [control.field, *control.owned]
        self._core_plans: dict[tuple[str, ...], tuple[frozenset[str], dict[str, Any]]] = {}

    def validate(self, data: Mapping[str, Any]) -> BaseModel:
        """Validate JSON data with the document model (raises ValidationError)."""
        return self.machine.document_model.model_validate(data)

    def loaded_from(self, raw: bytes) -> Loaded:
        """The version of the document held in ``raw`` (CorruptDocumentError when invalid)."""
        try:
            data = jsonio.loads(raw)
        except jsonio.JsonError as exc:
            raise CorruptDocumentError(f"not a JSON document: {exc}") from exc
        if not isinstance(data, dict):
            raise CorruptDocumentError("not a JSON object")
        return self.loaded(data, raw)

    def loaded(self, data: dict[str, Any], raw: bytes) -> Loaded:
        """The version of ``data`` read as ``raw``, validated (CorruptDocumentError)."""
        try:
            doc = self.validate(data)
        except ValidationError as exc:
            raise CorruptDocumentError(
                f"document {self.where} does not validate: {describe_validation(exc)}"
            ) from exc
        state = self.machine.codec.read(doc)
        if state not in self.machine.states:
            raise CorruptDocumentError(f"document {self.where} is in unknown state '{state}'")
        return Loaded(data, raw, doc, state, self.status_of(data))

    def status_of(self, data: Mapping[str, Any]) -> str | None:
        """The control status in ``data`` (None for machines without a control block)."""
        return self.machine.status_of(data)

    def state_of(self, doc: BaseModel) -> str:
        """The FSM state of the validated ``doc``."""
        return self.machine.codec.read(doc)

    def entering(self, doc: BaseModel, state: str) -> dict[str, Any]:
        """The update that moves the validated ``doc`` into ``state``: the codec's write of the
        state, then the control status the state sets, if it sets one (last, so that it wins
        over whatever the codec wrote to the same field). Every move into a state (a step, a
        control command, a merge, reading another writer's copy) is this one rule."""
        write = dict(self.machine.codec.write(doc, state))
        status = self._status_set_by(state)
        for field in status:
            write.pop(field, None)
        write.update(status)
        return write

    def entered(self, data: dict[str, Any], state: str) -> dict[str, Any]:
        """``data``, already in ``state``, with the control status entering it sets."""
        status = self._status_set_by(state)
        return apply_update(data, status) if status else data

    def _status_set_by(self, state: str) -> dict[str, str]:
        """The control field and the status entering ``state`` writes into it (empty when the
        state sets none or the machine has no control block)."""
        status = self.machine.states[state].status
        control = self.machine.spec.control
        return {} if status is None or control is None else {control.field: status}

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

    def runnable(self, state: str, status: str | None) -> bool:
        """True when a run would drive a version in ``state`` with ``status`` (see
        :func:`runnable`)."""
        return runnable(self.machine, state, status)

    def render(self, data: Mapping[str, Any], label: str) -> bytes:
        """The bytes ``data`` is kept as (UnwritableDocumentError when it is not strict JSON or
        not encodable as UTF-8; ``label`` names the instance)."""
        try:
            return render_document(data, self.indent).encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise UnwritableDocumentError(
                f"the document of '{label}' cannot be written as JSON: {exc}"
            ) from exc


def runnable(machine: Machine, state: str, status: str | None) -> bool:
    """True when a run would drive an instance in ``state`` with ``status``: it is not in a
    final state, and it is running (the control block's active status; always, for machines
    without one) or waits for a run to start it (its status allows ``start`` but not
    ``resume``). The rule of ``fsm run --all`` and of the instances workers claim."""
    if machine.is_final(state):
        return False
    control = machine.spec.control
    if control is None or status == control.active:
        return True
    start = control.commands.get("start")
    resume = control.commands.get("resume")
    if start is None or status not in start.sources:
        return False
    return resume is None or status not in resume.sources


def _nothing(loaded: Loaded) -> None:
    """No ``after_save`` hook to tell."""
