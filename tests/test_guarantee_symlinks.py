"""No write leaves the workspace through a symbolic link, for every path a run of each bundled
machine writes.

A dry run of each machine (:mod:`tests.guarantees.audit`) lists every path fsm and the machine's
code write: documents, meta folders, journals, logs, locks, the record of running commands,
side files (ccw-loop's progress files, issue-manager's plans, reports and snapshots,
skill-tuning's diagnoses, backups and the skill's files). Then, for each of those paths and
each folder on the way to one, a fresh workspace gets a symbolic link there before the run,
pointing out of the workspace (to a copy of what was there, or to a file or folder holding
``untouched``), and the machine runs. Whatever the run does with it, refuse or go on, nothing
outside changes, and a refusal is an error message, never a crash (a machine that retries the
refused step gives up with exit 1 after its failed-step limit).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.guarantees.audit import run_recording_writes, written_under
from tests.guarantees.forked import fork_fsm, wait_child
from tests.guarantees.scenarios import SCENARIOS
from tests.guarantees.waiting import DEADLINE, memory_folder


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """The tests' folder, in memory where possible (see :func:`memory_folder`)."""
    yield from memory_folder()


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Everything below ``folder`` (itself included): file bytes, folders and link targets."""
    found: dict[str, bytes | str] = {}
    for path in [folder, *folder.rglob("*")]:
        key = str(path.relative_to(folder.parent))
        if path.is_symlink():
            found[key] = f"link to {path.readlink()}"
        elif path.is_dir():
            found[key] = "folder"
        elif path.is_file():
            found[key] = path.read_bytes()
    return found


def _placements(written: list[Path]) -> list[tuple[Path, bool]]:
    """Every written path and every folder on the way to one, with whether it is a folder.
    Records of running commands are named by pid, so only their folder is a placement."""
    folders = {parent for path in written for parent in path.parents if parent != Path(".")}
    files = {path for path in written if path not in folders and path.parent.name != "running"}
    return sorted([(f, True) for f in folders] + [(f, False) for f in files])


def _link_out(root: Path, place: Path, is_folder: bool, target: Path) -> None:
    """Put a link at ``root/place`` to ``target`` outside, holding what was there (or a file
    or folder saying ``untouched``)."""
    path = root / place
    if path.is_dir() and not path.is_symlink():
        shutil.copytree(path, target, symlinks=True)
        shutil.rmtree(path)
    elif path.exists():
        shutil.copy2(path, target)
        path.unlink()
    elif is_folder:
        target.mkdir()
        (target / "keep.txt").write_text("untouched\n")
    else:
        target.write_text("untouched\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target, target_is_directory=is_folder)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_no_link_takes_a_write_out_of_the_workspace(tmp_path: Path, name: str) -> None:
    """Every path a run writes, linked out of the workspace in turn: nothing outside changes."""
    scenario = SCENARIOS[name]
    run = ["run", str(scenario.machine_path), scenario.instance_id]
    dry = tmp_path / "dry"
    created = scenario.create(dry)
    document = created.store.paths(created.id).document.relative_to(dry)
    log = tmp_path / "dry.writes"
    assert wait_child(run_recording_writes(dry, run, log), DEADLINE) in (0, 4)
    # the document is swapped in with renameat2, which raises no audit event
    placements = _placements([*written_under(log, dry), document])
    assert len(placements) >= 7, placements
    outside = tmp_path / "outside"
    outside.mkdir()
    outcomes: Counter[int | None] = Counter()
    failures: list[str] = []
    for number, (place, is_folder) in enumerate(placements):
        root = tmp_path / f"ws{number}"
        scenario.create(root)
        target = outside / f"target{number}"
        _link_out(root, place, is_folder, target)
        before = _tree(target)
        output = tmp_path / f"ws{number}.out"
        code = wait_child(fork_fsm(root, run, output), DEADLINE)
        text = output.read_text()
        if _tree(target) != before:
            failures.append(f"written through a link at {place} (exit {code})")
        elif code is None or "Traceback" in text or "internal error" in text:
            failures.append(f"link at {place}: exit {code}: {text[-600:]}")
        outcomes[code] += 1
        shutil.rmtree(root)
    assert not failures, f"{name}: " + "\n".join(failures)
    print(f"{name}: {len(placements)} links, exits {dict(outcomes)}")


def test_machine_writes_are_confined_to_the_workspace_while_fsm_runs_them(tmp_path: Path) -> None:
    """Within :func:`fsm.base.files.confined_to` (the engine wraps machine code in it), side-file
    writes that name no root get the workspace's checks: a folder linking out is refused, for
    whole-file writes and appends; paths outside the workspace are left to the caller."""
    from fsm.base.errors import UnsafePathError
    from fsm.base.files import append_text, atomic_write_text, confined_to

    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "reports").symlink_to(outside, target_is_directory=True)
    with confined_to(workspace):
        with pytest.raises(UnsafePathError):
            atomic_write_text(workspace / "reports" / "r.md", "x")
        with pytest.raises(UnsafePathError):
            append_text(workspace / "reports" / "log.txt", "x\n")
        atomic_write_text(tmp_path / "elsewhere.txt", "configured outside on purpose")
    assert list(outside.iterdir()) == []
    atomic_write_text(workspace / "reports" / "r.md", "not confined: followed")
    assert (outside / "r.md").exists()
