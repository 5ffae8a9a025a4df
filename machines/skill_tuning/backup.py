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

**Modes.** A backup copy keeps the mode of the file it copies or honours the umask, whichever is
stricter (``mode & ~umask``: under umask 077 a 0644 skill file is backed up 0600, its folders
0700), so a backup is never readable by more people than the skill or the user's umask allow.
The manifest records each file's own mode, and a restore puts that mode back with the bytes.
Manifests get ``manifest_mode`` (the instance's side-file mode, ``ctx.side_file_mode()``).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from fsm.helpers import atomic_write_text, current_umask

__all__ = [
    "OutsideSkillError",
    "current_umask",
    "ensure_inside",
    "restore",
    "restore_original",
    "snapshot_files",
    "snapshot_tree",
    "tree_bytes",
]


class OutsideSkillError(Exception):
    """A fix names a path outside the folders the machine may change (the skill, its backups).

    Not fsm's :class:`~fsm.errors.UnsafePathError`, which says the workspace itself refuses a
    write (a folder that is a link out of it) and ends the run: this is one fix the machine
    rejects; the failure is recorded and the tuning goes on with the others."""


def ensure_inside(path: Path, *roots: Path) -> Path:
    """``path`` resolved, if it lies inside one of ``roots``; else raise
    :class:`OutsideSkillError`."""
    resolved = path.resolve()
    for root in roots:
        if resolved == root.resolve() or resolved.is_relative_to(root.resolve()):
            return resolved
    shown = ", ".join(str(r) for r in roots)
    raise OutsideSkillError(f"refusing to write {path}: it is outside {shown}")


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes (for comparisons)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _masked_copy(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Copy a file's bytes and times; its mode is the source's less the umask."""
    info = os.stat(source)
    shutil.copyfile(source, dest)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.chmod(dest, stat.S_IMODE(info.st_mode) & ~current_umask())


def _modes(root: Path) -> dict[str, int]:
    """The permission bits of every file and folder under ``root`` (links are not followed)."""
    return {
        p.relative_to(root).as_posix(): stat.S_IMODE(p.lstat().st_mode)
        for p in sorted(root.rglob("*"))
        if not p.is_symlink()
    }


def _copy_tree(source: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, symlinks=True, copy_function=_masked_copy)
    mask = current_umask()
    for folder in [dest, *(p for p in dest.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.chmod(folder, stat.S_IMODE(folder.stat().st_mode) & ~mask)


def _write_manifest(backup: Path, manifest: dict[str, object], mode: int | None) -> None:
    atomic_write_text(_manifest(backup), json.dumps(manifest, indent=2), mode=mode)


def snapshot_tree(skill_root: Path, dest: Path, *, manifest_mode: int | None = None) -> None:
    """Copy the whole skill to ``dest`` and record a ``tree`` manifest (with every file's
    mode) beside it."""
    _copy_tree(skill_root, dest)
    _write_manifest(dest, {"mode": "tree", "modes": _modes(skill_root)}, manifest_mode)


def snapshot_files(
    skill_root: Path, files: Iterable[str], dest: Path, *, manifest_mode: int | None = None
) -> None:
    """Copy the named files (relative to the skill) to ``dest``; note the missing ones."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    entries: list[dict[str, object]] = []
    for rel in sorted(set(files)):
        source = ensure_inside(skill_root / rel, skill_root)
        existed = source.is_file()
        entry: dict[str, object] = {"file": rel, "existed": existed}
        if existed:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            _masked_copy(source, target)
            entry["file_mode"] = stat.S_IMODE(source.stat().st_mode)
        entries.append(entry)
    _write_manifest(dest, {"mode": "files", "files": entries}, manifest_mode)


def _put_back(copy: Path, target: Path, mode: int | None) -> None:
    """Restore one file's bytes and times, and its own mode when the manifest recorded it."""
    if mode is None:
        shutil.copy2(copy, target)
        return
    info = os.stat(copy)
    shutil.copyfile(copy, target)
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.chmod(target, mode)


def restore(skill_root: Path, backup: Path) -> list[str]:
    """Put the skill back as it was when ``backup`` was taken; return the files restored."""
    manifest = json.loads(_manifest(backup).read_text(encoding="utf-8"))
    if manifest["mode"] == "tree":
        return _restore_tree(skill_root, backup, manifest.get("modes", {}))
    restored = []
    for entry in manifest["files"]:
        target = ensure_inside(skill_root / entry["file"], skill_root)
        if entry["existed"]:
            target.parent.mkdir(parents=True, exist_ok=True)
            _put_back(backup / entry["file"], target, entry.get("file_mode"))
        elif target.exists():
            target.unlink()
        restored.append(entry["file"])
    return restored


def restore_original(skill_root: Path, backup_dir: Path, name: str) -> list[str]:
    """Put the whole skill back as ``init`` found it."""
    copy = backup_dir / f"{name}-backup"
    manifest = _manifest(copy)
    modes = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {}
    return _restore_tree(skill_root, copy, modes.get("modes", {}))


def _restore_tree(skill_root: Path, copy: Path, modes: dict[str, int]) -> list[str]:
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
        _put_back(copy / rel, target, modes.get(rel))
    for rel, mode in modes.items():
        folder = skill_root / rel
        if folder.is_dir() and not folder.is_symlink():
            os.chmod(ensure_inside(folder, skill_root), mode)
    return sorted(wanted)


def _manifest(backup: Path) -> Path:
    return backup.with_name(f"{backup.name}.json")
