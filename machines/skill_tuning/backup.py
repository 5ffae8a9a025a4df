"""Backups of the target skill, byte-identical restores, and the fence around every write.

Two kinds of backup live under ``backup_dir``:

* ``{name}-backup/``: the whole skill as ``init`` found it, a plain copy (``cp -a`` restores it
  by hand; :func:`restore_original` does it here), kept for the life of the instance.
* ``before-FIX-nnn/``: what one fix is about to change, with a manifest ``before-FIX-nnn.json``
  beside it. A ``files`` backup holds the files the fix touches (and notes the ones that did not
  exist yet); a ``tree`` backup holds the whole skill, for fixes by an agent that may touch
  anything. :func:`restore` puts back exactly those bytes and removes what the fix created.

Nothing here writes outside the skill folder or the backup folder: :func:`ensure_inside` is
called on every path before it is written or removed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from fsm.helpers import atomic_write_text

__all__ = [
    "UnsafePathError",
    "ensure_inside",
    "restore",
    "restore_original",
    "snapshot_files",
    "snapshot_tree",
    "tree_bytes",
]


class UnsafePathError(Exception):
    """A path that would take a write outside the folders the machine may change."""


def ensure_inside(path: Path, *roots: Path) -> Path:
    """``path`` resolved, if it lies inside one of ``roots``; else raise UnsafePathError."""
    resolved = path.resolve()
    for root in roots:
        if resolved == root.resolve() or resolved.is_relative_to(root.resolve()):
            return resolved
    shown = ", ".join(str(r) for r in roots)
    raise UnsafePathError(f"refusing to write {path}: it is outside {shown}")


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes (for comparisons)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _copy_tree(source: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, symlinks=True)


def snapshot_tree(skill_root: Path, dest: Path) -> None:
    """Copy the whole skill to ``dest`` and record a ``tree`` manifest beside it."""
    _copy_tree(skill_root, dest)
    atomic_write_text(_manifest(dest), json.dumps({"mode": "tree"}, indent=2))


def snapshot_files(skill_root: Path, files: Iterable[str], dest: Path) -> None:
    """Copy the named files (relative to the skill) to ``dest``; note the missing ones."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    entries = []
    for rel in sorted(set(files)):
        source = ensure_inside(skill_root / rel, skill_root)
        existed = source.is_file()
        if existed:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        entries.append({"file": rel, "existed": existed})
    manifest = {"mode": "files", "files": entries}
    atomic_write_text(_manifest(dest), json.dumps(manifest, indent=2))


def restore(skill_root: Path, backup: Path) -> list[str]:
    """Put the skill back as it was when ``backup`` was taken; return the files restored."""
    manifest = json.loads(_manifest(backup).read_text(encoding="utf-8"))
    if manifest["mode"] == "tree":
        return _restore_tree(skill_root, backup)
    restored = []
    for entry in manifest["files"]:
        target = ensure_inside(skill_root / entry["file"], skill_root)
        if entry["existed"]:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(backup / entry["file"], target)
        elif target.exists():
            target.unlink()
        restored.append(entry["file"])
    return restored


def restore_original(skill_root: Path, backup_dir: Path, name: str) -> list[str]:
    """Put the whole skill back as ``init`` found it."""
    return _restore_tree(skill_root, backup_dir / f"{name}-backup")


def _restore_tree(skill_root: Path, copy: Path) -> list[str]:
    wanted = tree_bytes(copy)
    for path in sorted(skill_root.rglob("*"), reverse=True):
        rel = path.relative_to(skill_root).as_posix()
        if path.is_file() and rel not in wanted:
            ensure_inside(path, skill_root).unlink()
        elif path.is_dir() and not (copy / rel).is_dir():
            shutil.rmtree(ensure_inside(path, skill_root))
    for rel in wanted:
        target = ensure_inside(skill_root / rel, skill_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(copy / rel, target)
    return sorted(wanted)


def _manifest(backup: Path) -> Path:
    return backup.with_name(f"{backup.name}.json")
