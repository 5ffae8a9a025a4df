"""`fsm run --all`: every runnable instance of a workspace driven to a stop, N at a time, each
under its own run lock, one line each, and an exit code that says whether any failed."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fsm.base.files import FileLock
from fsm.cli.fleet import Driven, exit_code
from tests.conftest import COUNTER, Cli, CliResult, fsm_process

C = str(COUNTER)
"""The engine tests' counter: it can be told to fail (fail_at) or to be slow (delay)."""
EXAMPLE = str(Path(__file__).parent.parent / "examples" / "counter" / "machine.yaml")
"""The example counter, as a user has it."""


def _new(cli: Cli, instance_id: str, *values: str, machine: str = C) -> None:
    sets = [item for value in values for item in ("--set", value)]
    assert cli("new", machine, "--id", instance_id, *sets).code == 0


def _document(tmp_path: Path, instance_id: str) -> dict[str, object]:
    path = tmp_path / ".counters" / f"{instance_id}.json"
    data: dict[str, object] = json.loads(path.read_text())
    return data


def _lines(result: CliResult) -> dict[str, str]:
    """The output lines by instance id (each line is ``counter <id>: ...``)."""
    lines = result.out.strip().splitlines()
    by_id = {line.split()[1].rstrip(":"): line for line in lines}
    assert len(by_id) == len(lines), lines  # one line per instance
    return by_id


@pytest.fixture
def fleet(cli: Cli) -> None:
    """Example counters: two created, a running one, a paused one and one that has ended."""
    _new(cli, "c1", "limit=2", machine=EXAMPLE)
    _new(cli, "c2", "limit=3", machine=EXAMPLE)
    _new(cli, "r1", "limit=1", machine=EXAMPLE)
    assert cli("start", EXAMPLE, "r1").code == 0
    _new(cli, "p1", "limit=2", machine=EXAMPLE)
    assert cli("start", EXAMPLE, "p1").code == 0
    assert cli("pause", EXAMPLE, "p1").code == 0
    _new(cli, "d1", "limit=0", machine=EXAMPLE)
    assert cli("run", EXAMPLE, "d1").code == 0


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_every_runnable_instance_is_driven_to_its_end(
    cli: Cli, tmp_path: Path, fleet: None, jobs: str
) -> None:
    """Created and running counters complete (exit 0), one line each; the paused and the
    ended one are neither driven nor listed, and their documents are untouched."""
    untouched = {i: _document(tmp_path, i) for i in ("p1", "d1")}
    result = cli("run", "--all", EXAMPLE, "--jobs", jobs)
    assert result.code == 0, result
    lines = _lines(result)
    assert sorted(lines) == ["c1", "c2", "r1"]
    assert lines["c2"] == (
        "counter c2: completed in state 'done' after 4 steps: ended in success state 'done'"
    )
    assert all(_document(tmp_path, i)["status"] == "done" for i in ("c1", "c2", "r1"))
    assert {i: _document(tmp_path, i) for i in ("p1", "d1")} == untouched
    assert "3 instances run: 3 completed" in result.err


def test_one_failed_instance_makes_the_fleet_exit_4(cli: Cli, tmp_path: Path) -> None:
    """A counter that fails ends failed with its reason; the others still complete."""
    _new(cli, "ok", "limit=1")
    _new(cli, "bad", "limit=3", "fail_at=1", "max_errors=1")
    result = cli("run", "--all", C, "--jobs", "2")
    assert result.code == 4
    lines = _lines(result)
    assert lines["bad"].startswith("counter bad: failed in state 'failed' after ")
    assert lines["bad"].endswith(": ended in failure state 'failed'")
    assert lines["ok"].startswith("counter ok: completed")
    assert _document(tmp_path, "bad")["status"] == "failed"


def test_a_step_limit_leaves_instances_running_and_exits_5(cli: Cli, tmp_path: Path) -> None:
    """--max-steps applies to each instance: stopped before a final state is exit 5."""
    _new(cli, "a1", "limit=3")
    _new(cli, "a2", "limit=3")
    result = cli("run", "--all", C, "--max-steps", "1")
    assert result.code == 5
    lines = _lines(result).values()
    assert all(": limit in state 'counting' after 1 steps" in line for line in lines)
    assert _document(tmp_path, "a1")["count"] == 1


