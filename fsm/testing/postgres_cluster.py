"""A throw-away PostgreSQL server for tests: a fresh cluster in a temporary folder.

Stores that keep instances in PostgreSQL are tested against the real server, never a stand-in.
:class:`TemporaryCluster` runs ``initdb`` into a folder of its own and starts ``postgres`` on a
Unix socket in that folder (no TCP port, so clusters of parallel test runs never meet), with
settings for tests: no fsync (the tests simulate crashes of the server, not of the machine),
enough connections for many workers. Each test may take a database of its own
(:meth:`TemporaryCluster.new_database`), which is much cheaper than a cluster.

PostgreSQL refuses to run as root: when the tests run as root, the server runs as an
unprivileged account (``postgres``, which Debian's package creates, or the one named by
``FSM_PG_USER``). The server's programs are looked up in ``FSM_PG_BINDIR``, then in Debian's
``/usr/lib/postgresql/<version>/bin`` (newest first), then on ``PATH``.
``scripts/postgres-deps.sh`` installs Debian's ``postgresql`` package where it is missing.

Clients connect with the URL of :attr:`TemporaryCluster.url`: trust authentication over the
socket, user ``fsm``.

The server never outlives the process that started it, however that process ends (a test run
cut short, SIGKILLed): a watchdog process of its own (a new session, so that a Ctrl-C to the
test run's process group reaches it only through its end) waits on a pipe whose only writing
end the starting process holds; when that end closes (the process ended, whatever the way), it
stops the server (SIGQUIT to the postmaster: an immediate shutdown) and deletes the cluster's
folder. :meth:`TemporaryCluster.destroy` closes the pipe itself after stopping the server.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import quote

__all__ = ["ClusterUnavailable", "TemporaryCluster", "find_bindir"]

_SUPERUSER = "fsm"
_SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
}


class ClusterUnavailable(Exception):
    """The PostgreSQL server programs are missing or cannot run here (the message says why)."""


def find_bindir() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``; ClusterUnavailable if none."""
    candidates: list[Path] = []
    if os.environ.get("FSM_PG_BINDIR"):
        candidates.append(Path(os.environ["FSM_PG_BINDIR"]))
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = [p for p in debian.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: -int(p.name))]
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise ClusterUnavailable(
        "the PostgreSQL server is not installed (no initdb, pg_ctl and postgres in "
        "FSM_PG_BINDIR, /usr/lib/postgresql/*/bin or PATH): run scripts/postgres-deps.sh, "
        "or apt-get install postgresql"
    )


def _server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: None for the current user, unless that is root."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("FSM_PG_USER", "postgres")
    try:
        return pwd.getpwnam(name)
    except KeyError as exc:
        raise ClusterUnavailable(
            f"PostgreSQL refuses to run as root and there is no account '{name}' to run it as: "
            "install Debian's postgresql package (it creates 'postgres'), or set FSM_PG_USER"
        ) from exc


_WATCHDOG = """
import os, shutil, signal, sys, time
from pathlib import Path

signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
lifeline, folder = int(sys.argv[1]), Path(sys.argv[2])
while os.read(lifeline, 4096):
    pass
pid_file = folder / "data" / "postmaster.pid"
try:
    pid = int(pid_file.read_text().split()[0])
except (OSError, ValueError, IndexError):
    pid = None
if pid is not None:
    try:
        os.kill(pid, signal.SIGQUIT)
    except OSError:
        pid = None
deadline = time.monotonic() + 30
while pid is not None and time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        break
    time.sleep(0.1)
else:
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
shutil.rmtree(folder, ignore_errors=True)
"""
"""The watchdog (run by ``python -c``): waits for the end of its pipe, then stops the server
and deletes the cluster's folder."""


