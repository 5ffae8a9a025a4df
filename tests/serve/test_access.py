"""Safe by default: loopback only, the token for changes, the same origin, the right Host."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fsm.base.errors import InputError
from fsm.serve import Access, create_app
from fsm.serve.access import check_bind, read_token_file
from tests.conftest import CliResult
from tests.serve.conftest import BASE, PORT, TOKEN, Api, make_served

ORIGIN = BASE
COOKIE = f"fsm_serve_{PORT}"


def journal_size(api: Api, instance_id: str) -> int:
    instance = api.instance(instance_id)
    return instance.store.paths(instance.id).journal.stat().st_size  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        pytest.param({}, 401, "token is missing or wrong", id="no-token"),
        pytest.param({"Authorization": "Bearer wrong"}, 401, "token", id="wrong-token"),
        pytest.param({"Authorization": f"Basic {TOKEN}"}, 401, "token", id="not-bearer"),
        pytest.param(
            {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"},
            403,
            "origin http://evil.example is not this server",
            id="other-origin",
        ),
        pytest.param(
            {"Authorization": f"Bearer {TOKEN}", "Sec-Fetch-Site": "cross-site"},
            403,
            "cross-site",
            id="cross-site-fetch",
        ),
        pytest.param(
            {"Cookie": f"{COOKIE}={TOKEN}"}, 403, "must send its Origin", id="cookie-no-origin"
        ),
        pytest.param(
            {"Cookie": f"{COOKIE}={TOKEN}", "Origin": "http://127.0.0.1:9999"},
            403,
            "is not this server",
            id="cookie-other-port",
        ),
        pytest.param(
            {"Cookie": f"fsm_serve_1={TOKEN}", "Origin": ORIGIN},
            401,
            "token",
            id="other-servers-cookie",
        ),
    ],
)
def test_control_is_refused_without_token_or_from_elsewhere(
    api: Api, headers: dict[str, str], status: int, says: str
) -> None:
    """Control needs the token and the same origin; a refusal changes nothing."""
    api.counter("c1")
    before = journal_size(api, "c1")
    answer = api.client.post("/api/instances/counter/c1/start", json={}, headers=headers)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["error"]
    assert journal_size(api, "c1") == before
    assert api.instance("c1").load().status == "created"


def test_create_is_refused_without_token(api: Api) -> None:
    """Create needs the token too; nothing is written without it."""
    answer = api.client.post("/api/instances/counter", json={"id": "x"})
    assert answer.status_code == 401
    assert not (api.workspace.path / ".counters" / "x.json").exists()


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Authorization": f"Bearer {TOKEN}"}, id="bearer"),
        pytest.param(
            {"Authorization": f"Bearer {TOKEN}", "Origin": ORIGIN}, id="bearer-same-origin"
        ),
        pytest.param(
            {"Cookie": f"{COOKIE}={TOKEN}", "Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"},
            id="cookie-same-origin",
        ),
    ],
)
def test_control_with_token_from_this_origin_works(api: Api, headers: dict[str, str]) -> None:
    """The token as a bearer header, or the browser's cookie with its own Origin, may control."""
    api.counter("c1")
    answer = api.client.post("/api/instances/counter/c1/start", json={}, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "running"


def test_reads_need_no_token_on_loopback(api: Api) -> None:
    """On loopback, pages and reads are open; the session says whether control is possible."""
    api.counter("c1")
    assert api.client.get("/api/instances/counter/c1").status_code == 200
    assert api.client.get("/api/session").json() == {"control": False, "remote": False, "drives": 0}
    api.client.cookies.set(COOKIE, TOKEN)
    assert api.client.get("/api/session").json() == {"control": True, "remote": False, "drives": 0}


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        pytest.param(f"127.0.0.1:{PORT}", True, id="loopback-ip"),
        pytest.param(f"localhost:{PORT}", True, id="localhost"),
        pytest.param("localhost", True, id="no-port"),
        pytest.param("evil.example", False, id="rebinding"),
        pytest.param(f"evil.example:{PORT}", False, id="rebinding-port"),
        pytest.param(f"127.0.0.1:{PORT + 1}", False, id="other-port"),
    ],
)
def test_host_header_must_name_this_server(api: Api, host: str, allowed: bool) -> None:
    """A request whose Host names another server (DNS rebinding) is refused, reads included."""
    answer = api.client.get("/api/instances", headers={"Host": host})
    assert (answer.status_code == 200) == allowed
    if not allowed:
        assert answer.status_code == 403
        assert "Host header" in answer.json()["error"]


