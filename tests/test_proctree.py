"""A command's time limit is a bound: its whole process tree ends with it, setsid children too.

Real processes throughout: a child that calls ``setsid`` leaves the command's process group and
session, and one that keeps the command's output open would make a reader waiting for
end-of-file wait as long as it lives. Bounds are asserted loosely (a command whose children
sleep 300 s must come back long before that), never as tight timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsm.process import orphans
from fsm.process.executor import SubprocessExecutor
from fsm.process.proctree import ProcessTree, start_time
from tests.guarantees.waiting import is_running, wait_until

LONG = 300
"""Seconds the children of these commands would live if nothing killed them."""
BOUND = 60.0
"""A generous bound for a command whose limit is a second or two (a busy machine is slow)."""


def _detached(pid_file: Path, *, keep_output: bool) -> str:
    """A shell line starting a child that leaves the session (``setsid``) and sleeps LONG
    seconds, writing its pid to ``pid_file``; with ``keep_output`` it holds stdout open."""
    code = (
        "import os, sys, time; os.setsid(); "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        f"sys.stdout.flush(); time.sleep({LONG})"
    )
    redirect = "" if keep_output else " </dev/null >/dev/null 2>&1"
    return f"{sys.executable} -c {json.dumps(code)}{redirect} &"


def _pid(path: Path) -> int:
    wait_until(lambda: path.is_file() and path.read_text().strip(), f"{path.name} written")
    return int(path.read_text())


@pytest.fixture
def executor(tmp_path: Path) -> SubprocessExecutor:
    """An executor whose workspace is the temporary folder."""
    return SubprocessExecutor(tmp_path, default_timeout=BOUND)


@pytest.mark.parametrize(
    ("leader", "timeout", "timed_out"),
    [
        (f"echo started; sleep {LONG}", 1.0, True),
        ("echo started", BOUND, False),
    ],
    ids=["limit-expires", "leader-exits"],
)
def test_setsid_child_holding_the_output_does_not_hold_the_run(
    executor: SubprocessExecutor, tmp_path: Path, leader: str, timeout: float, timed_out: bool
) -> None:
    """A child that left the session and keeps stdout open is killed: when the limit expires
    (the result names the limit), and when the command's leader exits without it (the command
    succeeded; its leftover is killed and counted); either way the run comes back at once."""
    pid_file = tmp_path / "child.pid"
    began = time.monotonic()
    result = executor.shell(f"{_detached(pid_file, keep_output=True)} {leader}", timeout=timeout)
    assert time.monotonic() - began < BOUND
    child = _pid(pid_file)
    wait_until(lambda: not is_running(child), "the setsid child killed")
    assert result.stdout.strip() == "started"
    assert result.timed_out is timed_out
    if timed_out:
        assert (result.exit_code, result.timeout) == (None, 1.0)
        assert "(limit 1s)" in result.describe()
    else:
        assert (result.ok, result.leftovers) == (True, 1)


def test_child_that_left_the_session_and_closed_its_output_is_killed_at_the_limit(
    executor: SubprocessExecutor, tmp_path: Path
) -> None:
    """A setsid child that closed its output is still the command's (it was seen as a child of
    the command while its parent lived) and dies with it when the limit expires."""
    pid_file = tmp_path / "child.pid"
    result = executor.shell(
        f"{_detached(pid_file, keep_output=False)} while [ ! -s {pid_file} ]; do sleep 0.01; done;"
        f" sleep {LONG}",
        timeout=2.0,
    )
    assert result.timed_out
    child = _pid(pid_file)
    wait_until(lambda: not is_running(child), "the detached child killed")


def test_a_command_that_ends_cleanly_reports_no_leftovers(executor: SubprocessExecutor) -> None:
    """A command whose children all ended with it is not said to have left anything behind."""
    result = executor.shell("(sleep 0.01; echo child) & wait; echo done")
    assert (result.ok, result.leftovers) == (True, 0)
    assert result.stdout.split() == ["child", "done"]


def test_reap_kills_recorded_members_that_left_the_session(tmp_path: Path) -> None:
    """A run killed outright leaves a record naming the members of its command's tree: the next
    run kills the recorded child that left the session, and never a process whose recorded start
    time does not match (a reused pid)."""
    leader = subprocess.Popen(["sleep", str(LONG)], start_new_session=True)
    child = subprocess.Popen(["sleep", str(LONG)], start_new_session=True)
    bystander = subprocess.Popen(["sleep", str(LONG)], start_new_session=True)
    try:
        marker = orphans.record(tmp_path, leader.pid, ["agent"])
        assert marker is not None
        child_start, bystander_start = start_time(child.pid), start_time(bystander.pid)
        assert child_start is not None and bystander_start is not None
        orphans.update(marker, {child.pid: child_start, bystander.pid: bystander_start + "0"})
        assert [k["pgid"] for k in orphans.reap(tmp_path)] == [leader.pid]
        assert (leader.wait(BOUND), child.wait(BOUND)) == (-9, -9)
        assert bystander.poll() is None
        assert list(tmp_path.iterdir()) == []
    finally:
        for proc in (leader, child, bystander):
            proc.kill()
            proc.wait()


def test_tree_of_a_recorded_leader_that_is_gone_kills_only_recorded_processes() -> None:
    """Without its leader only the recorded members (same start time) belong to a command."""
    child = subprocess.Popen(["sleep", str(LONG)], start_new_session=True)
    try:
        started = start_time(child.pid)
        assert started is not None
        assert ProcessTree(None, {child.pid: started + "1"}).kill() == 0
        assert child.poll() is None
        assert ProcessTree(None, {child.pid: started}).kill() == 1
        assert child.wait(BOUND) == -9
    finally:
        child.kill()
        child.wait()


def test_a_tree_is_never_built_on_an_invalid_pid() -> None:
    """Pid 0 and negative pids (which signal whole groups or every process) are refused."""
    for pid in (0, -1):
        with pytest.raises(ValueError, match="not a process id"):
            ProcessTree(pid)


def test_output_beyond_the_kept_size_is_dropped_and_said(executor: SubprocessExecutor) -> None:
    """A command printing more than fsm keeps still ends normally; what was dropped is said."""
    result = executor.shell(f"{sys.executable} -c \"print('x' * 5_000_000)\"")
    assert result.ok
    assert "characters cut" in result.stdout


def test_no_process_of_this_test_run_is_ever_signalled(executor: SubprocessExecutor) -> None:
    """The tree of a command never includes the process that runs it."""
    result = executor.shell(f"kill -0 {os.getpid()} && echo parent-alive", timeout=5)
    assert result.stdout.strip() == "parent-alive"
    assert is_running(os.getpid())
