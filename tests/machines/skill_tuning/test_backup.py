"""Backups and restores of the target skill, and the fence around writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fsm_machines.skill_tuning.backup import (
    OutsideSkillError,
    ensure_inside,
    restore,
    restore_original,
    snapshot_files,
    snapshot_tree,
    tree_bytes,
)

FILES = {"SKILL.md": "# S\n", "phases/01-a.md": "a\r\nb\n", "specs/x.md": "x"}


def _mess_up(root: Path) -> None:
    (root / "phases/01-a.md").write_bytes(b"changed")
    (root / "specs/x.md").unlink()
    (root / "phases/new.md").write_text("new", encoding="utf-8")
    (root / "extra").mkdir()
    (root / "extra/y.md").write_text("y", encoding="utf-8")


def test_tree_backup_restores_the_skill_exactly(
    make_skill: Callable[..., Path], tmp_path: Path
) -> None:
    """A whole-skill backup puts back changed and deleted files and removes new ones."""
    root = make_skill(FILES)
    original = tree_bytes(root)
    snapshot_tree(root, tmp_path / "work" / "before-FIX-001")
    _mess_up(root)
    restore(root, tmp_path / "work" / "before-FIX-001")
    assert tree_bytes(root) == original
    assert not (root / "extra").exists()


def test_files_backup_restores_only_its_files(
    make_skill: Callable[..., Path], tmp_path: Path
) -> None:
    """A per-fix backup restores the files it holds and removes the ones the fix created."""
    root = make_skill(FILES)
    backup = tmp_path / "work" / "before-FIX-002"
    snapshot_files(root, ["phases/01-a.md", "phases/new.md"], backup)
    (root / "phases/01-a.md").write_bytes(b"changed")
    (root / "phases/new.md").write_text("created by the fix", encoding="utf-8")
    (root / "SKILL.md").write_text("changed by another fix", encoding="utf-8")
    assert restore(root, backup) == ["phases/01-a.md", "phases/new.md"]
    assert (root / "phases/01-a.md").read_bytes() == b"a\r\nb\n"
    assert not (root / "phases/new.md").exists()
    assert (root / "SKILL.md").read_text(encoding="utf-8") == "changed by another fix"


def test_original_backup_restores_the_skill_as_init_found_it(
    make_skill: Callable[..., Path], tmp_path: Path
) -> None:
    """The {name}-backup copy taken by init restores the original skill at any point."""
    root = make_skill(FILES)
    original = tree_bytes(root)
    snapshot_tree(root, tmp_path / "backups" / "sample-skill-backup")
    _mess_up(root)
    restore_original(root, tmp_path / "backups", "sample-skill")
    assert tree_bytes(root) == original


@pytest.mark.parametrize(
    "rel",
    [
        pytest.param("../outside.md", id="parent"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("phases/../../x.md", id="dotdot-inside-path"),
    ],
)
def test_writes_outside_the_allowed_folders_are_refused(
    make_skill: Callable[..., Path], rel: str
) -> None:
    """A path that escapes the skill folder is refused before anything is written."""
    root = make_skill(FILES)
    with pytest.raises(OutsideSkillError, match="outside"):
        ensure_inside(root / rel, root)


def test_a_backup_of_a_path_outside_the_skill_is_refused(
    make_skill: Callable[..., Path], tmp_path: Path
) -> None:
    """A fix naming a file outside the skill cannot even be backed up."""
    root = make_skill(FILES)
    with pytest.raises(OutsideSkillError):
        snapshot_files(root, ["../../escape.md"], tmp_path / "b")
