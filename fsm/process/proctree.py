"""A command's process tree: followed while it runs, and killed whole when it must end.

A command runs in a session of its own (its leader's pid is the session and process group id),
but a process group is not a bound: a child that calls ``setsid`` (or double-forks into a new
session) leaves it, and one that keeps the command's stdout open makes a reader that waits for
end-of-file wait for that child. So the tree of a command is everything fsm can tie to it:

* the members of its session (whatever their process group);
* its descendants, found by parent pid while they still have one in the tree: the tree is
  re-read from ``/proc`` while the command runs (50 ms after it starts, then at growing
  intervals up to half a second), so a child that left the session is known by its pid and
  start time even after its parent exited;
* any process that holds one of the command's output pipes.

Every pid is kept with its start time (field 22 of ``/proc/PID/stat``), so a pid the system
reused for another program is never touched. :func:`collect` reads a command's output until it
ends, the time limit expires, or its leader has exited and only leftovers hold the output; then
everything of the tree still alive is killed (SIGKILL, repeated until nothing is left, since a
process may fork while it is being killed) and the output read so far is returned within a
bounded time. Without ``/proc`` (not Linux) only the process group is killed.

A cgroup would catch a child that double-forks and closes its output faster than the polling
sees it; fsm does not create one (it needs a writable, delegated cgroup v2 hierarchy, which most
user sessions and containers do not give), and such a child does not hold the run up: it only
survives, as it would under a plain process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import selectors
    import subprocess

# selectors and subprocess are imported where commands run: commands that run none (fsm
# status, fsm ls) start faster without them.

__all__ = [
    "DRAIN_SECONDS",
    "LEFTOVER_GRACE",
    "Collected",
    "ProcessTree",
    "Stat",
    "collect",
    "proc_table",
    "start_time",
]

LEFTOVER_GRACE = 1.0
"""Seconds the output stays open for background children after the command's leader exited."""
DRAIN_SECONDS = 2.0
"""Seconds spent reading what is left of the output once the tree has been killed."""
_FIRST_SCAN = 0.05
_LONGEST_SCAN = 0.5
_KILL_ROUNDS = 20
_KEEP_BYTES = 4_000_000
"""Output kept per stream (the executor clips it further); the rest is read and dropped."""


@dataclass(frozen=True)
class Stat:
    """What ``/proc/PID/stat`` says about one process."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: str
    zombie: bool


def _read_stat(pid: int) -> Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    return Stat(
        pid,
        int(fields[1]),
        int(fields[2]),
        int(fields[3]),
        fields[19].decode("ascii", "replace"),
        fields[0] in (b"Z", b"X"),
    )


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (Linux), or None when unknown."""
    stat = _read_stat(pid)
    return stat.start if stat is not None else None


def proc_table() -> dict[int, Stat]:
    """Every live process this one can see (empty without ``/proc``)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    table: dict[int, Stat] = {}
    for name in names:
        if name.isdigit():
            stat = _read_stat(int(name))
            if stat is not None and not stat.zombie:
                table[stat.pid] = stat
    return table


def pipe_holders(inodes: Iterable[int], table: dict[int, Stat]) -> set[int]:
    """Processes of ``table`` (other than this one) with a pipe of ``inodes`` open."""
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    if not wanted:
        return set()
    me = os.getpid()
    holders: set[int] = set()
    for pid in table:
        if pid == me:
            continue
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{folder}/{fd}") in wanted:
                    holders.add(pid)
                    break
            except OSError:
                continue
    return holders


@dataclass
class ProcessTree:
    """The processes of one command: its session ``leader`` and the members found so far."""

    leader: int | None
    """The session leader (its pid is the session and process group id); None when only the
    recorded ``members`` are known to be the command's (the pid now belongs to another program)."""
    members: dict[int, str] = field(default_factory=dict)
    """pid -> start time of every process known to belong to the command."""

    def __post_init__(self) -> None:
        if self.leader is not None and self.leader <= 0:
            raise ValueError(f"not a process id: {self.leader}")
        if self.leader is not None:
            started = start_time(self.leader)
            if started is not None:
                self.members.setdefault(self.leader, started)

    def follow(self, table: dict[int, Stat] | None = None) -> bool:
        """Add the session's members and the descendants of known members; True when the tree
        grew."""
        table = proc_table() if table is None else table
        before = len(self.members)
        changed = True
        while changed:
            changed = False
            for stat in table.values():
                if stat.pid in self.members:
                    continue
                parent = self.members.get(stat.ppid)
                in_tree = parent is not None and _same(table, stat.ppid, parent)
                if in_tree or (self.leader is not None and stat.sid == self.leader):
                    self.members[stat.pid] = stat.start
                    changed = True
        return len(self.members) != before

    def alive(self, table: dict[int, Stat], pipes: Iterable[int] = ()) -> set[int]:
        """The tree's processes alive in ``table``: known members (same start time), session
        members, and holders of the command's output ``pipes``."""
        self.follow(table)
        found = {pid for pid, started in self.members.items() if _same(table, pid, started)}
        if self.leader is not None:
            found |= {pid for pid, stat in table.items() if stat.sid == self.leader}
        found |= pipe_holders(pipes, table)
        found.discard(os.getpid())
        return found

    def kill(self, pipes: Iterable[int] = ()) -> int:
        """Kill every process of the tree; return how many were killed.

        Each round first stops (SIGSTOP) what it finds and looks again, so that a child forked
        meanwhile is found while its parent is still there, then kills (SIGKILL) them all;
        rounds repeat until nothing of the tree is left.
        """
        inodes = list(pipes)
        killed: set[int] = set()
        for _ in range(_KILL_ROUNDS):
            frozen: dict[int, str] = {}
            while True:
                table = proc_table()
                found = {pid: table[pid].start for pid in self.alive(table, inodes)}
                fresh = {pid: start for pid, start in found.items() if pid not in frozen}
                if not fresh:
                    break
                for pid, start in fresh.items():
                    _signal(pid, start, signal.SIGSTOP)
                frozen.update(fresh)
            if self.leader is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.leader, signal.SIGKILL)
            if not frozen:
                break
            for pid, start in frozen.items():
                if _signal(pid, start, signal.SIGKILL):
                    killed.add(pid)
            time.sleep(0.005)
        return len(killed - {self.leader}) if self.leader is not None else len(killed)