def test_an_instance_run_elsewhere_is_skipped(cli: Cli, tmp_path: Path) -> None:
    """An instance whose run lock is held is not touched and gets a line saying so (exit 5);
    the others are driven."""
    _new(cli, "held", "limit=2")
    _new(cli, "free", "limit=2")
    lock = FileLock(tmp_path / ".counters" / "held.fsm" / "run.lock")
    assert lock.acquire(blocking=False)
    try:
        result = cli("run", "--all", C)
    finally:
        lock.release()
    assert result.code == 5
    lines = _lines(result)
    assert lines["held"] == (
        "counter held: skipped: another run holds its lock (it is being run elsewhere)"
    )
    assert lines["free"].startswith("counter free: completed")
    assert _document(tmp_path, "held")["status"] == "created"


def test_it_composes_with_fsm_run_in_another_process(cli: Cli, tmp_path: Path) -> None:
    """While `fsm run ID` drives a slow counter, `fsm run --all` skips it and drives the rest;
    the other run still completes its instance."""
    _new(cli, "slow", "limit=3")
    _new(cli, "quick", "limit=1")
    other = fsm_process(tmp_path, "run", C, "slow", "-o", "delay=0.4", "-q")
    try:
        _wait_until_locked(tmp_path / ".counters" / "slow.fsm" / "run.lock")
        result = cli("run", "--all", C, "--jobs", "2")
    finally:
        _, errors = other.communicate(timeout=60)
    assert other.returncode == 0, errors
    lines = _lines(result)
    assert lines["slow"].startswith("counter slow: skipped")
    assert lines["quick"].startswith("counter quick: completed")
    assert result.code == 5
    assert _document(tmp_path, "slow")["status"] == "done"


def _wait_until_locked(path: Path) -> None:
    probe = FileLock(path)
    for _ in range(600):
        if path.exists() and not probe.acquire(blocking=False):
            return
        probe.release()
        time.sleep(0.01)
    raise AssertionError(f"{path} was never locked")


def test_nothing_runnable_is_success_with_a_note(cli: Cli) -> None:
    """A workspace with nothing to run prints no line, says so on stderr, and exits 0."""
    result = cli("run", "--all", C)
    assert (result.code, result.out) == (0, "")
    assert "none was runnable" in result.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["run", C], "needs MACHINE and ID", id="no-id"),
        pytest.param(["run", "--all", C, "c1"], "give no ID", id="all-with-id"),
        pytest.param(["run", "--all", C, "--jobs", "0"], "--jobs must be 1 or more", id="jobs"),
        pytest.param(["run", C, "c1", "--jobs", "2"], "--jobs goes with --all", id="jobs-one"),
        pytest.param(["run", "--all", C, "--interactive"], "cannot be --interactive", id="menu"),
    ],
)
def test_bad_fleet_arguments_are_one_error_line(cli: Cli, argv: list[str], message: str) -> None:
    """Each mistake is exit 2 with one line saying what to do."""
    _new(cli, "c1")
    result = cli(*argv)
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1 and message in result.err


def _driven(*outcomes: str) -> list[Driven]:
    return [Driven("m", f"i{n}", outcome, None, 0, "") for n, outcome in enumerate(outcomes)]


@pytest.mark.parametrize(
    ("outcomes", "code"),
    [
        pytest.param((), 0, id="none"),
        pytest.param(("completed", "completed"), 0, id="all-completed"),
        pytest.param(("completed", "paused"), 5, id="paused"),
        pytest.param(("completed", "skipped"), 5, id="skipped"),
        pytest.param(("limit", "waiting", "stopped"), 5, id="stopped-kinds"),
        pytest.param(("paused", "failed"), 4, id="failed-wins"),
        pytest.param(("completed", "error"), 4, id="error-is-failure"),
    ],
)
def test_exit_code_precedence(outcomes: tuple[str, ...], code: int) -> None:
    """Failure (4) wins over stopping early (5); 0 only when everything completed."""
    assert exit_code(_driven(*outcomes)) == code


def test_sigterm_stops_the_fleet_and_frees_every_instance(cli: Cli, tmp_path: Path) -> None:
    """SIGTERM to `fsm run --all --jobs 2` abandons the steps in progress (exit 143); no
    instance is left locked or half-written: the next fleet run drives them all to the end."""
    for number in range(4):
        _new(cli, f"s{number}", "limit=20")
    run = fsm_process(tmp_path, "run", "--all", C, "--jobs", "2", "-o", "delay=0.2")
    try:
        _wait_until(lambda: any(_document(tmp_path, f"s{n}").get("count") for n in range(4)))
        run.send_signal(signal.SIGTERM)
        _, errors = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 143, errors
    assert "Traceback" not in errors
    after = cli("run", "--all", C, "--jobs", "2")
    assert after.code == 0, after
    assert sorted(_lines(after)) == [f"s{n}" for n in range(4)]
    assert cli("replay", C, "s0").code == 0


def _wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the condition never held")