@dataclass
class TemporaryCluster:
    """A PostgreSQL cluster in a temporary folder, started by :meth:`start`.

    Use as a context manager (started on entry, stopped and deleted on exit) or call
    :meth:`start` and :meth:`destroy` yourself.
    """

    bindir: Path = field(default_factory=find_bindir)
    folder: Path | None = None
    settings: dict[str, str] = field(default_factory=dict)
    """Server settings over the tests' own (``{"fsync": "on"}``: a benchmark of a real
    server's commits)."""
    _databases: int = 0
    _account: pwd.struct_passwd | None = None
    _lifeline: int | None = None
    """The writing end of the watchdog's pipe (see the module docstring)."""
    watchdog: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        """The cluster's data folder."""
        return self._root() / "data"

    @property
    def socket_dir(self) -> Path:
        """The folder of the server's Unix socket."""
        return self._root()

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of ``database`` on this cluster (over its socket)."""
        return f"postgresql://{_SUPERUSER}@/{quote(database)}?host={quote(str(self.socket_dir))}"

    def start(self) -> TemporaryCluster:
        """Create the cluster (first time only) and start its server; return self."""
        self._account = _server_account()
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="fsm-pg-"))
            self.folder.chmod(0o700)
            if self._account is not None:
                os.chown(self.folder, self._account.pw_uid, self._account.pw_gid)
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                _SUPERUSER,
                "-E",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            )
        if self._lifeline is None:
            self._start_watchdog()
        self._pg_ctl(
            "start", "-w", "-t", "60", "-l", str(self._root() / "server.log"), "-o", self._options()
        )
        return self

    def _start_watchdog(self) -> None:
        """Start the process that stops the server and deletes the cluster once this process
        has ended (see the module docstring)."""
        reading, writing = os.pipe()  # neither end is inherited by other children
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, str(reading), str(self._root())],
                pass_fds=(reading,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        finally:
            os.close(reading)
        self._lifeline = writing

    def stop(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server; ``immediate`` is a crash (recovery runs at the next start)."""
        self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def restart(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server with ``mode`` and start it again."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        """Stop the server (if it runs) and delete the cluster's folder."""
        if self.folder is None:
            return
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(ClusterUnavailable):
                self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
        lifeline, self._lifeline = self._lifeline, None
        if lifeline is not None:
            os.close(lifeline)  # the watchdog finds nothing left to do and ends
        if self.watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=10)
            self.watchdog = None

    def new_database(self, prefix: str = "fsm_test") -> str:
        """Create an empty database of a name not used before; return its URL."""
        self._databases += 1
        name = f"{prefix}_{os.getpid()}_{self._databases}"
        self.psql("postgres", f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def psql(self, database: str, sql: str) -> str:
        """Run ``sql`` in ``database`` with the server's own ``psql`` (or PATH's); its output."""
        program = self.bindir / "psql"
        argv = [str(program) if program.is_file() else "psql", "-X", "-q", "-A", "-t"]
        argv += ["-v", "ON_ERROR_STOP=1", "-d", self.url(database), "-c", sql]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise ClusterUnavailable(f"psql failed: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def server_log(self) -> str:
        """What the server wrote to its log (for a failing test's report)."""
        path = self._root() / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> TemporaryCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.destroy()

    def _root(self) -> Path:
        if self.folder is None:
            raise ClusterUnavailable("the cluster was not started")
        return self.folder

    def _options(self) -> str:
        settings = {
            **_SETTINGS,
            **self.settings,
            "unix_socket_directories": f"'{self.socket_dir}'",
        }
        return " ".join(f"-c {key}={value}" for key, value in settings.items())

    def _pg_ctl(self, *argv: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), *argv)

    def _run(self, program: str, *argv: str) -> None:
        account = self._account
        done = subprocess.run(
            [str(self.bindir / program), *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            user=account.pw_uid if account is not None else None,
            group=account.pw_gid if account is not None else None,
            extra_groups=[] if account is not None else None,
            cwd=self._root() if self.folder is not None else None,
            env={**os.environ, "LC_ALL": "C"},
        )
        if done.returncode != 0:
            detail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
            raise ClusterUnavailable(
                f"{program} {argv[0] if argv else ''} failed: {' / '.join(detail)}"
            )