def _signal(pid: int, start: str, number: signal.Signals) -> bool:
    """Send ``number`` to ``pid`` if it is still the process that started at ``start``."""
    stat = _read_stat(pid)
    if stat is None or stat.zombie or stat.start != start:
        return False
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _same(table: dict[int, Stat], pid: int, started: str) -> bool:
    stat = table.get(pid)
    return stat is not None and stat.start == started


@dataclass(frozen=True)
class Collected:
    """A command's output and how it ended."""

    stdout: bytes
    stderr: bytes
    timed_out: bool
    leftovers: int
    """Processes of the tree killed after the leader had exited (background children)."""


def collect(
    proc: subprocess.Popen[bytes],
    tree: ProcessTree,
    timeout: float,
    *,
    on_grow: Callable[[dict[int, str]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Collected:
    """Read ``proc``'s stdout and stderr until it ends, ``timeout`` seconds pass, or its leader
    has exited and the output stays open only for leftovers; then kill what is left of the tree
    and return the output. ``on_grow`` is told the members whenever the tree grows."""
    import selectors
    import subprocess

    streams = [s for s in (proc.stdout, proc.stderr) if s is not None]
    pipes = [_inode(s) for s in streams]
    out_fd, err_fd = _fd(proc.stdout), _fd(proc.stderr)
    chunks: dict[int, list[bytes]] = {s.fileno(): [] for s in streams}
    sizes = dict.fromkeys(chunks, 0)
    selector = selectors.DefaultSelector()
    for stream in streams:
        selector.register(stream, selectors.EVENT_READ)
    started = clock()
    deadline = started + timeout
    scan_at, interval = started + _FIRST_SCAN, _FIRST_SCAN
    exited_at: float | None = None
    timed_out = False
    try:
        while True:
            now = clock()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and (
                not selector.get_map() or now >= exited_at + LEFTOVER_GRACE
            ):
                break
            if now >= deadline:
                timed_out = True
                break
            if now >= scan_at:
                if tree.follow() and on_grow is not None:
                    on_grow(dict(tree.members))
                interval = min(interval * 2, _LONGEST_SCAN)
                scan_at = now + interval
            until = min(deadline, scan_at)
            if exited_at is not None:
                until = min(until, exited_at + LEFTOVER_GRACE)
            wait = max(until - now, 0.0)
            if selector.get_map():
                _read_ready(selector, wait, chunks, sizes)
            else:  # the output is closed, the leader still runs
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(wait)
        # output at its end means no process holds the pipes: no need to look for holders
        leftovers = tree.kill(pipes if selector.get_map() else ())
        if timed_out:
            leftovers = 0
        drain_until = clock() + DRAIN_SECONDS
        while selector.get_map() and clock() < drain_until:
            _read_ready(selector, max(drain_until - clock(), 0.0), chunks, sizes)
    except BaseException:
        # interrupted (Ctrl-C, SIGTERM turned into an exception): nothing else would stop the
        # command, which runs in a session of its own; take its whole tree down with us
        tree.kill(pipes)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(DRAIN_SECONDS)
        raise
    finally:
        for key in list(selector.get_map().values()):
            selector.unregister(key.fileobj)
        selector.close()
        for stream in streams:
            stream.close()
    proc.wait()
    return Collected(
        _joined(chunks, sizes, out_fd), _joined(chunks, sizes, err_fd), timed_out, leftovers
    )


def _joined(chunks: dict[int, list[bytes]], sizes: dict[int, int], fd: int) -> bytes:
    data = b"".join(chunks.get(fd, []))
    dropped = sizes.get(fd, 0) - len(data)
    return data + (f"\n... [{dropped} bytes not kept]".encode() if dropped > 0 else b"")


def _read_ready(
    selector: selectors.BaseSelector,
    wait: float,
    chunks: dict[int, list[bytes]],
    sizes: dict[int, int],
) -> None:
    for key, _ in selector.select(wait):
        stream = key.fileobj
        fd = key.fd
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            selector.unregister(stream)
            continue
        if sizes[fd] < _KEEP_BYTES:
            chunks[fd].append(data[: _KEEP_BYTES - sizes[fd]])
        sizes[fd] += len(data)


def _inode(stream: IO[bytes]) -> int:
    return os.fstat(stream.fileno()).st_ino


def _fd(stream: IO[bytes] | None) -> int:
    return -1 if stream is None else stream.fileno()
