"""The file store: instance documents and journals in files, as the CCW dashboard reads them
(the implementation of :class:`fsm.store.protocol.Store` registered as ``files``, the default).

* Ids are checked before they touch the file system (:func:`fsm.base.ids.validate_id`).
* A document lives where the machine's ``storage.document`` template puts it; its meta folder
  (``storage.meta``, else ``<document stem>.fsm`` beside it) holds its journal
  (``journal.ndjson``), its log, its locks and the records of its running commands.
* Documents are written by :meth:`FileStore.swap` (:mod:`fsm.store.file_swap`): atomic (a reader
  sees the old document or the new one, never half of one), never through a symbolic link,
  never outside the workspace; a version another program writes meanwhile, even in place and
  without a lock (the dashboard), is handed back to be merged, never lost.
* Reads tolerate a writer that rewrites the file in place without locking: a document that does
  not parse is re-read a few times before it is called corrupt.
* Two advisory locks per instance: the run lock (:meth:`FileStore.lease`), held for the length
  of a run so that a second run is refused, and the document lock (:meth:`FileStore.lock`),
  held only around each read-modify-write so that a control command from another process can
  write while a run is in progress without either side's update being lost. A lease is an
  ``flock``: it is released only by its holder or its holder's death, never taken over, so its
  fencing token (0) never needs checking.
* After a crash the next command repairs the instance (:mod:`fsm.store.file_repair`).

The file operations machines write their side files with are in :mod:`fsm.helpers`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsm.base import jsonio
from fsm.base.errors import (
    CorruptDocumentError,
    FsmError,
    LockHeldError,
    OptionsError,
    StoreError,
    UnknownInstanceError,
    UnwritableDocumentError,
)
from fsm.base.files import (
    FileLock,
    atomic_write_bytes,
    atomic_write_text,
    read_file,
    recheck_folders,
)
from fsm.base.ids import ID_PATTERN, is_valid_id, validate_id
from fsm.base.jsonrender import render_document
from fsm.store.file_swap import FileSwap
from fsm.store.journal import Journal
from fsm.store.protocol import (
    Build,
    Folders,
    LateWrite,
    Layout,
    Lease,
    Listed,
    Repaired,
    Snapshot,
    Swapped,
)

if TYPE_CHECKING:
    import asyncio

    from fsm.model.records import Record

__all__ = [
    "FileLease",
    "FileLock",
    "FileStore",
    "InstancePaths",
    "Snapshot",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_file",
    "validate_id",
]

_GLOB_SPECIAL = re.compile(r"[*?\[]")
_HOLE = "\x00"
"""Stands for the id in a resolved path template (no path or id can contain it)."""
SETTLED_NS = 2_000_000_000
"""A stamp is given once the document and journal have not changed for this long."""
MARK = "fsmwatchmark0"
"""A valid instance id standing for every id while the paths watched for changes are made."""


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


class FileLease:
    """A run's lease on an instance of the file store: its run lock (an ``flock``)."""

    token = 0
    """Never taken over (see the module docstring): nothing to fence."""

    def __init__(self, lock: FileLock) -> None:
        self.lock = lock

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.lock.path

    def held(self) -> bool:
        """True until released."""
        return self.lock.held

    def release(self) -> None:
        """Let another run take the instance."""
        self.lock.release()

    def watch(self, lost: Callable[[], None]) -> None:
        """Nothing to watch: a file lease is lost only with its holder."""


class _Handle:
    """What the store keeps of one instance while it is used: its journal, its swaps and, in a
    session, its document lock's file."""

    def __init__(self, store: FileStore, paths: InstancePaths) -> None:
        self.paths = paths
        self.journal = Journal(paths.journal, store.workspace)
        self.swapper = FileSwap(
            paths.document,
            self.journal,
            store.workspace,
            read_retries=store.read_retries,
            retry_interval=store.retry_interval,
        )
        self.kept_lock: FileLock | None = None


