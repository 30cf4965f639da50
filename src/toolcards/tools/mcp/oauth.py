"""OAuth 2.1 authorization-code flow with PKCE for MCP servers that answer 401.

``OAuthFlow`` is an ``httpx.Auth``: it sends the access token, and on a 401 it refreshes the
token or runs the full flow (protected-resource and authorization-server discovery, PKCE,
user consent through an authorization handler, code exchange), then repeats the request.
Tokens live in memory on the flow object, which outlives reconnections.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
import re
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

from toolcards.core.errors import ToolcardsError
from toolcards.tools.mcp._http import http as httpx

AuthorizationHandler = Callable[[str], Awaitable[str]]
"""Takes the authorization URL the user must visit; returns the redirect URL with the code."""

_RESOURCE_METADATA = re.compile(r'resource_metadata="([^"]+)"')
_REFRESH_MARGIN = 30.0
"""Seconds before expiry at which a token is refreshed (at most a tenth of its lifetime)."""


class OAuthError(ToolcardsError, RuntimeError):
    """The authorization flow failed; the message never contains a token."""


@dataclass
class _Endpoints:
    authorization: str
    token: str


@dataclass
class _Tokens:
    access: str
    refresh: str | None
    refresh_at: float | None
    """When to refresh: shortly before the expiry the server announced."""

    def __repr__(self) -> str:
        return "_Tokens(<redacted>)"


def _pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)[:96]
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _require_secure(url: str, what: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and _is_loopback(parts.hostname or "")):
        return url
    raise OAuthError(f"the {what} must use https (or http on a loopback host): {url!r}")


class OAuthFlow(httpx.Auth):
    """httpx authentication running the authorization-code + PKCE flow on demand."""

    requires_response_body = False

    def __init__(
        self,
        *,
        client_id: str,
        redirect_uri: str,
        client_secret: str | None = None,
        scopes: list[str] | None = None,
        authorization_endpoint: str | None = None,
        token_endpoint: str | None = None,
        issuer: str | None = None,
        resource: str | None = None,
        handler: AuthorizationHandler | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.client_id = client_id
        self.redirect_uri = redirect_uri
        self._client_secret = client_secret
        self.scopes = list(scopes or [])
        self.issuer = issuer
        self.resource = resource
        self.handler = handler
        self.timeout = timeout
        self._endpoints: _Endpoints | None = None
        if authorization_endpoint and token_endpoint:
            self._endpoints = _Endpoints(
                _require_secure(authorization_endpoint, "authorization endpoint"),
                _require_secure(token_endpoint, "token endpoint"),
            )
        self._tokens: _Tokens | None = None
        self._issuer_found: str | None = None
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"OAuthFlow(client_id={self.client_id!r}, authorized={self.authorized})"

    @property
    def authorized(self) -> bool:
        """Whether an access token is held."""
        return self._tokens is not None

    def forget(self) -> None:
        """Drop the held tokens (the next 401 runs the full flow again)."""
        self._tokens = None

    # ---- httpx.Auth ---------------------------------------------------------------------------

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        raise OAuthError("OAuthFlow supports async clients only")

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        tokens = self._tokens
        if tokens is not None and tokens.refresh and self._expiring(tokens):
            async with self._lock:
                if self._tokens is tokens:
                    refresh = self._refresh_request(tokens.refresh)
                    if refresh is not None:
                        await self._take_tokens((yield refresh), refresh=True)
        self._authorize(request)
        response = yield request
        if response.status_code != 401:
            return
        async with self._lock:
            if self._tokens is not None and self._tokens is tokens and tokens.refresh:
                refresh = self._refresh_request(tokens.refresh)
                if refresh is not None and await self._take_tokens((yield refresh), refresh=True):
                    self._authorize(request)
                    response = yield request
                    if response.status_code != 401:
                        return
            if self._tokens is tokens or self._tokens is None:
                if self._endpoints is None:
                    async for step in self._discover(response):
                        step_response = yield step
                        await step_response.aread()
                        self._discovered(step, step_response)
                    if self._endpoints is None:
                        raise OAuthError(
                            "the server's authorization endpoints could not be discovered"
                        )
                exchange = await self._consent()
                if not await self._take_tokens((yield exchange), refresh=False):
                    raise OAuthError("the token endpoint did not return an access token")
        self._authorize(request)
        yield request

    # ---- steps -------------------------------------------------------------------------------

    def _expiring(self, tokens: _Tokens) -> bool:
        return tokens.refresh_at is not None and time.time() >= tokens.refresh_at

    def _authorize(self, request: httpx.Request) -> None:
        if self._tokens is not None:
            request.headers["Authorization"] = f"Bearer {self._tokens.access}"

    async def _discover(self, challenge: httpx.Response) -> AsyncGenerator[httpx.Request, None]:
        """Requests for RFC 9728 resource metadata, then RFC 8414 server metadata."""
        issuer = self.issuer
        if issuer is None:
            found = _RESOURCE_METADATA.search(challenge.headers.get("www-authenticate", ""))
            origin = f"{challenge.request.url.scheme}://{challenge.request.url.netloc.decode()}"
            metadata_url = (
                found.group(1) if found else f"{origin}/.well-known/oauth-protected-resource"
            )
            yield httpx.Request("GET", _require_secure(metadata_url, "resource metadata URL"))
            issuer = self._issuer_found
        if issuer is None:
            return
        base = issuer.rstrip("/")
        parts = urlsplit(base)
        path = parts.path.strip("/")
        well_known = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server"
        yield httpx.Request("GET", f"{well_known}/{path}" if path else well_known)

    def _discovered(self, request: httpx.Request, response: httpx.Response) -> None:
        if response.status_code != 200:
            raise OAuthError(
                f"OAuth discovery failed: {request.url} answered {response.status_code}"
            )
        try:
            data = response.json()
        except ValueError:
            raise OAuthError(f"OAuth discovery failed: {request.url} is not JSON") from None
        if not isinstance(data, dict):
            raise OAuthError(f"OAuth discovery failed: {request.url} is not an object")
        if "authorization_servers" in data:
            servers = data.get("authorization_servers") or []
            if not servers or not isinstance(servers[0], str):
                raise OAuthError("the protected resource names no authorization server")
            self._issuer_found = servers[0]
            if self.resource is None and isinstance(data.get("resource"), str):
                self.resource = data["resource"]
            return
        expected = (self.issuer or self._issuer_found or "").rstrip("/")
        announced = data.get("issuer")
        if isinstance(announced, str) and expected and announced.rstrip("/") != expected:
            raise OAuthError("the authorization server metadata names a different issuer")
        auth, token = data.get("authorization_endpoint"), data.get("token_endpoint")
        if not isinstance(auth, str) or not isinstance(token, str):
            raise OAuthError("the authorization server metadata lacks its endpoints")
        methods = data.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise OAuthError("the authorization server does not support PKCE with S256")
        self._endpoints = _Endpoints(
            _require_secure(urljoin(str(request.url), auth), "authorization endpoint"),
            _require_secure(urljoin(str(request.url), token), "token endpoint"),
        )

    async def _consent(self) -> httpx.Request:
        """Send the user to the authorization endpoint; the code exchange request."""
        assert self._endpoints is not None
        if self.handler is None:
            raise OAuthError(
                "the MCP server requires OAuth authorization, but no authorization handler is set"
            )
        verifier, challenge = _pkce_pair()
        state = secrets.token_urlsafe(24)
        query: dict[str, str] = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
        }
        if self.scopes:
            query["scope"] = " ".join(self.scopes)
        if self.resource:
            query["resource"] = self.resource
        sep = "&" if "?" in self._endpoints.authorization else "?"
        redirected = await asyncio.wait_for(
            self.handler(f"{self._endpoints.authorization}{sep}{urlencode(query)}"),
            timeout=max(self.timeout, 300.0),
        )
        params = parse_qs(urlsplit(redirected).query)
        if params.get("state", [""])[0] != state:
            raise OAuthError("the authorization response has a wrong state (possible CSRF)")
        if "error" in params:
            raise OAuthError(f"authorization was refused: {params['error'][0][:100]}")
        code = params.get("code", [""])[0]
        if not code:
            raise OAuthError("the authorization response carries no code")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }
        return self._token_request(form)

    def _refresh_request(self, refresh_token: str) -> httpx.Request | None:
        if self._endpoints is None:
            return None
        return self._token_request({"grant_type": "refresh_token", "refresh_token": refresh_token})

    def _token_request(self, form: dict[str, str]) -> httpx.Request:
        assert self._endpoints is not None
        form = {**form, "client_id": self.client_id}
        if self._client_secret:
            form["client_secret"] = self._client_secret
        if self.resource:
            form["resource"] = self.resource
        headers = {"Accept": "application/json"}
        return httpx.Request("POST", self._endpoints.token, data=form, headers=headers)

    async def _take_tokens(self, response: httpx.Response, *, refresh: bool) -> bool:
        await response.aread()
        if response.status_code != 200:
            if refresh:
                self._tokens = None
                return False
            raise OAuthError(f"the token endpoint answered {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise OAuthError(
                "the token endpoint answered with something that is not JSON"
            ) from None
        access = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(access, str) or not access:
            return False
        expires_in = data.get("expires_in")
        refresh_at = None
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            refresh_at = time.time() + expires_in - min(_REFRESH_MARGIN, expires_in / 10)
        refresh_token = data.get("refresh_token")
        if not isinstance(refresh_token, str) and self._tokens is not None:
            refresh_token = self._tokens.refresh
        self._tokens = _Tokens(
            access=access,
            refresh=refresh_token if isinstance(refresh_token, str) else None,
            refresh_at=refresh_at,
        )
        return True


def loopback_handler(redirect_uri: str, *, open_browser: bool = True) -> AuthorizationHandler:
    """A handler that opens the authorization URL in a browser (or prints it) and waits for
    the redirect on ``redirect_uri``, which must be an http URL on a loopback host."""
    parts = urlsplit(redirect_uri)
    if parts.scheme != "http" or not _is_loopback(parts.hostname or "") or not parts.port:
        raise OAuthError("a loopback redirect_uri looks like http://127.0.0.1:PORT/callback")
    host, port, path = parts.hostname or "127.0.0.1", parts.port, parts.path or "/"

    async def handle(url: str) -> str:
        got: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
                target = line.split(" ")[1] if line.count(" ") >= 2 else ""
                ok = urlsplit(target).path == path
                body = b"Authorization received; you can close this window." if ok else b"no"
                status = b"200 OK" if ok else b"404 Not Found"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\n")
                writer.write(b"Connection: close\r\n\r\n" + body)
                await writer.drain()
                if ok and not got.done():
                    got.set_result(f"http://{parts.netloc}{target}")
            except (OSError, TimeoutError, IndexError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, host, port)
        try:
            if open_browser:
                import webbrowser

                if not webbrowser.open(url):
                    print(f"Open this URL to authorize the MCP server:\n{url}")
            else:
                print(f"Open this URL to authorize the MCP server:\n{url}")
            return await got
        finally:
            server.close()
            await server.wait_closed()

    return handle