def test_an_interrupt_just_after_the_document_is_replaced_keeps_its_record(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM may land while the folder is synced after the replace: the document is then
    written, and its journal record must stay (the replay check still passes)."""
    from fsm.store import file_swap as commit

    _new(cli, "c1", "limit=3")
    assert cli("start", C, "c1").code == 0
    real_replace, real_exchange = commit.replace, commit.exchange

    # The document is installed by a swap (renameat2) or, where there is none, a rename: the
    # interrupt lands right after whichever of the two this system uses.
    def replaced(*args: object, **kwargs: object) -> None:
        real_replace(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    def exchanged(*args: object, **kwargs: object) -> bool:
        if real_exchange(*args, **kwargs):  # type: ignore[arg-type]
            raise KeyboardInterrupt
        return False

    monkeypatch.setattr(commit, "replace", replaced)
    monkeypatch.setattr(commit, "exchange", exchanged)
    assert cli("step", C, "c1").code == 130
    monkeypatch.undo()
    assert _document(tmp_path, "c1")["count"] == 1
    assert cli("replay", C, "c1").code == 0
    assert cli("run", C, "c1").code == 0
    assert [p.name for p in (tmp_path / ".counters").iterdir() if p.name.endswith(".tmp")] == []


def test_an_interrupted_fleet_leaves_no_pool_thread_or_worker_behind(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted (Ctrl-C, SIGTERM) while its workers are mid-step, a fleet ends them and
    waits for its pool's manager thread before the interruption goes on: a manager thread left
    running closes its wake-up pipe while the interpreter's exit writes to it, and `fsm run
    --all` ended with a traceback after "interrupted" (found by running the suite beside
    another: about one time in forty). Here the thread is made slow to wind up, every time."""
    import multiprocessing
    import threading
    from concurrent.futures import process

    from fsm.cli.fleet import drive_all
    from fsm.engine.instance import Workspace
    from fsm.model.machine import load_machine

    (tmp_path / "fsm.toml").write_text("[machine.counter]\ndelay = 0.1\n")
    for number in range(4):
        _new(cli, f"i{number}", "limit=50")
    real_close = process._ThreadWakeup.close

    def slow_close(self: process._ThreadWakeup) -> None:
        time.sleep(0.5)
        real_close(self)

    def interrupt(signum: int, frame: object) -> None:
        """Once the workers are mid-run (an instance has counted), what `fsm`'s SIGTERM
        handler does: raise KeyboardInterrupt in the main thread."""
        if any(_document(tmp_path, f"i{n}").get("count") for n in range(4)):
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise KeyboardInterrupt

    monkeypatch.setattr(process._ThreadWakeup, "close", slow_close)
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
    try:
        with pytest.raises(KeyboardInterrupt):
            drive_all(Workspace(tmp_path), [load_machine(COUNTER)], jobs=2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    managers = [t for t in threading.enumerate() if isinstance(t, process._ExecutorManagerThread)]
    assert managers == []
    assert multiprocessing.active_children() == []
    counts = [_document(tmp_path, f"i{n}").get("count") for n in range(4)]
    assert any(counts) and not all(count == 50 for count in counts)  # stopped midway
    (tmp_path / "fsm.toml").unlink()
    again = cli("run", "--all", C, "--jobs", "2")
    assert again.code == 0, again  # nothing left locked: every instance ends


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, which no longer runs, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_killed_fleet_leaves_no_worker_behind(cli: Cli, tmp_path: Path) -> None:
    """SIGKILL of `fsm run --all --jobs 2` (which cannot clean up) ends its workers too: each
    abandons its step and releases its lock, and the next fleet run drives every instance to
    the end with a journal that replays."""
    for number in range(4):
        _new(cli, f"k{number}", "limit=30")
    run = fsm_process(tmp_path, "run", "--all", C, "--jobs", "2", "-o", "delay=0.2")
    try:
        _wait_until(lambda: any(_document(tmp_path, f"k{n}").get("count") for n in range(4)))
        workers = _children(run.pid)
        assert len(workers) >= 2, workers
        run.kill()
        run.communicate(timeout=60)
        for _ in range(3000):
            if not any(_alive(pid) for pid in workers):
                break
            time.sleep(0.01)
        assert not any(_alive(pid) for pid in workers), "a worker outlived its killed fleet"
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    after = cli("run", "--all", C, "--jobs", "2")
    assert after.code == 0, after
    assert sorted(_lines(after)) == [f"k{n}" for n in range(4)]
    for number in range(4):
        assert _document(tmp_path, f"k{number}")["count"] == 30
        assert cli("replay", C, f"k{number}").code == 0
