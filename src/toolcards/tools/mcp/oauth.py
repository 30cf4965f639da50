"""OAuth 2.1 authorization-code flow with PKCE for MCP servers that answer 401.

``OAuthFlow`` is an ``httpx.Auth``: it sends the access token, and on a 401 it refreshes the
token or runs the full flow (protected-resource and authorization-server discovery, PKCE,
user consent through an authorization handler, code exchange), then repeats the request.
Tokens live in memory on the flow object, which outlives reconnections.

The MCP server may be hostile: the token is requested for the server's own canonical URL
(RFC 8707) and only ever sent under that URL's folder and the host's grant that admitted it
(:func:`scope_refusal`); discovery and token requests are made by the flow's own client (no
redirects followed, every URL through ``DiscoveryGuard``); a client secret goes only to a token
endpoint the card names, or one under its issuer's URL.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import anyio

from toolcards.core import outside_json
from toolcards.core.tls import default_verify
from toolcards.core.trust import NOTHING, HostTrust
from toolcards.tools._common.url_guard import Resolver, pinned, system_resolver
from toolcards.tools.mcp._http import http as httpx
from toolcards.tools.mcp.oauth_callback import AuthorizationHandler, loopback_handler
from toolcards.tools.mcp.oauth_discovery import Discovery, Endpoints
from toolcards.tools.mcp.oauth_urls import (
    DiscoveryGuard,
    OAuthError,
    require_secure,
    resource_for,
    shown,
)

_REFRESH_MARGIN = 30.0
"""Seconds before expiry at which a token is refreshed (at most a tenth of its lifetime)."""
_MAX_BODY_BYTES = 1 << 20
"""Longer metadata or token responses are refused."""


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


async def _read_capped(response: httpx.Response, what: str) -> bytes:
    """The body as sent (asked for uncompressed and never inflated here: a small gzip member
    can hide an endless tail); OAuthError past ``_MAX_BODY_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    if response.is_stream_consumed:  # built in memory, its body read already (a mock's)
        chunks, size = [response.content], len(response.content)
    else:
        async for chunk in response.aiter_raw():
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_BODY_BYTES:
                break
    if size > _MAX_BODY_BYTES:
        raise OAuthError(f"the {what} answered more than {_MAX_BODY_BYTES} bytes")
    return b"".join(chunks)


def credential_scope(server_url: str) -> HostTrust:
    """The folder of ``server_url``, read as a ``HostTrust`` URL grant (same scheme, host and
    port, whole segments): its parent path, since an SSE server names a sibling for its
    messages (``/a/sse`` -> ``/a/messages``), or the path itself when it ends in ``/``
    (``/a/`` is the folder ``/a``, not the origin); nothing when the URL could not be granted."""
    try:
        parts = urlsplit(str(httpx.URL(server_url)))  # spelled as its requests will be
        parent = parts.path.rpartition("/")[0]
        return HostTrust(urls=[urlunsplit((parts.scheme, parts.netloc, parent, "", ""))])
    except (ValueError, httpx.InvalidURL):
        return NOTHING


def scope_refusal(server_url: str, granted: str | None = None) -> Callable[[str], str | None]:
    """Why no request for the MCP server at ``server_url``, and so no credential of it, may go
    to a URL (None when it may): the URL must lie under :func:`credential_scope`, and under
    ``granted`` too, the host's URL grant that admitted a card loaded from data (the folder of
    a URL that is the grant itself, ``/tenant-a``, is wider than the grant: the origin)."""
    folder = credential_scope(server_url)
    grant = HostTrust(urls=[granted]) if granted is not None else None

    def refusal(target: str) -> str | None:
        if not folder.allows_url(target):
            where = f"the folder of the server's URL {_bare(server_url)}"
        elif grant is not None and not grant.allows_url(target):
            where = f"the host's grant {_bare(str(granted))}"
        else:
            return None
        return f"not sent to {_bare(target)}, outside {where}"

    return refusal


def _bare(url: str) -> str:
    """``url`` without its query and fragment, cut for an error message."""
    return shown(urlsplit(url)._replace(query="", fragment="").geturl())


