"""Who may talk to ``fsm serve``, and how: the address it binds, the token, the origin checks.

Safe by default:

* it binds to a loopback address; any other address is refused unless ``--allow-remote`` is
  given too (:func:`check_bind`);
* every request must name this server in its ``Host`` header (a loopback name or the address it
  was bound to), which stops a web page from reaching it through DNS rebinding;
* control and create requests need the token, as ``Authorization: Bearer <token>`` or as the
  cookie a browser gets by opening the URL ``fsm serve`` prints (``/?token=...``, answered with
  a redirect to the same page without it); they are refused when they come from another origin
  (``Origin`` or ``Sec-Fetch-Site``), and a request authorised by the cookie alone must say its
  origin;
* when remote clients are allowed, every request needs the token, reads included; on loopback,
  reads of an instance whose document others may not read need it too (:data:`READS`);
* limits come before work: the token and origin of a request that changes something are checked
  before its body is read, and a body larger than ``max_body`` is refused with 413 without being
  read (by its ``Content-Length``, or as soon as a body without one grows past the limit).

The token is new at every start, or read from a file only its owner can read
(:func:`read_token_file`).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fsm.base.errors import InputError

__all__ = [
    "MAX_BODY",
    "READS",
    "Access",
    "AccessGuard",
    "check_bind",
    "is_loopback",
    "new_token",
    "read_token_file",
]

MAX_BODY = 1024 * 1024
"""Bytes a request body may have by default (``fsm serve --max-body``): a create's inputs or a
control command's reason; a document may be larger, but its inputs rarely are."""
READS = ("private", "all", "none")
"""Which reads need the token (``fsm serve --reads``): ``private``, the default, those of an
instance whose document others may not read (its mode has no read bit for others, as fsm keeps
a document created under umask 077); ``all`` every read; ``none`` no read (on loopback)."""
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
]


def new_token() -> str:
    """A fresh random token."""
    return secrets.token_urlsafe(24)


def read_token_file(path: Path) -> str:
    """The token kept in ``path``: a file of its owner that nobody else may read or write."""
    try:
        info = os.stat(path)
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the token file {path}: {exc}") from exc
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise InputError(
            f"the token file {path} may be read by others: it must belong to you and have "
            f"mode 600 (chmod 600 {path})"
        )
    if len(text) < 16 or not text.isprintable() or " " in text:
        raise InputError(f"the token in {path} must be one word of 16 characters or more")
    return text


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse to listen beyond this machine unless remote clients were allowed explicitly."""
    if not host:
        raise InputError("--host is empty: give an address such as 127.0.0.1")
    if not is_loopback(host) and not allow_remote:
        raise InputError(
            f"refusing to listen on {host}: other machines could reach the workspace; add "
            "--allow-remote to mean it (every request then needs the token)"
        )


@dataclass(frozen=True)
class Access:
    """The access rules of one server."""

    token: str
    host: str
    port: int
    remote: bool = False
    max_body: int = MAX_BODY
    reads: str = "private"

    def read_refused(self, headers: Headers, mode: int | None) -> bool:
        """True when a read of an instance whose document has permission bits ``mode`` (None:
        the store has none) needs the token and the request does not carry it."""
        if self.reads == "none" or self.authorised(headers):
            return False
        return self.reads == "all" or (mode is not None and not mode & 0o004)

    @property
    def cookie(self) -> str:
        """The cookie's name: per port, as browsers share cookies across the ports of a host."""
        return f"fsm_serve_{self.port}"

    def host_allowed(self, header: str | None) -> bool:
        """True when the ``Host`` header names this server."""
        if header is None:
            return False
        if self.remote:
            return True
        names = {*LOOPBACK_NAMES, self.host, f"[{self.host}]"}
        return header in names or header in {f"{name}:{self.port}" for name in names}

    def token_matches(self, given: str | None) -> bool:
        """Constant-time comparison with the token."""
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())

    def bearer(self, headers: Headers) -> str | None:
        """The token of an ``Authorization: Bearer`` header."""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None

    def cookie_token(self, headers: Headers) -> str | None:
        """The token of this server's cookie."""
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header carries no token
            return None
        morsel = jar.get(self.cookie)
        return morsel.value if morsel is not None else None

    def authorised(self, headers: Headers) -> bool:
        """True when the request carries the token (header or cookie)."""
        return self.token_matches(self.bearer(headers)) or self.token_matches(
            self.cookie_token(headers)
        )

    def control_refusal(self, headers: Headers) -> tuple[int, str] | None:
        """Why a control or create request is refused (status and message), or None."""
        site = headers.get("sec-fetch-site")
        if site is not None and site not in {"same-origin", "none"}:
            return 403, f"refused: a {site} request may not change instances"
        origin = headers.get("origin")
        own = f"http://{headers.get('host', '')}"
        if origin is not None and origin != own:
            return 403, f"refused: origin {origin} is not this server ({own})"
        if self.token_matches(self.bearer(headers)):
            return None
        if self.token_matches(self.cookie_token(headers)):
            if origin is None:
                return 403, "refused: a request authorised by cookie must send its Origin"
            return None
        return 401, "the token is missing or wrong: open the URL fsm serve printed, or send " + (
            "'Authorization: Bearer <token>'"
        )


