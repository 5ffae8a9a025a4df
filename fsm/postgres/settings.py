"""The PostgreSQL store's settings (``[store]`` of fsm.toml, or ``FSM_STORE``) and its address
as fsm checks and shows it.

An address is checked before anything connects: libpq's parser must take it (its complaint is
shown without the part it quotes, where a password may be), it must name something to connect
to, and the password and service files libpq would read must be regular files (libpq would
wait for ever on a FIFO). An address is shown as ``postgresql://host:port/database`` in every
message: never its user's password, nor anything of an address that does not parse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import conninfo

from fsm.base.errors import OptionsError

__all__ = ["Settings", "check_address", "parse_problem", "shown_url"]


@dataclass(frozen=True)
class Settings:
    """The ``[store]`` settings of the PostgreSQL store."""

    url: str
    lease: float = 30.0
    """Seconds a holder's lease lasts unless renewed (renewed every third of it)."""
    pool: int = 4
    """Connections a process keeps at most for its operations (its heartbeat and its listener
    have their own)."""
    reconnect: float = 60.0
    """Seconds an operation keeps trying to reach a server that went away (one this process
    reached before: a server it never reached is not waited for)."""
    connect: float = 5.0
    """Seconds a connection may take to be made (and a pool's connection to be handed out)."""

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> Settings:
        """The settings of ``[store]`` (OptionsError naming the first that is wrong)."""
        known = ("url", "lease", "pool", "reconnect", "connect")
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise OptionsError(
                f"[store] has no setting '{unknown[0]}' for the postgres store "
                f"(it has: {', '.join(known)}){did_you_mean(unknown[0], known)}"
            )
        url = settings.get("url")
        if not isinstance(url, str) or not url:
            raise OptionsError(
                'the postgres store needs its address: url = "postgresql://..." in [store] '
                "of fsm.toml, or FSM_STORE=postgresql://..."
            )
        check_address(url)
        values: dict[str, Any] = {"url": url}
        limits = (
            ("lease", 0.5, 86400.0),
            ("pool", 1, 100),
            ("reconnect", 0, 86400),
            ("connect", 1, 300),
        )
        for key, low, high in limits:
            if key not in settings:
                continue
            value = settings[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise OptionsError(f"[store] {key} must be a number, not {value!r}")
            if not low <= value <= high:
                raise OptionsError(f"[store] {key} must be between {low} and {high}")
            values[key] = int(value) if key == "pool" else float(value)
        return cls(**values)


def did_you_mean(name: str, known: tuple[str, ...]) -> str:
    """`` (did you mean 'url'?)`` when ``name`` is a near miss of one of ``known``."""
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_address(url: str) -> dict[str, str]:
    """The parts of ``url``, libpq's address (OptionsError, showing no password, when it is not
    one, names nothing to connect to, or names a password or service file that is not a regular
    file: libpq would wait on a FIFO for ever)."""
    shown = shown_url(url)
    try:
        parts = {key: str(value) for key, value in conninfo.conninfo_to_dict(url).items()}
    except psycopg.ProgrammingError as exc:
        raise OptionsError(
            f"the postgres store's url {shown} is not a valid address: {parse_problem(exc)} "
            "(the address itself is not shown: it may hold a password)"
        ) from None
    named = {"host", "hostaddr", "dbname", "service"}
    environment = {"PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE"}
    if not named & set(parts) and not any(os.environ.get(name) for name in environment):
        raise OptionsError(
            f"the postgres store's url {shown} names no host and no database "
            "(postgresql://HOST/DATABASE)"
        )
    for path, what in _files_read(parts):
        _regular_or_absent(path, what)
    return parts


def parse_problem(exc: BaseException) -> str:
    """What libpq found wrong with an address, without the part it quotes (a password may be
    in it)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
    head = text.split('"', 1)[0].strip().rstrip(":")
    return head or "unreadable"


def _files_read(parts: dict[str, str]) -> list[tuple[str, str]]:
    """The password and service files libpq would read for ``parts``."""
    home = os.path.expanduser("~")
    found = [
        (
            parts.get("passfile") or os.environ.get("PGPASSFILE") or f"{home}/.pgpass",
            "password file",
        )
    ]
    if parts.get("service") or os.environ.get("PGSERVICE"):
        found.append(
            (os.environ.get("PGSERVICEFILE") or f"{home}/.pg_service.conf", "service file")
        )
        conf = os.environ.get("PGSYSCONFDIR")
        if conf:
            found.append((f"{conf}/pg_service.conf", "service file"))
    return found


def _regular_or_absent(path: str, what: str) -> None:
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # absent or unreadable: libpq does without it
    if not stat.S_ISREG(mode):
        raise OptionsError(
            f"the postgres {what} {path} is not a regular file: fsm does not connect "
            "(libpq would wait on it)"
        )


def shown_url(url: str) -> str:
    """``url`` as messages show it: host, port and database, never a user's password (nor
    anything else of an address that cannot be parsed)."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return _shown_unparsed(url)
    host = str(parts.get("host") or "localhost")
    if host.startswith("/"):
        host = f"socket {host}"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{host}{port}/{parts.get('dbname') or ''}"


def _shown_unparsed(url: str) -> str:
    """What can be shown of an address libpq cannot parse: its scheme and host, when it is a
    URL whose host part is plain."""
    import re

    found = re.match(r"(postgres(?:ql)?)://(?:[^@/?#]*@)?([A-Za-z0-9.\-]*)(?::(\d+))?", url)
    if found is None:
        return "(an address that is not a URL)"
    port = f":{found.group(3)}" if found.group(3) else ""
    return f"{found.group(1)}://{found.group(2) or 'localhost'}{port}/..."
