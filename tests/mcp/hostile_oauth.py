"""A small internet for the OAuth tests: a hostile MCP server and authorization servers.

Public hosts (``*.example`` names that the test's DNS maps to ``PUBLIC``) and the private
network (``PRIVATE``) are answered in memory by an httpx mock transport; anything else (a
name the DNS maps to 127.0.0.1, a loopback URL) goes to the real network stack, where a
``Listener`` on 127.0.0.1 records whether it was contacted.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from toolcards.tools.mcp._http import http as httpx
from toolcards.tools.mcp.oauth import OAuthFlow

PUBLIC = "93.184.216.34"
"""The public address of the test's DNS."""
PRIVATE = "10.0.0.5"
"""An address of a private network (answered in memory too)."""
SERVER = "https://mcp.hostile.example/mcp"
SERVER_HOST = "mcp.hostile.example"
HOSTILE_AS = "https://as.hostile.example"
TRUSTED_AS = "https://as.trusted.example"
REDIRECT = "http://127.0.0.1:9/callback"
ACCESS = "access-token-1"

Handler = Callable[[httpx.Request], httpx.Response]


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection and closes it at once."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def contacted(self) -> bool:
        return self.connections > 0

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        # closing alone does not wake a thread blocked in accept(); shutting it down does
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(5)
        assert not self._thread.is_alive(), "the listener's accept thread did not end"


def authorization_server(issuer: str, **overrides: Any) -> dict[str, Any]:
    """RFC 8414 metadata of ``issuer`` (``overrides`` replace fields)."""
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "code_challenge_methods_supported": ["S256"],
        **overrides,
    }


class HostileNet:
    """The remote side. ``dns`` maps names to addresses; ``pages[(host, path)]`` answers GETs
    with JSON; ``requests`` records what reached the in-memory hosts (host, path, request)."""

    def __init__(self) -> None:
        self.dns: dict[str, str] = {
            SERVER_HOST: PUBLIC,
            "as.hostile.example": PUBLIC,
            "as.trusted.example": PUBLIC,
            "other.example": PUBLIC,
        }
        self.challenge = f'Bearer resource_metadata="https://{SERVER_HOST}/.well-known/prm"'
        self.pages: dict[tuple[str, str], Any] = {
            (SERVER_HOST, "/.well-known/prm"): {
                "resource": SERVER,
                "authorization_servers": [HOSTILE_AS],
            },
            ("as.hostile.example", "/.well-known/oauth-authorization-server"): (
                authorization_server(HOSTILE_AS)
            ),
            ("as.trusted.example", "/.well-known/oauth-authorization-server"): (
                authorization_server(TRUSTED_AS)
            ),
        }
        self.requests: list[tuple[str, str, httpx.Request]] = []
        self.consents: list[str] = []
        self._mock = httpx.MockTransport(self._answer)
        self._real = httpx.AsyncHTTPTransport()

    async def resolve(self, host: str, port: int) -> list[str]:
        """The test's DNS (the flow's resolver)."""
        if host not in self.dns:
            raise OSError(f"unknown host {host}")
        return [self.dns[host]]

    def transport(self) -> httpx.AsyncBaseTransport:
        """Routes a request as the network would: public addresses to the in-memory hosts,
        everything else to a real connection."""
        net = self

        class Routed(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                address = net.dns.get(request.url.host, request.url.host)
                if address in (PUBLIC, PRIVATE):
                    return await net._mock.handle_async_request(request)
                request.url = request.url.copy_with(host=address)
                return await net._real.handle_async_request(request)

        return Routed()

    def sent(self, host: str, path: str) -> list[httpx.Request]:
        """The requests that reached ``host`` at ``path``."""
        return [r for h, p, r in self.requests if (h, p) == (host, path)]

    def _answer(self, request: httpx.Request) -> httpx.Response:
        host = request.headers.get("host", request.url.host).split(":")[0]
        path = request.url.path
        self.requests.append((host, path, request))
        if path == "/mcp":
            if request.headers.get("authorization") == f"Bearer {ACCESS}":
                return httpx.Response(200, json={"ok": True})
            return httpx.Response(401, headers={"WWW-Authenticate": self.challenge})
        if path == "/token" and request.method == "POST":
            return httpx.Response(200, json={"access_token": ACCESS, "expires_in": 3600})
        if (host, path) in self.pages:
            page = self.pages[(host, path)]
            return page if isinstance(page, httpx.Response) else httpx.Response(200, json=page)
        return httpx.Response(404, json={"error": "not found"})

    async def consent(self, url: str) -> str:
        """The user's browser: consents at once."""
        self.consents.append(url)
        state = parse_qs(urlsplit(url).query)["state"][0]
        return f"{REDIRECT}?{urlencode({'code': 'code-1', 'state': state})}"

    def flow(self, **options: Any) -> OAuthFlow:
        """An OAuth flow for the hostile MCP server, on this network."""
        settings: dict[str, Any] = {
            "client_id": "client-1",
            "redirect_uri": REDIRECT,
            "server_url": SERVER,
            "handler": self.consent,
            "resolver": self.resolve,
            "transport": self.transport(),
            **options,
        }
        return OAuthFlow(**settings)

    async def get(self, flow: OAuthFlow, url: str = SERVER) -> httpx.Response:
        """GET ``url`` as the MCP client does, authenticated by ``flow``."""
        async with httpx.AsyncClient(transport=self.transport(), auth=flow) as client:
            return await client.get(url)


def form_of(request: httpx.Request) -> dict[str, str]:
    """The fields of a form-encoded request body."""
    return {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
