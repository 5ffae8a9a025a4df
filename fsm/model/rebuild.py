"""Every version of a document, rebuilt from its journal's patches and checked against the
recorded hashes: what ``fsm replay`` checks and ``fsm serve`` shows as time travel.

The journal's records say what each version changed against the one before (:mod:`fsm.model.patch`);
a record holding the whole document (creation, recovery, a crash repair) starts the rebuild
afresh. :class:`Rebuilder` follows the records one at a time, keeping one document. A version
is checked against its record's hashes:

* ``exact``: the rebuilt bytes have the record's ``doc_hash``;
* ``core``: fsm's own fields have the record's ``core_hash``, other programs' fields differ (an
  edit another program made between two steps, which the journal does not hold);
* ``foreign``: the record is of a version another program wrote (an ``external`` record): its
  bytes are that program's writing, which fsm's rendering need not reproduce, and fsm's own
  fields have the record's ``core_hash``;
* ``mismatch``: fsm's own fields differ: the patches do not reproduce the document;
* ``unchecked``: the record has no hash to check against;
* ``unknown``: the version cannot be rebuilt (the journal was written before records said what
  changed, a record kept only the paths of a large patch, or a patch did not apply): the reason
  says which, and the rebuild goes on from the next record holding the whole document.

Checking a version renders and hashes it, which costs more than applying its patch; a version
its patch left as it was (every value set to what it was) has the hash of the one before, and is
not rendered again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fsm.base.update import bytes_hash
from fsm.model.patch import PatchError, applied, copied
from fsm.model.records import CHANGED, CHANGES, Record

__all__ = ["Check", "Rebuilder", "Verdict"]

_WHOLE = ("add", "replace")
Verdict = Literal["exact", "core", "foreign", "mismatch", "unchecked", "unknown"]


@dataclass(frozen=True)
class Check:
    """How the version a record led to checked out (see the module docstring)."""

    verdict: Verdict
    reason: str = ""


class Rebuilder:
    """Follows a journal's records, keeping the document each one led to.

    ``render`` gives a document's bytes as its store keeps them, ``core_matches`` whether the
    fields only fsm writes have a recorded core hash (the machine's
    :class:`~fsm.engine.rules.DocumentRules`).
    """

    def __init__(
        self, render: Callable[[Any], bytes], core_matches: Callable[[Any, str], bool]
    ) -> None:
        self.render = render
        self.core_matches = core_matches
        self.document: Any = None
        """The version the last record led to (None: unknown); changed in place."""
        self.known = False
        self.reason = "the journal holds no version of the document yet"
        """Why the document is unknown."""
        self.seen_changes = False
        """Whether any record said what it changed (journals written before do not)."""
        self._hash: str | None = None
        """The hash of :attr:`document`'s bytes, once worked out (None: not yet)."""

    def follow(self, number: int, record: Record) -> None:
        """Move to the version ``record`` (on journal line ``number``) led to."""
        extra = record.extra
        ops = extra.get(CHANGES) if extra else None
        if type(ops) is not list:
            if extra and CHANGED in extra:
                self.seen_changes = True
                self._lose(
                    f"record {number} kept only the paths it changed (its patch was too large)"
                )
            elif record.doc_hash is not None and record.kind != "error":
                # A failed step changes no document (unless merged, when it says so).
                self._lose(f"record {number} was written before journal records said what changed")
            return
        self.seen_changes = True
        first = ops[0] if ops else None
        starts = type(first) is dict and first.get("path") == "" and first.get("op") in _WHOLE
        if not self.known and not starts:
            return
        try:
            self.document, changed = applied(None if starts else self.document, ops)
        except PatchError as exc:
            self._lose(f"the patch of record {number} does not apply: {exc}")
            return
        if changed or not self.known:
            self._hash = None
        self.known = True

    def _lose(self, reason: str) -> None:
        self.document = None
        self.known = False
        self._hash = None
        self.reason = reason

    def check(self, record: Record) -> Check:
        """How the current version checks out against ``record``'s hashes."""
        if not self.known:
            return Check("unknown", self.reason)
        if record.doc_hash is None:
            return Check("unchecked", "the record has no hash of the document")
        if self._hash is None:
            try:
                self._hash = bytes_hash(self.render(self.document))
            except Exception as exc:  # a rebuilt version that cannot even be written
                return Check("mismatch", f"the rebuilt document cannot be written: {exc}")
        if self._hash == record.doc_hash:
            return Check("exact")
        if record.core_hash is not None and self.core_matches(self.document, record.core_hash):
            if record.actor == "external":
                return Check("foreign", "written by another program, in its own way")
            return Check(
                "core",
                "fsm's fields are as recorded; other programs' fields differ (a change another "
                "program made between steps is not in the journal)",
            )
        return Check("mismatch", "the patches do not reproduce fsm's fields of this version")

    def snapshot(self) -> Any:
        """A copy of the current version (None when unknown)."""
        return copied(self.document) if self.known else None