class AccessGuard:
    """ASGI middleware: the Host check, the token login, remote reads, security headers."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        response = self._refusal(scope, headers)
        if response is None and scope["method"] not in _SAFE_METHODS:
            response = self._change_refusal(headers)
            if response is None:
                receive, response = await self._limited(headers, receive)
        if response is not None:
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        access = self.access
        if not access.host_allowed(headers.get("host")):
            return JSONResponse(
                {"error": "refused: the Host header does not name this server", "exit_code": 2},
                status_code=403,
            )
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = [value for key, value in query if key == "token"]
        if given and scope["method"] == "GET":
            return self._login(scope, query, given[0])
        if access.remote and not access.authorised(headers):
            return JSONResponse(
                {"error": "this server takes remote clients: every request needs the token"},
                status_code=401,
            )
        return None

    def _change_refusal(self, headers: Headers) -> Response | None:
        """A request that changes something without the token or from another origin is
        refused here, before its body is read."""
        refusal = self.access.control_refusal(headers)
        if refusal is None:
            return None
        status, message = refusal
        return JSONResponse({"error": message, "exit_code": 2}, status_code=status)

    async def _limited(self, headers: Headers, receive: Receive) -> tuple[Receive, Response | None]:
        """``receive`` for the application, or a 413 when the body is larger than allowed: by
        its ``Content-Length`` without reading it, else by reading at most the limit."""
        limit = self.access.max_body
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return receive, _refused(400, "the Content-Length header is not a number")
            if int(length) > limit:
                return receive, _too_large(int(length), limit)
            return receive, None
        # No length given (a chunked body): read it here, never more than the limit.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return receive, _too_large(None, limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay, None

    def _login(self, scope: Scope, query: list[tuple[str, str]], given: str) -> Response:
        """Set the cookie when the token is right, and send the browser to the page without
        the token in its address (out of the history and of what the page can leak)."""
        rest = urlencode([(key, value) for key, value in query if key != "token"])
        path = "/" + str(scope["path"]).lstrip("/")  # never "//host": that leaves the server
        response = RedirectResponse(path + (f"?{rest}" if rest else ""), 303)
        if self.access.token_matches(given):
            response.set_cookie(
                self.access.cookie, self.access.token, httponly=True, samesite="strict", path="/"
            )
        return response


def _refused(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "exit_code": 2}, status_code=status)


def _too_large(size: int | None, limit: int) -> JSONResponse:
    said = f" of {size} bytes" if size is not None else ""
    response = _refused(
        413,
        f"the request body{said} is larger than this server takes ({limit} bytes; "
        "fsm serve --max-body sets it): it was not read",
    )
    response.headers["connection"] = "close"
    return response
