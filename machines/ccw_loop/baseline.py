"""A fix is judged on the tests as they were before the first fix.

A fix agent rewarded for green tests may skip the failing test, delete it, mark it xfail, or
deselect it; none of that fixes the bug. So when the loop makes its first fix, it records the
*baseline* in the progress folder (``baseline/``): a copy of every test file of the workspace
as the last validation ran them (``test_*.py``, ``*_test.py``, ``conftest.py``, ``pytest.ini``
and every file under a ``tests``, ``test`` or ``testing`` folder; copied from the workspace,
not read from the VCS, so that tests a develop task added before it count), the test command,
and the tests that validation collected with their outcomes. The pinned configuration
(:mod:`~fsm_machines.ccw_loop.pinning`) keeps the test command itself.

Every validation after it is judged against it:

* when the workspace's test files differ from the baseline's (changed, deleted, added), the
  tests run in a copy of the workspace made in the temporary folder, with the baseline's test
  files restored and test files it did not have removed; the workspace itself, with the agent's
  edits, is never touched, so a run killed at any moment leaves the user's tree as the agent
  left it (and at worst a copy in the temporary folder). Debug re-runs a test alone in such a
  copy too, so that an assertion the fix weakened is not taken for a flaky test;
* a test that was collected must still be, under its own id, and must not be skipped or
  xfailed; a test that failed must pass; the number of tests collected must not drop. Each
  breach is a failing test of that validation, named with what happened to it.

What a fix changed among the test files, fsm.toml and the loop's task list is recorded on the
fix task (``protected_files_changed``) and said by ``fsm status`` and the loop's last line:
``the fix changed tests/test_x.py: validated against the tests as they were``.

Changes to the tests may be allowed: option ``allow_test_changes`` (pinned) lets fixes change
them, and a task of the task list with ``"allow_test_changes": true`` may change them for
itself. Then the tests run as they are (no copy), and the outcomes are still compared: no test
that ran before may disappear, be skipped or xfailed, the failing ones must pass under their
own ids, and the count must not drop; after an allowed task the baseline's files are the tests
as it left them. Without a JUnit report (counts read from the output) only the failing tests'
ids and the count are known, and only they are compared.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from fsm.executor import SKIPPED_FOLDERS, workspace_files
from fsm.helpers import atomic_write_text

from .model import SkillState, TestResult
from .reports import TestCounts
from .rules import is_fix

__all__ = [
    "Baseline",
    "adopt",
    "changes_note",
    "differences",
    "is_protected",
    "is_test_file",
    "load",
    "record",
    "tests_as_they_were",
    "weakened",
]

_FOLDER = "baseline"
_TEST_FOLDERS = frozenset({"tests", "test", "testing"})
_LINKED = frozenset({".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules"})
"""Folders the copy links to instead of copying: version control and installed software."""


def is_test_file(path: str) -> bool:
    """True for a file the tests are made of (``path`` relative, with ``/``)."""
    parts = PurePosixPath(path).parts
    if not parts:
        return False
    name = parts[-1]
    if name in ("conftest.py", "pytest.ini"):
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    return any(part in _TEST_FOLDERS for part in parts[:-1])


def is_protected(path: str) -> bool:
    """True for a file a fix may not change to make the tests pass: a test file or fsm.toml."""
    return is_test_file(path) or PurePosixPath(path).name == "fsm.toml"


@dataclass(frozen=True)
class Baseline:
    """The tests as they were before the first fix."""

    folder: Path
    taken_at: str
    before: str
    """The fix task it was taken for."""
    command: str
    files: dict[str, str]
    """Test files (relative to the workspace) and the sha256 of each."""
    tests: dict[str, str]
    """Test ids and their outcome (passed, failed, skipped)."""
    complete: bool
    """``tests`` names every test (a JUnit report); else only the failing ones are known."""
    total: int


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _test_files(workspace: Path, exclude: Path | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in workspace_files(workspace, exclude):
        relative = path.relative_to(workspace).as_posix()
        if is_test_file(relative) and path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                found[relative] = _digest(path)
    return found


def load(progress: Path) -> Baseline | None:
    """The baseline recorded in the progress folder ``progress``, or None."""
    folder = progress / _FOLDER
    try:
        data: Any = json.loads((folder / "baseline.json").read_text(encoding="utf-8"))
        return Baseline(
            folder,
            str(data["taken_at"]),
            str(data["before"]),
            str(data["command"]),
            {str(k): str(v) for k, v in data["files"].items()},
            {str(k): str(v) for k, v in data["tests"].items()},
            bool(data["complete"]),
            int(data["total"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def record(
    progress: Path,
    workspace: Path,
    exclude: Path | None,
    state: SkillState,
    *,
    command: str,
    task: str,
    now: str,
) -> Baseline:
    """The baseline: the one recorded already, else the test files as they are now and the
    tests of the last validation (``state``), recorded for fix task ``task``."""
    _sweep(progress)
    found = load(progress)
    if found is not None:
        return found
    counts = (state.validate_.model_extra or {}).get("counts")
    counts = counts if isinstance(counts, dict) else {}
    complete = counts.get("source") == "junit"
    rows = state.validate_.test_results
    tests = {r.test_name: r.status for r in rows if complete or r.status == "failed"}
    total = counts.get("total")
    files = _test_files(workspace, exclude)
    data = {
        "taken_at": now,
        "before": task,
        "command": command,
        "files": files,
        "tests": tests,
        "complete": complete,
        "total": total if isinstance(total, int) else len(rows),
    }
    staging = Path(tempfile.mkdtemp(prefix=f".{_FOLDER}-", dir=progress))
    try:
        for name in files:
            target = staging / "files" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(workspace / name, target)
        # the staging folder is renamed whole: a crash leaves no half-recorded baseline, only
        # a staging folder the next record removes
        (staging / "baseline.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
        staging.rename(progress / _FOLDER)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    baseline = load(progress)
    assert baseline is not None  # just written
    return baseline


def adopt(baseline: Baseline, workspace: Path, exclude: Path | None, now: str) -> None:
    """Make the test files as they are now the baseline's (after a task allowed to change
    them); the tests it collected stay."""
    _sweep(baseline.folder.parent)
    files = _test_files(workspace, exclude)
    shutil.rmtree(baseline.folder / "files", ignore_errors=True)
    for name in files:
        target = baseline.folder / "files" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(workspace / name, target)
    data = {
        "taken_at": baseline.taken_at,
        "adopted_at": now,
        "before": baseline.before,
        "command": baseline.command,
        "files": files,
        "tests": baseline.tests,
        "complete": baseline.complete,
        "total": baseline.total,
    }
    text = json.dumps(data, indent=1)
    atomic_write_text(baseline.folder / "baseline.json", text, root=baseline.folder)


def _sweep(progress: Path) -> None:
    """Remove what a killed record or adopt left: staging folders and temporary files (only one
    run works on a loop at a time, so none is in use)."""
    for stale in progress.glob(f".{_FOLDER}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    for stale in (progress / _FOLDER).glob(".*.tmp"):
        stale.unlink(missing_ok=True)


def differences(baseline: Baseline, workspace: Path, exclude: Path | None) -> list[str]:
    """Test files changed, deleted or added since the baseline."""
    now = _test_files(workspace, exclude)
    names = set(now) | set(baseline.files)
    return sorted(name for name in names if now.get(name) != baseline.files.get(name))


@contextlib.contextmanager
def tests_as_they_were(
    baseline: Baseline | None, workspace: Path, exclude: Path | None, *, allowed: bool
) -> Iterator[tuple[Path, list[str]]]:
    """Where to run the tests so that they are the baseline's, and the test files that differ:
    the workspace itself when none differs (or changes are ``allowed``), else a copy of it in
    the temporary folder with the baseline's test files, removed afterwards."""
    differ = differences(baseline, workspace, exclude) if baseline is not None else []
    if baseline is None or not differ or allowed:
        yield workspace, differ
        return
    with tempfile.TemporaryDirectory(prefix="fsm-tests-as-they-were-") as temporary:
        copy = Path(temporary) / workspace.name
        _copy(workspace, copy, exclude)
        for name in differ:
            target = copy / name
            kept = baseline.folder / "files" / name
            target.unlink(missing_ok=True)
            if name in baseline.files:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(kept, target)
        yield copy, differ