class OAuthFlow(httpx.Auth):
    """httpx authentication running the authorization-code + PKCE flow on demand, for the
    MCP server at ``server_url``.

    With a ``client_secret``, the authorization server must be configured (``issuer``, or
    both endpoints): the secret never goes to one the MCP server names, nor to a token endpoint
    the issuer's metadata puts outside the issuer's URL. ``resolver`` and ``transport`` serve
    the flow's own requests (tests give in-memory ones); ``granted`` is the host's URL grant
    that admitted a card loaded from data (see :func:`scope_refusal`)."""

    requires_response_body = False

    def __init__(
        self,
        *,
        client_id: str,
        redirect_uri: str,
        server_url: str,
        client_secret: str | None = None,
        scopes: list[str] | None = None,
        authorization_endpoint: str | None = None,
        token_endpoint: str | None = None,
        issuer: str | None = None,
        resource: str | None = None,
        granted: str | None = None,
        handler: AuthorizationHandler | None = None,
        timeout: float = 30.0,
        resolver: Resolver = system_resolver,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.client_id = client_id
        self.redirect_uri = redirect_uri
        self.server_url = server_url
        self._client_secret = client_secret
        self.scopes = list(scopes or [])
        self.issuer = issuer
        self.resource = resource_for(server_url, resource)
        """The resource indicator requested: the MCP server's canonical URL (RFC 8707)."""
        self.handler = handler
        self.timeout = timeout
        self.clock: Callable[[], float] = time.time
        """The wall clock a token's lifetime is counted on (a test may move it on)."""
        self._transport = transport
        self._refusal = scope_refusal(server_url, granted)
        self._guard = DiscoveryGuard(server_url, resolver)
        self._discovery = Discovery(self._guard, self.resource, issuer, self._fetch)
        self._endpoints: Endpoints | None = None
        if authorization_endpoint and token_endpoint:
            self._endpoints = Endpoints(
                require_secure(authorization_endpoint, "authorization endpoint"),
                require_secure(token_endpoint, "token endpoint"),
                configured=True,
                own=True,
            )
        if client_secret and self._endpoints is None and issuer is None:
            raise OAuthError(
                "a client_secret needs its authorization server configured: set issuer "
                "(or authorization_endpoint and token_endpoint)"
            )
        self._tokens: _Tokens | None = None
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
                    await self._refresh(tokens.refresh)
        self._authorize(request)
        response = yield request
        if response.status_code != 401 or not self._for_server(str(response.request.url)):
            return
        async with self._lock:
            held = self._tokens is not None and self._tokens is tokens
            if (
                held
                and tokens is not None
                and tokens.refresh
                and await self._refresh(tokens.refresh)
            ):
                self._authorize(request)
                response = yield request
                if response.status_code != 401:
                    return
            if self._tokens is tokens or self._tokens is None:
                await self._authorize_anew(response)
        self._authorize(request)
        yield request

    # ---- steps -------------------------------------------------------------------------------

    def _expiring(self, tokens: _Tokens) -> bool:
        return tokens.refresh_at is not None and self.clock() >= tokens.refresh_at

    def _for_server(self, url: str) -> bool:
        """Whether ``url`` is under the MCP server's URL and the host's grant (the only place a
        token goes: another path of its origin may be another tenant's)."""
        return self._refusal(url) is None

    def _authorize(self, request: httpx.Request) -> None:
        if not self._for_server(str(request.url)):
            request.headers.pop("Authorization", None)
        elif self._tokens is not None:
            request.headers["Authorization"] = f"Bearer {self._tokens.access}"

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=self._transport,
            timeout=self.timeout,
            follow_redirects=False,
            verify=default_verify(httpx),
        )

    async def _fetch(
        self,
        client: httpx.AsyncClient,
        url: str,
        what: str,
        *,
        configured: bool,
        form: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """GET (or POST ``form`` to) a URL the guard allows -> (status, JSON body or None),
        within the flow's timeout in all."""
        try:
            with anyio.fail_after(self.timeout):
                status, body = await self._send(client, url, what, configured, form)
        except TimeoutError:
            raise OAuthError(
                f"the {what} {shown(url)} did not answer within {self.timeout} s"
            ) from None
        try:
            return status, outside_json.loads(body) if body else None
        except ValueError:
            return status, None

    async def _send(
        self,
        client: httpx.AsyncClient,
        url: str,
        what: str,
        configured: bool,
        form: dict[str, str] | None,
    ) -> tuple[int, bytes]:
        """(status, body) of one request to a URL the guard allows."""
        checked = await self._guard.check(url, what, configured=configured)
        method = "GET" if form is None else "POST"
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        request = client.build_request(method, checked.url, data=form, headers=headers)
        if checked.addresses:
            request = pinned(request, checked.addresses[0])
        try:
            response = await client.send(request, stream=True)
            try:
                return response.status_code, await _read_capped(response, what)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise OAuthError(
                f"the {what} {shown(checked.url)} failed ({type(exc).__name__})"
            ) from None

    async def _authorize_anew(self, challenge: httpx.Response) -> None:
        async with self._client() as client:
            if self._endpoints is None:
                self._endpoints = await self._discovery.endpoints(client, challenge)
            self._check_secret(self._endpoints)
            form = await self._consent(self._endpoints)
            if not self._take_tokens(await self._token(client, form), refresh=False):
                raise OAuthError("the token endpoint did not return an access token")

    async def _refresh(self, refresh_token: str) -> bool:
        if self._endpoints is None:
            return False
        async with self._client() as client:
            answer = await self._token(
                client, {"grant_type": "refresh_token", "refresh_token": refresh_token}
            )
        return self._take_tokens(answer, refresh=True)

    async def _consent(self, endpoints: Endpoints) -> dict[str, str]:
        """Send the user to the authorization endpoint; the code exchange form."""
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
            "resource": self.resource,
        }
        if self.scopes:
            query["scope"] = " ".join(self.scopes)
        sep = "&" if "?" in endpoints.authorization else "?"
        redirected = await asyncio.wait_for(
            self.handler(f"{endpoints.authorization}{sep}{urlencode(query)}"),
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
        return {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }

    def _check_secret(self, endpoints: Endpoints) -> None:
        """OAuthError when a client secret would go to a token endpoint that is not the card's
        own (one the issuer's metadata names outside the issuer's URL)."""
        if self._client_secret and not endpoints.own:
            raise OAuthError(
                "the client_secret goes only to a token endpoint under the issuer's URL, not "
                f"{shown(endpoints.token)}: name authorization_endpoint and token_endpoint in "
                "the card"
            )

    async def _token(self, client: httpx.AsyncClient, form: dict[str, str]) -> tuple[int, Any]:
        assert self._endpoints is not None
        form = {**form, "client_id": self.client_id, "resource": self.resource}
        if self._client_secret:
            self._check_secret(self._endpoints)
            form["client_secret"] = self._client_secret
        return await self._fetch(
            client,
            self._endpoints.token,
            "token endpoint",
            configured=self._endpoints.configured,
            form=form,
        )

    def _take_tokens(self, answer: tuple[int, Any], *, refresh: bool) -> bool:
        status, data = answer
        if status != 200:
            if refresh:
                self._tokens = None
                return False
            raise OAuthError(f"the token endpoint answered {status}")
        if not isinstance(data, dict):
            raise OAuthError("the token endpoint answered with something that is not a JSON object")
        access = data.get("access_token")
        if not isinstance(access, str) or not access:
            return False
        expires_in = data.get("expires_in")
        refresh_at = None
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            refresh_at = self.clock() + expires_in - min(_REFRESH_MARGIN, expires_in / 10)
        refresh_token = data.get("refresh_token")
        if not isinstance(refresh_token, str) and self._tokens is not None:
            refresh_token = self._tokens.refresh
        self._tokens = _Tokens(
            access=access,
            refresh=refresh_token if isinstance(refresh_token, str) else None,
            refresh_at=refresh_at,
        )
        return True


__all__ = ["AuthorizationHandler", "OAuthError", "OAuthFlow", "loopback_handler"]