class FileStore:
    """Instance documents of one machine in one workspace, at the paths its storage declares
    (the file implementation of :class:`fsm.store.protocol.Store`)."""

    name = "files"

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
        self._handles: dict[str, _Handle] = {}
        self._templates: tuple[str, str] | tuple[()] | None = None
        self._meta_names: tuple[int, int, frozenset[str]] | None = None

    @classmethod
    def from_layout(cls, layout: Layout) -> FileStore:
        """The file store of ``layout`` (the factory registered as ``files``)."""
        return cls(
            layout.workspace,
            layout.document,
            layout.meta,
            layout.values,
            read_retries=layout.read_retries,
            retry_interval=layout.retry_interval,
        )

    def _handle(self, instance_id: str) -> _Handle:
        handle = self._handles.get(instance_id)
        if handle is None:
            # A new instance handle checks its folders again: a long-lived process notices a
            # folder replaced by a link since.
            recheck_folders()
            handle = self._handles[instance_id] = _Handle(self, self.paths(instance_id))
        return handle

    # --- where things are ------------------------------------------------------------------

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

    def describe(self, instance_id: str) -> str:
        """The document's path."""
        return str(self.paths(instance_id).document)

    def folders(self, instance_id: str) -> Folders:
        """The document's folder (side files go beside the document, as CCW keeps them) and
        the meta folder."""
        paths = self.paths(instance_id)
        return Folders(paths.document.parent, paths.meta)

    def permissions(self, instance_id: str) -> int | None:
        """The document file's permission bits (None when there is no document yet)."""
        try:
            return stat.S_IMODE(os.stat(self.paths(instance_id).document).st_mode)
        except OSError:
            return None

    # --- documents -------------------------------------------------------------------------

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

    def write(self, instance_id: str, data: Mapping[str, Any]) -> bytes:
        """Write ``data`` atomically, without journal or merge; return the bytes written.

        Instances commit through the transaction (:mod:`fsm.engine.transaction`) instead; this is
        for tools and tests. Data that is not strict JSON (NaN, Infinity) or not encodable as UTF-8
        (lone surrogates) raises UnwritableDocumentError before anything is written.
        """
        try:
            raw = render_document(data, self.indent).encode("utf-8")
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

    def read_bytes(self, instance_id: str) -> bytes | None:
        """The document's current bytes, or None when it does not exist."""
        try:
            return read_file(self.paths(instance_id).document)[0]
        except FileNotFoundError:
            return None

    def is_current(self, instance_id: str, raw: bytes) -> bool:
        """True when the document holds exactly ``raw`` (read through the file written last,
        kept open during a session, while it still is the document)."""
        handle = self._handles.get(instance_id) or self._handle(instance_id)
        return handle.swapper.is_current(raw)

    def render(self, data: Mapping[str, Any]) -> str:
        """The text :meth:`write` writes a document as."""
        return render_document(data, self.indent)

    def list_ids(self) -> list[str]:
        """Ids of every instance whose document exists."""
        template = self._document_template
        pattern = self._resolve(template, _HOLE).relative_to(self.workspace).as_posix()
        glob, _, _ = pattern.partition(_HOLE)
        suffix = pattern.split(_HOLE, 1)[1]
        folder, _, prefix = glob.rpartition("/")
        if "/" not in suffix and not _GLOB_SPECIAL.search(pattern):
            return self._listed_ids(self.workspace / folder, prefix, suffix)
        regex = re.compile(re.escape(glob) + r"([^/]+)" + re.escape(suffix) + r"\Z")
        ids: list[str] = []
        for candidate in self.workspace.glob(pattern.replace(_HOLE, "*")):
            match = regex.match(candidate.relative_to(self.workspace).as_posix())
            if match and is_valid_id(match.group(1)):
                ids.append(match.group(1))
        return sorted(set(ids))

    def _listed_ids(self, folder: Path, prefix: str, suffix: str) -> list[str]:
        ids = self._list_folder(folder, prefix, suffix)
        self._look_at_meta_folders()
        return ids

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
                if is_valid_id(candidate):
                    ids.add(candidate)
        return sorted(ids)

    # --- the transaction's primitives ------------------------------------------------------

    def swap(
        self,
        instance_id: str,
        build: Build,
        *,
        expected: bytes | None = None,
        fence: Lease | None = None,
    ) -> Swapped:
        """Compare-and-swap of the document and its journal records (:mod:`fsm.store.file_swap`).
        The fence is not checked: a file lease is never taken over (see the module docstring)."""
        handle = self._handles.get(instance_id) or self._handle(instance_id)
        return handle.swapper.swap(build, expected=expected)

    def append(
        self, instance_id: str, records: Sequence[Record], *, fence: Lease | None = None
    ) -> None:
        """Append ``records`` to the journal in one write, all or none (the fence is not
        checked: a file lease is never taken over)."""
        self._handle(instance_id).journal.write_all(records)

    def journal(self, instance_id: str) -> Journal:
        """The instance's NDJSON journal, in its meta folder."""
        return self._handle(instance_id).journal

    def late_writes(self, instance_id: str, *, last: bool = False) -> list[LateWrite]:
        """Changes written into document files swaps replaced (see :mod:`fsm.store.file_swap`)."""
        handle = self._handles.get(instance_id)
        if handle is None:
            return []
        return handle.swapper.late_writes(last=True) if last else handle.swapper.settle_replaced()

    @contextlib.contextmanager
    def lock(self, instance_id: str, timeout: float = 10.0) -> Iterator[None]:
        """Hold the document lock for a read-modify-write."""
        handle = self._handles.get(instance_id) or self._handle(instance_id)
        lock = handle.kept_lock or FileLock(handle.paths.document_lock, self.workspace)
        if not lock.acquire(blocking=True, timeout=timeout):
            raise LockHeldError(
                f"instance '{instance_id}': document lock not released within {timeout:.0f}s"
            )
        try:
            yield
        finally:
            lock.release()

    def lease(self, instance_id: str) -> FileLease:
        """Take the run lock without waiting; raise LockHeldError when another run has it."""
        lock = FileLock(self.paths(instance_id).run_lock, self.workspace)
        if not lock.acquire(blocking=False):
            raise LockHeldError(
                f"instance '{instance_id}' is already being run by another process "
                f"(lock {lock.path})"
            )
        return FileLease(lock)

    @contextlib.contextmanager
    def session(self, instance_id: str) -> Iterator[None]:
        """Keep the document lock's file, the journal, the document's folder (to ``fsync`` it)
        and the document written last open meanwhile: opening them anew at each step cost more
        than the rest of a step's bookkeeping."""
        handle = self._handle(instance_id)
        lock = FileLock(handle.paths.document_lock, self.workspace, keep_open=True)
        handle.kept_lock = lock
        try:
            with handle.journal.kept_open(), handle.swapper.files_kept_open():
                yield
        finally:
            handle.kept_lock = None
            lock.close()

    # --- what cannot be committed, what cannot be read -------------------------------------

    def park(self, instance_id: str, data: Mapping[str, Any]) -> str:
        """Keep a step's result that cannot be committed in the meta folder; return its path."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        parked = self.paths(instance_id).meta / f"unsaved-step-{stamp}.json"
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
        atomic_write_text(
            parked, text.encode("utf-8", "backslashreplace").decode("utf-8"), root=self.workspace
        )
        return str(parked)

    def quarantine(self, instance_id: str) -> str | None:
        """Move the document to ``<document>.corrupt-<time>``, a name no earlier copy has
        (never overwriting one); return that path (None when there is no document)."""
        path = self.paths(instance_id).document
        with contextlib.suppress(OSError):  # the next document keeps the corrupt one's mode
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            self._handle(instance_id).swapper.mode_when_new = mode
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        for number in range(1000):
            suffix = f"-{number}" if number else ""
            target = path.with_name(f"{path.name}.corrupt-{stamp}{suffix}")
            try:
                os.link(path, target)  # fails if the name is taken
            except FileExistsError:
                continue
            except FileNotFoundError:
                return None
            os.unlink(path)
            return str(target)
        raise FsmError(f"cannot find a free name beside {path} to keep the corrupt document")

    def restore(self, instance_id: str, kept: str) -> None:
        """Put the document :meth:`quarantine` kept back in its place."""
        os.replace(kept, self.paths(instance_id).document)

    # --- after a crash ---------------------------------------------------------------------

    def _own_folders(self, paths: InstancePaths, instance_id: str) -> list[Path]:
        """The instance's own folders: its meta folder, and its document's folder when that
        one holds this instance alone."""
        folders = [paths.meta]
        if instance_id in paths.document.parent.parts:
            folders.append(paths.document.parent)
        return folders

    def needs_repair(self, instance_id: str) -> bool:
        """A look without the lock (see :func:`fsm.store.file_repair.needs_repair`)."""
        from fsm.store import file_repair  # imported by what writes: fsm ls imports no hashing

        handle = self._handle(instance_id)
        paths = handle.paths
        return file_repair.needs_repair(
            paths.document, handle.journal, self._own_folders(paths, instance_id)
        )

    def repair(self, instance_id: str) -> Repaired:
        """Make journal and document agree after a crash (:func:`fsm.store.file_repair.repair`)."""
        from fsm.store import file_repair

        handle = self._handle(instance_id)
        paths = handle.paths
        return file_repair.repair(
            paths.document, handle.journal, self._own_folders(paths, instance_id)
        )

    # --- readers ---------------------------------------------------------------------------

    def listed(self, instance_id: str) -> Listed:
        """The document's bytes and modification time, and the machine the journal's first
        record names (read no further than its first line)."""
        document, journal = self.locations(instance_id)
        creator = version = None
        if not self._without_journal(document, journal):
            creator, version = _creator(journal)
        try:
            raw, info = read_file(document)
        except (OSError, FsmError) as exc:
            return Listed(None, 0, creator, str(exc), version)
        return Listed(raw, info.st_mtime_ns, creator, None, version)

    def stamp(self, instance_id: str) -> list[list[int] | None] | None:
        """The inode, size, modification and change times of the document and of the journal;
        None when there is no document, or when either file changed within the last
        :data:`SETTLED_NS` (a file system's clock has coarse ticks: a file rewritten within one
        would keep its stamp). A journal whose folder the listing did not see is not looked for
        (documents another program wrote: one status call each, not two)."""
        document, journal = self.locations(instance_id)
        found = stamp_of(document)
        if found is None:
            return None
        journal_stamp = None if self._without_journal(document, journal) else stamp_of(journal)
        now = time.time_ns()
        if now - found[3] <= SETTLED_NS or (
            journal_stamp is not None and now - journal_stamp[3] <= SETTLED_NS
        ):
            return None
        return [found, journal_stamp]

    def _without_journal(self, document: str, journal: str) -> bool:
        """True when the listing of the documents' folder made by :meth:`list_ids` shows that
        the journal's folder does not exist: documents another program wrote (the CCW
        dashboard's) then cost no failed open of a journal each."""
        names = self._meta_names
        if names is None:
            return False
        start, end, found = names
        return journal[start:end] not in found

    def _look_at_meta_folders(self) -> None:
        """List the documents' folder once per listing when the meta folders lie beside the
        documents (``{folder}/{id}.fsm`` next to ``{folder}/{id}.json``); nothing for a folder
        per instance (a listing would cost what it saves)."""
        self._meta_names = None
        try:
            document, journal = self.locations(MARK)
        except FsmError:
            return
        meta = os.path.dirname(journal)
        folder = os.path.dirname(meta)
        if folder != os.path.dirname(document):
            return
        try:
            names = frozenset(os.listdir(folder))
        except OSError:
            return
        self._meta_names = (len(folder) + 1, len(meta) - len(journal), names)

    def watched(self) -> list[tuple[re.Pattern[str], Path]]:
        """The patterns of the document's and the journal's paths (the id as the group
        ``id``) and the folder each lies in."""
        found = []
        for path in self.locations(MARK):
            first, *others = path.split(MARK)
            regex = re.escape(first) + f"(?P<id>{ID_PATTERN})"
            regex += "(?P=id)".join(re.escape(part) for part in others)
            found.append((re.compile(regex + r"\Z"), Path(first + "x").parent))
        return found

    async def changes(self, stop: asyncio.Event) -> AsyncIterator[set[str] | None]:
        """The ids whose document or journal files changed, as a file watcher (inotify) tells
        them (see :mod:`fsm.store.file_watch`)."""
        from fsm.store.file_watch import watch

        async for changed in watch(self.workspace, self.watched(), stop):
            yield changed

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


def stamp_of(path: str) -> list[int] | None:
    """What changes when the file at ``path`` changes (None when it does not exist)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _creator(journal: str) -> tuple[str | None, str | None]:
    """The machine the first record of ``journal`` names, and the version of its definition
    (each None when there is no journal or its first line names none)."""
    try:
        first = _first_line(journal)
    except OSError:
        return None, None
    try:
        record = jsonio.loads_quick(first.decode("utf-8", errors="replace"))
    except jsonio.JsonError:
        return None, None
    if not isinstance(record, dict):
        return None, None
    owner = record.get("machine")
    # Imported here: a listing from its index imports no record type (fsm ls stays light).
    from fsm.model.records import version_named

    return owner if isinstance(owner, str) else None, version_named(record)


def _first_line(path: str) -> bytes:
    """The first line of ``path`` (raw ``os`` reads: ``fsm ls`` does this once per instance).

    Read no further than jsonio's size limit: a journal that is one endless line is not read
    to its end (what is returned then does not parse).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= jsonio.MAX_BYTES and (chunk := os.read(fd, 4096)):
            line, newline, _ = chunk.partition(b"\n")
            chunks.append(line)
            size += len(line)
            if newline:
                break
    finally:
        os.close(fd)
    return b"".join(chunks)