def test_token_login_sets_a_strict_cookie_and_drops_the_token(api: Api) -> None:
    """Opening the printed address stores the token in an HttpOnly, SameSite=Strict cookie
    and sends the browser to the same page without the token in its address."""
    answer = api.client.get(f"/?token={TOKEN}&machine=counter", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/?machine=counter"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    wrong = api.client.get("/?token=nope", follow_redirects=False)
    assert wrong.status_code == 303
    assert "set-cookie" not in wrong.headers


def test_login_redirect_never_leaves_the_server(api: Api) -> None:
    """A path that starts with ``//`` is not sent back as an address on another host."""
    answer = api.client.get(f"/%2Fevil.example/?token={TOKEN}", follow_redirects=False)
    assert answer.headers["location"].startswith("/evil.example")


def test_pages_send_security_headers(api: Api) -> None:
    """Every answer forbids framing, sniffing, referrers and scripts from elsewhere."""
    headers = api.client.get("/").headers
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert "script-src 'self'" in headers["content-security-policy"]


def test_remote_mode_needs_the_token_for_everything(tmp_path: Path) -> None:
    """With remote clients allowed, reads need the token as well."""
    app = create_app(make_served(tmp_path), Access(TOKEN, "0.0.0.0", PORT, remote=True))
    with TestClient(app, base_url="http://192.0.2.10:8765") as client:
        assert client.get("/api/instances").status_code == 401
        assert client.get("/").status_code == 401
        ok = client.get("/api/instances", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200


@pytest.mark.parametrize(
    ("host", "allow_remote", "refused"),
    [
        pytest.param("127.0.0.1", False, False, id="loopback"),
        pytest.param("127.0.0.2", False, False, id="loopback-range"),
        pytest.param("::1", False, False, id="ipv6-loopback"),
        pytest.param("localhost", False, False, id="localhost"),
        pytest.param("0.0.0.0", False, True, id="everywhere"),
        pytest.param("192.168.1.5", False, True, id="lan"),
        pytest.param("example.org", False, True, id="name"),
        pytest.param("0.0.0.0", True, False, id="everywhere-allowed"),
    ],
)
def test_binding_beyond_loopback_needs_allow_remote(
    host: str, allow_remote: bool, refused: bool
) -> None:
    """Only loopback addresses are accepted unless --allow-remote is given too."""
    if refused:
        with pytest.raises(InputError, match="--allow-remote"):
            check_bind(host, allow_remote)
    else:
        check_bind(host, allow_remote)


def test_serve_command_refuses_a_remote_address(cli: Callable[..., CliResult]) -> None:
    """``fsm serve --host 0.0.0.0`` exits 2 with one line saying how to mean it."""
    result = cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert result.code == 2
    assert "refusing to listen on 0.0.0.0" in result.err
    assert "--allow-remote" in result.err


def test_token_file_must_be_private(tmp_path: Path) -> None:
    """A token file others can read is refused; a private one is read."""
    path = tmp_path / "token"
    path.write_text("s3cret-token-of-enough-length\n")
    os.chmod(path, 0o644)
    with pytest.raises(InputError, match="chmod 600"):
        read_token_file(path)
    os.chmod(path, 0o600)
    assert read_token_file(path) == "s3cret-token-of-enough-length"
    path.write_text("short")
    with pytest.raises(InputError, match="16 characters"):
        read_token_file(path)
    with pytest.raises(InputError, match="cannot read"):
        read_token_file(tmp_path / "missing")
