"""The file store: where instance documents live, and how they are read, written and locked.

* Ids are checked before they touch the file system: letters, digits, ``.``, ``_`` and ``-``,
  starting with a letter or digit, no ``..``: ``../../etc/passwd`` never becomes a path.
* Documents are written by :mod:`fsm.commit` with the operations of :mod:`fsm.files`: atomic
  (a reader sees the old document or the new one, never half of one), never through a symbolic
  link, never outside the workspace. Those operations are re-exported here for machines.
* Reads tolerate a writer that rewrites the file in place without locking (the CCW dashboard
  does): a document that does not parse is re-read a few times before it is called corrupt.
* Two advisory locks per instance: the *run lock*, held for the length of a run so that a second
  run is refused, and the *document lock*, held only around each read-modify-write so that a
  control command from another process can write while a run is in progress without either
  side's update being lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm import jsonio
from fsm.errors import (
    CorruptDocumentError,
    InvalidIdError,
    LockHeldError,
    OptionsError,
    StoreError,
    UnknownInstanceError,
    UnwritableDocumentError,
)
from fsm.files import (
    FileLock,
    atomic_write_bytes,
    atomic_write_text,
    confined_to,
    read_file,
    recheck_folders,
)
from fsm.journal import Journal

if TYPE_CHECKING:
    from fsm.commit import Committer
    from fsm.instance import Instance
from fsm.jsonrender import dumps_indented

__all__ = [
    "FileLock",
    "FileStore",
    "InstancePaths",
    "Snapshot",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_file",
    "validate_id",
]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_GLOB_SPECIAL = re.compile(r"[*?\[]")
_HOLE = "\x00"
"""Stands for the id in a resolved path template (no path or id can contain it)."""


def validate_id(instance_id: str) -> str:
    """Return ``instance_id`` if it is safe as a file name; raise InvalidIdError otherwise."""
    if not instance_id:
        raise InvalidIdError("invalid instance id: it is empty")
    if instance_id.startswith("-"):
        # Handed to other tools (git, grep, a dashboard's scripts) it would read as an option.
        raise InvalidIdError(
            f"invalid instance id '{_shown(instance_id)}': it starts with '-' (it would read as "
            "an option); start it with a letter or digit"
        )
    if not _ID.fullmatch(instance_id) or ".." in instance_id:
        shown = _shown(instance_id)
        raise InvalidIdError(
            f"invalid instance id '{shown}': use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, without '..'"
        )
    return instance_id


def _shown(instance_id: str) -> str:
    """The id with control and non-ASCII characters escaped, at most 80 of them."""
    shown = instance_id[:80].encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(instance_id) > 80 else "")


@dataclass(frozen=True)
class InstancePaths:
    """The files of one instance."""

    document: Path
    meta: Path

    # Cached: a step asks for its lock paths every time, and joining paths is not free.
    @cached_property
    def journal(self) -> Path:
        """The append-only NDJSON journal."""
        return self.meta / "journal.ndjson"

    @cached_property
    def log(self) -> Path:
        """The instance's JSON-lines log file."""
        return self.meta / "log.ndjson"

    @cached_property
    def run_lock(self) -> Path:
        """Held while a run drives the instance."""
        return self.meta / "run.lock"

    @cached_property
    def document_lock(self) -> Path:
        """Held around each read-modify-write of the document."""
        return self.meta / "document.lock"


@dataclass(frozen=True)
class Snapshot:
    """A document as read from disk: its JSON data and the exact bytes it came from."""

    data: dict[str, Any]
    raw: bytes