def _copy(workspace: Path, copy: Path, exclude: Path | None) -> None:
    """``workspace`` copied to ``copy``, its version control and environments linked, fsm's
    state and caches left out."""
    skip = exclude.resolve() if exclude is not None else None

    def ignored(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        return {
            name
            for name in names
            if name in SKIPPED_FOLDERS or (skip is not None and (here / name).resolve() == skip)
        }

    shutil.copytree(workspace, copy, symlinks=True, ignore=ignored)
    for name in sorted(_LINKED):
        if (workspace / name).exists():
            os.symlink(workspace / name, copy / name)


def weakened(baseline: Baseline, rows: list[TestResult], counts: TestCounts | None) -> list[str]:
    """What the validation ``rows`` lost of the baseline's tests, one entry each: ``T: skipped
    (it failed before the first fix)``, ``T: no longer collected``, ``collected tests dropped
    from 284 to 283``."""
    now = {row.test_name: row for row in rows}
    found: list[str] = []
    for name, before in baseline.tests.items():
        if before == "skipped":
            continue
        row = now.get(name)
        was = " (it failed before the first fix)" if before == "failed" else ""
        if row is None:
            if baseline.complete and (counts is None or counts.total == len(rows)):
                found.append(f"{name}: no longer collected (deleted or deselected){was}")
        elif row.status == "skipped":
            how = "xfailed" if "xfail" in (row.error_message or "").lower() else "skipped"
            found.append(f"{name}: {how}{was}")
    if counts is not None and counts.total < baseline.total:
        found.append(f"collected tests dropped from {baseline.total} to {counts.total}")
    return found


def changes_note(state: SkillState) -> str:
    """``the fix changed tests/test_x.py: validated against the tests as they were``, or ""
    when no fix changed a test file, fsm.toml or the task list."""
    fixes = [t for t in state.develop.tasks if is_fix(t)]
    names: list[str] = []
    for task in fixes:
        for name in task.extra("protected_files_changed") or []:
            if name not in names:
                names.append(str(name))
    if not names:
        return ""
    config = (state.model_extra or {}).get("config")
    allowed = isinstance(config, dict) and config.get("allow_test_changes") is True
    tests = any(is_test_file(name) for name in names)
    against = []
    if tests:
        against.append("the tests as they were" if not allowed else "the tests as changed")
    reconfigured = isinstance(config, dict) and "reconfigured_at" in config
    if any(not is_test_file(name) for name in names) and not reconfigured:
        against.append("the configuration the loop started with")
    who = "the fix" if len(fixes) == 1 else "the fixes"
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    said = []
    if against:
        said.append(f"validated against {' and '.join(against)}")
        if allowed and tests:
            said[-1] += " (allow_test_changes)"
    if reconfigured:
        said.append("the configuration was then adopted by fsm run --reconfigure")
    return f"{who} changed {shown}: {'; '.join(said)}"
