"""The HTTP surfaces answer without waiting on Nagle's algorithm: every connection the
served sockets accept has ``TCP_NODELAY`` on. uvicorn writes a response's head and body
apart; with Nagle on, the body waited for the client's delayed ACK, about 40 ms a response
on Linux (a dashboard page, an API call, an MCP request over HTTP). ``toolcards serve``,
``toolcards dashboard`` and :class:`BackgroundServer` all serve on
:func:`toolcards.surfaces.http.ports.listen`'s socket; the connections are read here from
the running uvicorn server itself."""

from __future__ import annotations

import socket

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from toolcards.surfaces.dashboard import BackgroundServer


def _app() -> Starlette:
    return Starlette(routes=[Route("/", lambda request: PlainTextResponse("ok"))])


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        pytest.param(
            "::1",
            marks=pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback"),
        ),
    ],
)
def test_each_accepted_connection_has_nagle_off(host: str) -> None:
    with BackgroundServer(_app(), host=host) as server, httpx.Client(base_url=server.url) as client:
        for _ in range(3):  # one kept-alive connection, asked more than once
            assert client.get("/").text == "ok"
        connections = list(server.server.server_state.connections)
        assert connections, "the server holds the client's connection"
        for connection in connections:
            sock = connection.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
