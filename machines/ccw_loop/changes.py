"""Which files a task changed, from git.

A task's ``files_changed`` is the difference between two snapshots of ``git status`` taken before
and after it ran: files that became dirty, dirty files whose content changed again, and dirty files
that became clean (reverted). Content is compared by hash, so a file that was already modified
before the task is reported only if the task modified it again. The loop's own files under the
state folder are never reported. Outside a git repository the list stays empty.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from fsm.executor import Executor

__all__ = ["Snapshot", "changed_files", "take_snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """The dirty files of a git work tree and a hash of each one's content."""

    is_repository: bool
    dirty: dict[str, str]


def take_snapshot(executor: Executor, workspace: Path, exclude: Path | None = None) -> Snapshot:
    """Record the dirty files of ``workspace`` (nothing when it is not a git repository)."""
    probe = executor.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=workspace, timeout=30)
    if not probe.ok or probe.stdout.strip() != "true":
        return Snapshot(False, {})
    top = executor.run(["git", "rev-parse", "--show-toplevel"], cwd=workspace, timeout=30)
    root = Path(top.stdout.strip()) if top.ok and top.stdout.strip() else workspace
    status = executor.run(
        ["git", "status", "--porcelain", "-z", "--untracked-files=all"], cwd=workspace, timeout=60
    )
    if not status.ok:
        return Snapshot(False, {})
    skip = _relative(exclude, root) if exclude is not None else None
    dirty: dict[str, str] = {}
    for path in _porcelain_paths(status.stdout):
        if skip and (path == skip or path.startswith(skip + "/")):
            continue
        dirty[path] = _digest(root / path)
    return Snapshot(True, dirty)


def changed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """Paths (relative to the repository root) whose state differs between the snapshots."""
    if not (before.is_repository and after.is_repository):
        return []
    changed = {p for p, digest in after.dirty.items() if before.dirty.get(p) != digest}
    changed |= set(before.dirty) - set(after.dirty)
    return sorted(changed)


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
