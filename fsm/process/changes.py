"""Which files a command or an agent changed: from git in a repository, from file stamps elsewhere.

What a task changed (ccw-loop's ``files_changed``, whether an issue-manager task did anything)
is the difference between two snapshots taken before and after it ran.

* In a git work tree (that does not ignore the workspace) the snapshot is ``git status``:
  files that became dirty, dirty files whose content changed again, and dirty files that became
  clean (reverted). Content is compared by hash, so a file that was already modified before the
  task is reported only if the task modified it again; ignored files are not changes; files of
  commits the task made count. Only the workspace's own files are looked at: in a workspace
  that is a folder of a larger repository, changes elsewhere in it are not the task's.
* Outside a repository the snapshot is the size and modification time of every file of the
  workspace, except fsm's own state folders (``.workflow``, the loop's state folder), version
  control folders and caches that running tests rewrite (``__pycache__``, ``.pytest_cache``, ...)
  and virtual environments. A file rewritten with the same content counts as changed there.
  A workspace of more than :data:`MAX_FILES` files is not walked: its changes are unknown.

fsm's own files (the state folder, an instance's folder given as ``exclude``) are never
reported. :func:`is_known` tells whether the two snapshots can say "nothing changed" (an agent
task that changed nothing is a failed task; when it cannot be known, a machine judges the work
otherwise, as ccw-loop's validation after a fix does).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from fsm.process.executor import Executor

__all__ = [
    "MAX_FILES",
    "SKIPPED_FOLDERS",
    "Snapshot",
    "changed_files",
    "is_known",
    "take_snapshot",
    "workspace_files",
]

_KINDS = ("git", "files", "unknown")

MAX_FILES = 20_000
SKIPPED_FOLDERS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".workflow",
        ".loop",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        "node_modules",
    }
)
"""Folders the file snapshot does not walk: fsm's state, version control, caches that running
tests rewrite, virtual environments and installed packages."""


@dataclass(frozen=True)
class Snapshot:
    """What the workspace looked like: dirty git files and a hash of each, or every file and its
    stamp (size, modification time), or nothing known."""

    kind: Literal["git", "files", "unknown"]
    files: dict[str, str] = field(default_factory=dict)
    head: str | None = None
    """The commit checked out (git only): an agent that commits its change leaves no dirty file."""

    def to_json(self) -> dict[str, object]:
        """The snapshot as JSON (kept across runs, see :mod:`~fsm_machines.ccw_loop.attempts`)."""
        return {"kind": self.kind, "files": dict(self.files), "head": self.head}

    @classmethod
    def from_json(cls, data: object) -> Snapshot:
        """A snapshot :meth:`to_json` wrote; an unreadable one is a snapshot that knows nothing."""
        if not isinstance(data, dict):
            return cls("unknown")
        kind, files, head = data.get("kind"), data.get("files"), data.get("head")
        if kind not in _KINDS or not isinstance(files, dict):
            return cls("unknown")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            return cls("unknown")
        return cls(kind, dict(files), head if isinstance(head, str) else None)


def take_snapshot(executor: Executor, workspace: Path, exclude: Path | None = None) -> Snapshot:
    """Record the state of ``workspace`` (``exclude`` is the loop's state folder)."""
    probe = executor.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=workspace, timeout=30)
    if not probe.ok or probe.stdout.strip() != "true":
        return _file_snapshot(workspace, exclude)
    ignored = executor.run(["git", "check-ignore", "-q", "."], cwd=workspace, timeout=30)
    if ignored.ok:
        # a workspace inside a repository that ignores it (a demo or build output folder): git
        # sees none of its changes
        return _file_snapshot(workspace, exclude)
    top = executor.run(["git", "rev-parse", "--show-toplevel"], cwd=workspace, timeout=30)
    root = Path(top.stdout.strip()) if top.ok and top.stdout.strip() else workspace
    # "-- .": the workspace's own changes; a workspace inside a larger repository (a folder of
    # a monorepo, a home folder kept in git) must not count the rest of it.
    status = executor.run(
        ["git", "status", "--porcelain", "-z", "--untracked-files=all", "--", "."],
        cwd=workspace,
        timeout=60,
    )
    if not status.ok:
        return Snapshot("unknown")
    skip = _relative(exclude, root) if exclude is not None else None
    dirty: dict[str, str] = {}
    for path in _porcelain_paths(status.stdout):
        if skip and (path == skip or path.startswith(skip + "/")):
            continue
        dirty[path] = _digest(root / path)
    head = executor.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=workspace, timeout=30)
    return Snapshot("git", dirty, head.stdout.strip() if head.ok else None)


def is_known(before: Snapshot, after: Snapshot) -> bool:
    """True when the snapshots can tell what changed (both taken the same way)."""
    return before.kind == after.kind != "unknown"


def changed_files(
    before: Snapshot,
    after: Snapshot,
    executor: Executor | None = None,
    workspace: Path | None = None,
) -> list[str]:
    """Paths whose state differs between the snapshots (relative to the repository root, or to
    the workspace outside git); empty when it cannot be known. With ``executor``, files of
    commits made in between (an agent that commits its change) count too."""
    if not is_known(before, after):
        return []
    changed = {p for p, stamp in after.files.items() if before.files.get(p) != stamp}
    changed |= set(before.files) - set(after.files)
    if executor is not None and before.head and after.head and before.head != after.head:
        diff = executor.run(
            ["git", "diff", "--name-only", "-z", before.head, after.head, "--", "."],
            cwd=workspace,
            timeout=60,
        )
        if diff.ok:
            changed |= {path for path in diff.stdout.split("\0") if path}
    return sorted(changed)


def workspace_files(workspace: Path, exclude: Path | None = None) -> Iterator[Path]:
    """Every file of ``workspace`` outside :data:`SKIPPED_FOLDERS` and ``exclude`` (the
    instance's folder), folders in name order."""
    skip = exclude.resolve() if exclude is not None else None
    for folder, folders, names in os.walk(workspace):
        here = Path(folder)
        folders[:] = sorted(
            name
            for name in folders
            if name not in SKIPPED_FOLDERS and (skip is None or (here / name).resolve() != skip)
        )
        for name in names:
            yield here / name


def _file_snapshot(workspace: Path, exclude: Path | None) -> Snapshot:
    stamps: dict[str, str] = {}
    for path in workspace_files(workspace, exclude):
        try:
            info = path.lstat()
        except OSError:
            continue
        stamps[path.relative_to(workspace).as_posix()] = f"{info.st_size}:{info.st_mtime_ns}"
        if len(stamps) > MAX_FILES:
            return Snapshot("unknown")
    return Snapshot("files", stamps)


def _porcelain_paths(output: str) -> list[str]:
    """Paths in ``git status --porcelain -z`` output (renames name the new path)."""
    entries = output.split("\0")
    paths: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        paths.append(path)
        if "R" in code or "C" in code:
            index += 1  # the original path of a rename or copy follows; it is not a change
    return paths


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