class FileStore:
    """Instance documents of one machine in one workspace, at the paths its storage declares
    (the file implementation of :class:`fsm.storage.Store`)."""

    def __init__(
        self,
        workspace: Path,
        document_template: str,
        meta_template: str | None,
        options: Mapping[str, Any],
        *,
        read_retries: int = 3,
        retry_interval: float = 0.05,
        indent: int = 2,
    ) -> None:
        self.workspace = workspace
        self._document_template = document_template
        self._meta_template = meta_template
        self._options = dict(options)
        self.read_retries = read_retries
        self.retry_interval = retry_interval
        self.indent = indent
        self._paths: dict[str, InstancePaths] = {}
        self._kept: dict[str, FileLock] = {}
        self._templates: tuple[str, str] | tuple[()] | None = None

    def paths(self, instance_id: str) -> InstancePaths:
        """The document and meta folder of ``instance_id`` (validated first)."""
        cached = self._paths.get(instance_id)
        if cached is not None:
            return cached
        validate_id(instance_id)
        document = self._resolve(self._document_template, instance_id)
        if self._meta_template is not None:
            meta = self._resolve(self._meta_template, instance_id)
        else:
            meta = document.parent / f"{document.stem}.fsm"
        paths = InstancePaths(document, meta)
        self._paths[instance_id] = paths
        return paths

    def locations(self, instance_id: str) -> tuple[str, str]:
        """The document and journal paths of ``instance_id`` as text (validated first).

        ``fsm ls`` asks for thousands: the paths of a placeholder id, resolved once, with the id
        put in its place cost a string replace instead of three ``Path`` joins. An id cannot
        change how a path is normalised (no ``/``, never ``.`` or ``..``), so this is exact;
        where the id would decide the meta folder's name (through the document's suffix),
        :meth:`paths` answers.
        """
        validate_id(instance_id)
        if self._templates is None:
            self._templates = self._placeholder_locations()
        if not self._templates:
            paths = self.paths(instance_id)
            return str(paths.document), str(paths.journal)
        document, journal = self._templates
        return document.replace(_HOLE, instance_id), journal.replace(_HOLE, instance_id)

    def _placeholder_locations(self) -> tuple[str, str] | tuple[()]:
        document = self._resolve(self._document_template, _HOLE)
        if self._meta_template is not None:
            meta = self._resolve(self._meta_template, _HOLE)
        else:
            after_id = document.name.rpartition(_HOLE)[2]
            if _HOLE not in document.name or "." not in after_id[:-1]:
                return ()  # the stem, hence the meta folder, would depend on the id
            meta = document.parent / f"{document.stem}.fsm"
        return str(document), str(meta / "journal.ndjson")

    def exists(self, instance_id: str) -> bool:
        """True when the instance's document file exists."""
        return self.paths(instance_id).document.exists()

    def read(self, instance_id: str) -> Snapshot:
        """Read the document, re-reading a few times while it does not parse."""
        path = self.paths(instance_id).document
        attempts = self.read_retries + 1
        for attempt in range(attempts):
            try:
                raw, _ = read_file(path)
            except FileNotFoundError as exc:
                raise UnknownInstanceError(f"no instance '{instance_id}' ({path})") from exc
            except OSError as exc:
                raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
            try:
                data = jsonio.loads(raw)
            except jsonio.JsonError as exc:
                if attempt + 1 < attempts:
                    time.sleep(self.retry_interval)
                    continue
                raise CorruptDocumentError(
                    f"corrupt document {path}: not valid JSON ({exc}); the file was left untouched"
                ) from exc
            if not isinstance(data, dict):
                raise CorruptDocumentError(
                    f"corrupt document {path}: expected a JSON object, found {type(data).__name__}"
                )
            return Snapshot(data, raw)
        raise AssertionError("unreachable")  # pragma: no cover

    def read_raw_bytes(self, instance_id: str) -> bytes | None:
        """The document's current bytes, or None when it does not exist."""
        try:
            return read_file(self.paths(instance_id).document)[0]
        except FileNotFoundError:
            return None

    def write(self, instance_id: str, data: Mapping[str, Any]) -> bytes:
        """Write ``data`` atomically, without journal or merge; return the bytes written.

        Instances commit through :mod:`fsm.commit` instead; this is for tools and tests.
        Data that is not strict JSON (NaN, Infinity) or not encodable as UTF-8 (lone surrogates)
        raises UnwritableDocumentError before anything is written.
        """
        try:
            raw = self.render(data).encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise UnwritableDocumentError(
                f"the document of '{instance_id}' cannot be written as JSON: {exc}"
            ) from exc
        path = self.paths(instance_id).document
        try:
            atomic_write_bytes(path, raw, root=self.workspace)
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return raw

    def render(self, data: Mapping[str, Any]) -> str:
        """The text a document is written as."""
        if self.indent:
            return dumps_indented(data, self.indent) + "\n"
        return json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"

    def list_ids(self) -> list[str]:
        """Ids of every instance whose document exists."""
        template = self._document_template
        pattern = self._resolve(template, _HOLE).relative_to(self.workspace).as_posix()
        glob, _, _ = pattern.partition(_HOLE)
        suffix = pattern.split(_HOLE, 1)[1]
        folder, _, prefix = glob.rpartition("/")
        if "/" not in suffix and not _GLOB_SPECIAL.search(pattern):
            return self._list_folder(self.workspace / folder, prefix, suffix)
        regex = re.compile(re.escape(glob) + r"([^/]+)" + re.escape(suffix) + r"\Z")
        ids: list[str] = []
        for candidate in self.workspace.glob(pattern.replace(_HOLE, "*")):
            match = regex.match(candidate.relative_to(self.workspace).as_posix())
            if match and _ID.fullmatch(match.group(1)) and ".." not in match.group(1):
                ids.append(match.group(1))
        return sorted(set(ids))

    @staticmethod
    def _list_folder(folder: Path, prefix: str, suffix: str) -> list[str]:
        """Ids of the ``<prefix><id><suffix>`` names in ``folder`` (one directory read, no glob)."""
        try:
            names = os.listdir(folder)
        except OSError:  # missing or unreadable, as glob sees it: no instances
            return []
        ids: set[str] = set()
        cut = len(suffix)
        for name in names:
            if len(name) > len(prefix) + cut and name.startswith(prefix) and name.endswith(suffix):
                candidate = name[len(prefix) : len(name) - cut]
                if _ID.fullmatch(candidate) and ".." not in candidate:
                    ids.add(candidate)
        return sorted(ids)

    @contextlib.contextmanager
    def keeping_locks_open(self, instance_id: str) -> Iterator[None]:
        """Keep the document lock file of ``instance_id`` open meanwhile (a run's steps each
        take the lock: one open instead of one per step)."""
        lock = FileLock(self.paths(instance_id).document_lock, self.workspace, keep_open=True)
        self._kept[instance_id] = lock
        try:
            yield
        finally:
            del self._kept[instance_id]
            lock.close()

    @contextlib.contextmanager
    def document_lock(self, instance_id: str, timeout: float = 10.0) -> Iterator[None]:
        """Hold the document lock for a read-modify-write."""
        lock = self._kept.get(instance_id) or FileLock(
            self.paths(instance_id).document_lock, self.workspace
        )
        if not lock.acquire(blocking=True, timeout=timeout):
            raise LockHeldError(
                f"instance '{instance_id}': document lock not released within {timeout:.0f}s"
            )
        try:
            yield
        finally:
            lock.release()

    def run_lock(self, instance_id: str) -> FileLock:
        """Take the run lock without waiting; raise LockHeldError when another run has it."""
        lock = FileLock(self.paths(instance_id).run_lock, self.workspace)
        if not lock.acquire(blocking=False):
            raise LockHeldError(
                f"instance '{instance_id}' is already being run by another process "
                f"(lock {lock.path})"
            )
        return lock

    def journal(self, instance_id: str) -> Journal:
        """The instance's NDJSON journal, in its meta folder."""
        return Journal(self.paths(instance_id).journal, self.workspace)

    def committer(self, instance: Instance) -> Committer:
        """The :class:`fsm.commit.Committer` of ``instance``."""
        from fsm.commit import Committer

        # A new instance handle checks its folders again: a long-lived process notices a
        # folder replaced by a link since.
        recheck_folders()
        return Committer(instance)

    def confined(self) -> contextlib.AbstractContextManager[None]:
        """Confine the writes machines make through this module to the workspace meanwhile."""
        return confined_to(self.workspace)

    def _resolve(self, template: str, instance_id: str) -> Path:
        values = {**self._options, "id": instance_id}
        try:
            relative = template.format_map(values)
        except (KeyError, IndexError, ValueError) as exc:
            raise OptionsError(f"storage path '{template}' names an unknown value {exc}") from exc
        path = self.workspace / relative
        inside = os.path.normpath(path)
        if inside != os.path.normpath(self.workspace) and not inside.startswith(
            os.path.join(os.path.normpath(self.workspace), "")
        ):
            raise OptionsError(
                f"storage path '{relative}' leads outside the workspace {self.workspace}: "
                "instance files stay inside it"
            )
        return path
