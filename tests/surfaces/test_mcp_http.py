"""`toolcards serve --transport http`: bearer tokens, anonymous callers, sessions bound to
their caller, DNS-rebinding refusal (on any loopback address: the app in process, raw HTTP
through an ASGI client), bounded initialize requests, and approvals by elicitation over HTTP."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp_clients import http_session
from starlette.testclient import TestClient

from surfaces.surface_support import HEADERS, INIT, HttpServer, token_for, write_config
from toolcards.governance import Identity
from toolcards.surfaces.config import load_config
from toolcards.surfaces.dashboard import Dashboard
from toolcards.surfaces.dashboard.serve import warn_if_exposed
from toolcards.surfaces.http.ports import (
    LOOPBACK_NAMES,
    bound_address,
    is_loopback,
    listen,
    local_names,
)
from toolcards.surfaces.http.tokens import TokenTable
from toolcards.surfaces.mcp_server.http import http_app
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = pytest.mark.anyio

ALICE = Identity("alice", "user", ["data_admin"])
BOB = Identity("bob", "user", ["sales"])
CAROL = Identity("carol", "user", ["finance"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base = tmp_path_factory.mktemp("http")
    srv = HttpServer(write_config(base, tokens=[ALICE, BOB, CAROL], approval="client"))
    yield srv
    srv.stop()


def post(server: HttpServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(server.url, json=body, headers={**HEADERS, **headers}, timeout=10)


def test_wrong_token_is_rejected_before_mcp(server: HttpServer) -> None:
    response = post(server, INIT, Authorization="Bearer token-mallory")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_other_authorization_schemes_are_rejected(server: HttpServer) -> None:
    response = post(server, INIT, Authorization=f"Basic {token_for(ALICE)}")
    assert response.status_code == 401


def test_empty_bearer_token_is_rejected(server: HttpServer) -> None:
    assert post(server, INIT, Authorization="Bearer").status_code == 401


async def test_caller_without_a_token_is_anonymous_and_sees_nothing(server: HttpServer) -> None:
    async with http_session(server.url) as s:
        tools = (await s.list_tools()).tools
        result = await s.call_tool("crm_read", {"id": 1})
    assert tools == []
    assert result.is_error is True
    assert result.content[0].text == "unknown tool: crm_read"  # type: ignore[union-attr]


async def test_token_resolves_to_its_principal(server: HttpServer) -> None:
    async with http_session(server.url, token_for(ALICE)) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        result = await s.call_tool("crm_delete", {"id": 3})
    assert "crm_delete" in names
    assert result.is_error is False


def test_a_session_refuses_requests_from_another_caller(server: HttpServer) -> None:
    opened = post(server, INIT, Authorization=f"Bearer {token_for(ALICE)}")
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    hijack = post(
        server, listing, Authorization=f"Bearer {token_for(BOB)}", **{"mcp-session-id": session}
    )
    anonymous = post(server, listing, **{"mcp-session-id": session})
    assert opened.status_code == 200
    assert hijack.status_code == 403
    assert anonymous.status_code == 403


def test_requests_for_another_host_name_are_refused(server: HttpServer) -> None:
    response = post(server, INIT, Host="evil.example", Authorization=f"Bearer {token_for(ALICE)}")
    assert response.status_code in (403, 421)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),
        ({"Host": "attacker.example:8765"}, 421),
        ({"Origin": "http://attacker.example:8765"}, 403),
        ({"Origin": "http://127.0.0.2:8765"}, 200),
    ],
    ids=["own-address", "rebound-host", "other-origin", "own-origin"],
)
def test_a_server_on_another_loopback_address_refuses_rebound_requests(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    """``--host 127.0.0.2`` is loopback too (the check was on only for 127.0.0.1, localhost and
    ::1: a page of a rebound DNS name called its tools)."""
    config = load_config(write_config(tmp_path, tokens=[ALICE]))
    with (
        SurfaceRuntime.from_config(config) as rt,
        TestClient(http_app(rt, host="127.0.0.2"), base_url="http://127.0.0.2:8765") as client,
    ):
        response = client.post("/mcp", json=INIT, headers={**HEADERS, **headers})
    assert response.status_code == status


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.2", True), ("::1", True), ("localhost", True), ("127.evil.example", False),
     ("0.0.0.0", False), ("10.0.0.2", False), ("::ffff:127.0.0.1", True),
     ("[::ffff:7f00:1]", True), ("::ffff:10.0.0.2", False)],
)  # fmt: skip
def test_loopback_is_any_loopback_address_and_no_name_but_localhost(
    host: str, loopback: bool
) -> None:
    """One test for the MCP server and the dashboard (whose ``127.*`` took a DNS name)."""
    assert is_loopback(host) is loopback


THIS_MACHINE = "this-machine.test"
"""A name resolved to 127.0.1.1 here, as Debian's /etc/hosts resolves ``$(hostname)``."""


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """:data:`THIS_MACHINE` resolves to 127.0.1.1 (and ``elsewhere.test`` to 10.0.0.2), names
    only: a lookup of numeric addresses does not resolve them, as the real one does not."""
    real = socket.getaddrinfo
    names = {THIS_MACHINE: "127.0.1.1", "elsewhere.test": "10.0.0.2"}

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                    flags: int = 0) -> Any:  # fmt: skip
        if not flags & socket.AI_NUMERICHOST:
            host = names.get(host, host)
        return real(host, port, family, type, proto, flags)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),
        ({"Host": "127.0.1.1:8765"}, 200),
        ({"Host": "localhost:8765"}, 200),
        ({"Host": "evil.example:8765"}, 421),
        ({"Origin": "http://evil.example:8765"}, 403),
    ],
    ids=["given-name", "bound-address", "localhost", "rebound-host", "other-origin"],
)
@pytest.mark.usefixtures("resolver")
def test_a_server_given_a_name_that_binds_loopback_refuses_rebound_requests(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    """``--host $(hostname)`` binds loopback under a name (the check was on for numeric
    addresses and localhost only: a page of a rebound DNS name called its tools)."""
    config = load_config(write_config(tmp_path, tokens=[ALICE]))
    with (
        SurfaceRuntime.from_config(config) as rt,
        TestClient(http_app(rt, host=THIS_MACHINE), base_url=f"http://{THIS_MACHINE}:8765") as c,
    ):
        response = c.post("/mcp", json=INIT, headers={**HEADERS, **headers})
    assert response.status_code == status


@pytest.mark.usefixtures("resolver")
def test_the_dashboard_given_a_name_that_binds_loopback_refuses_rebound_requests() -> None:
    app = Dashboard(tokens=TokenTable.from_tokens(()), host=THIS_MACHINE).app()
    with TestClient(app, base_url=f"http://{THIS_MACHINE}{app.base_path}") as client:
        own = client.get("/login")
        rebound = client.get("/login", headers={"Host": "evil.example"})
    assert (own.status_code, rebound.status_code) == (200, 400)


@pytest.mark.usefixtures("resolver")
def test_who_reaches_a_server_is_told_from_the_address_its_name_binds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Names allowed: the loopback ones, the name given and its address; localhost as ever."""
    assert local_names(THIS_MACHINE) == (*LOOPBACK_NAMES, "127.0.1.1", THIS_MACHINE)
    assert local_names("localhost") == LOOPBACK_NAMES
    assert local_names("elsewhere.test") is None
    assert local_names("0.0.0.0") is None
    with caplog.at_level(logging.WARNING):
        warn_if_exposed(THIS_MACHINE)
        warn_if_exposed("elsewhere.test")
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "serving the dashboard on elsewhere.test"
    ]


def test_the_machines_own_name_is_guarded_when_it_binds_loopback(tmp_path: Path) -> None:
    """The real ``$(hostname)``, bound as ``toolcards serve --host`` binds it."""
    name = socket.gethostname()
    try:
        with listen(name, 0) as sock:
            bound = sock.getsockname()[0]
    except OSError as exc:
        pytest.skip(f"{name} cannot be listened on here: {exc}")
    if not is_loopback(bound):
        pytest.skip(f"{name} binds {bound} here, not a loopback address")
    assert bound_address(name) == bound
    config = load_config(write_config(tmp_path, tokens=[ALICE]))
    with (
        SurfaceRuntime.from_config(config) as rt,
        TestClient(http_app(rt, host=name), base_url=f"http://{name}:8765") as client,
    ):
        own = client.post("/mcp", json=INIT, headers=HEADERS)
        rebound = client.post("/mcp", json=INIT, headers={**HEADERS, "Host": "evil.example"})
    assert (own.status_code, rebound.status_code) == (200, 421)


async def test_elicitation_approves_a_call_over_http(server: HttpServer) -> None:
    async def approve(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    args = {"amount": 250, "currency": "USD", "to": "acct-1"}
    async with http_session(server.url, token_for(CAROL), elicitation_callback=approve) as s:
        result = await s.call_tool("transfer_money", args)
    assert result.is_error is False
    assert result.structured_content == {
        "tool": "transfer_money",
        "args": {**args, "amount": 250.0},
    }


def test_serve_binds_to_loopback_by_default() -> None:
    import inspect

    from toolcards.surfaces.serving import serve

    assert inspect.signature(serve).parameters["host"].default == "127.0.0.1"


def test_config_for_http_keeps_no_plain_token(tmp_path: Path) -> None:
    config = write_config(tmp_path, tokens=[ALICE]).read_text(encoding="utf-8")
    assert token_for(ALICE) not in config
    assert "sha256:" in config


def raw_post(server: HttpServer, body: bytes) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token_for(ALICE)}"}
    return httpx.post(server.url, content=body, headers=headers, timeout=10)


@pytest.mark.parametrize("body", [b"{not json", b"[" * 100_000], ids=["not-json", "too-deep"])
def test_bad_json_over_http_is_a_parse_error(server: HttpServer, body: bytes) -> None:
    response = raw_post(server, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize(
    "body",
    [
        b'{"id": 1, "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": 7}',
        b"[]",
    ],
)
def test_invalid_jsonrpc_over_http_is_an_invalid_request(server: HttpServer, body: bytes) -> None:
    response = raw_post(server, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


@pytest.mark.parametrize(
    "extra",
    [{"name": "x" * 16_384}, {"x": [{}] * 501}],
    ids=["16-kib", "1001-values"],
)
def test_an_initialize_beyond_what_a_session_keeps_is_refused(
    server: HttpServer, extra: dict[str, Any]
) -> None:
    """The SDK keeps an initialize's params while the session lives (4 MiB of empty objects
    kept 108 MiB): at most 16 KiB and 1,000 values."""
    client = {"name": "raw", "version": "0", **extra}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    response = raw_post(server, json.dumps({**INIT, "params": params}).encode())
    assert response.status_code == 400
    assert response.json()["id"] == 1
    assert response.json()["error"]["code"] == -32600
    assert "at most 16,384 bytes and 1,000 values" in response.json()["error"]["message"]
    assert "mcp-session-id" not in response.headers


def test_unknown_method_over_http_is_method_not_found(server: HttpServer) -> None:
    opened = post(server, INIT, Authorization=f"Bearer {token_for(ALICE)}")
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    auth = {"Authorization": f"Bearer {token_for(ALICE)}", **session}
    post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **auth)
    response = post(server, {"jsonrpc": "2.0", "id": 9, "method": "tools/frobnicate"}, **auth)
    assert '"code":-32601' in response.text.replace(" ", "")


async def test_server_info_over_http_reports_the_toolcards_version(server: HttpServer) -> None:
    from importlib.metadata import version

    async with http_session(server.url, token_for(ALICE)) as s:
        info = s.server_info
    assert info is not None and info.name == "toolcards"
    assert info.version == version("toolcards")
