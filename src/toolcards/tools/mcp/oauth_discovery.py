"""Discovery of an MCP server's authorization server: protected-resource metadata (RFC 9728),
then the authorization server's metadata (RFC 8414), checked against a hostile server.

The protected-resource metadata must name the MCP server itself as its ``resource`` (RFC 9728
section 3.3); the authorization server's metadata must name the issuer it was fetched for
(RFC 8414 section 3.3). Every URL is checked by the ``DiscoveryGuard`` before it is contacted;
the endpoints a configured issuer's metadata names are checked like discovered ones unless
they are on that issuer's origin (or the issuer is itself private). A client secret goes only
to a token endpoint under the issuer URL itself: the host grants URLs by prefix.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

from toolcards.core.trust import HostTrust, private_host
from toolcards.tools.mcp._http import http as httpx
from toolcards.tools.mcp.oauth_urls import (
    DiscoveryGuard,
    OAuthError,
    canonical_resource,
    same_origin,
    shown,
)

_RESOURCE_METADATA = re.compile(r'resource_metadata="([^"]+)"')


@dataclass
class Endpoints:
    authorization: str
    token: str
    configured: bool
    """Whether the token endpoint is checked as a URL the card names (https, or http on a
    loopback host; private addresses allowed)."""
    own: bool
    """Whether the token endpoint is the card's own: named by it, or under the URL of its
    ``issuer`` (:func:`under_issuer`). Only such a one receives a client secret."""


class Fetch(Protocol):
    def __call__(
        self, client: httpx.AsyncClient, url: str, what: str, *, configured: bool
    ) -> Awaitable[tuple[int, Any]]: ...


def resource_metadata_urls(server_url: str) -> list[str]:
    """Where the protected-resource metadata is looked for when the 401 names no URL: the
    well-known URI with the server's path, then at the root."""
    parts = urlsplit(canonical_resource(server_url))
    root = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"
    return [f"{root}{parts.path}", root] if parts.path else [root]


def server_metadata_url(issuer: str) -> str:
    """The RFC 8414 metadata URL of ``issuer``."""
    parts = urlsplit(issuer.rstrip("/"))
    path = parts.path.strip("/")
    well_known = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server"
    return f"{well_known}/{path}" if path else well_known


def issuer_of(metadata: dict[str, Any], resource: str) -> str:
    """The authorization server named by protected-resource ``metadata``; OAuthError when the
    metadata is for another resource than ``resource`` (the MCP server's canonical URL)."""
    named = metadata.get("resource")
    try:
        same = isinstance(named, str) and canonical_resource(named) == resource
    except OAuthError:
        same = False
    if not same:
        raise OAuthError(
            f"the protected resource metadata names the resource {shown(str(named))}, "
            f"not the MCP server {resource}; refused"
        )
    servers = metadata.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise OAuthError("the protected resource names no authorization server")
    return servers[0]


def under_issuer(endpoint: str, issuer: str) -> bool:
    """Whether ``endpoint`` lies under ``issuer`` (same origin, its path equal or below by whole
    segments), by the rule of the host's grant of the issuer (``HostTrust.urls``): its metadata
    cannot take the client secret to a path of the origin the host did not grant."""
    try:
        return HostTrust(urls=[issuer]).allows_url(endpoint)
    except ValueError:  # an issuer no grant could name (credentials, dot segments)
        return False


def server_endpoints(url: str, metadata: dict[str, Any], issuer: str) -> tuple[str, str]:
    """(authorization endpoint, token endpoint) from the metadata fetched at ``url`` for
    ``issuer``; OAuthError when it names another issuer, lacks them or has no PKCE S256."""
    announced = metadata.get("issuer")
    if not isinstance(announced, str) or announced.rstrip("/") != issuer.rstrip("/"):
        raise OAuthError("the authorization server metadata names a different issuer")
    auth, token = metadata.get("authorization_endpoint"), metadata.get("token_endpoint")
    if not isinstance(auth, str) or not isinstance(token, str):
        raise OAuthError("the authorization server metadata lacks its endpoints")
    methods = metadata.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        raise OAuthError("the authorization server does not support PKCE with S256")
    return urljoin(url, auth), urljoin(url, token)


class Discovery:
    """Finds the endpoints for one MCP server (``guard.server_url``)."""

    def __init__(
        self, guard: DiscoveryGuard, resource: str, issuer: str | None, fetch: Fetch
    ) -> None:
        self._guard = guard
        self._resource = resource
        self._issuer = issuer
        self._fetch = fetch

    async def endpoints(self, client: httpx.AsyncClient, challenge: httpx.Response) -> Endpoints:
        """The endpoints, from the configured issuer or the server's resource metadata."""
        configured = self._issuer is not None
        issuer = self._issuer or await self._resource_issuer(client, challenge)
        url = server_metadata_url(issuer)
        what = "authorization server metadata URL"
        data = await self._json(client, url, what, configured=configured, last=True)
        auth, token = server_endpoints(url, data, issuer)
        await self._guard.check(auth, "authorization endpoint", configured=self._trusted(auth))
        await self._guard.check(token, "token endpoint", configured=self._trusted(token))
        own = configured and under_issuer(token, issuer)
        return Endpoints(auth, token, configured=self._trusted(token), own=own)

    def _trusted(self, endpoint: str) -> bool:
        """Whether an endpoint the issuer's metadata names is checked as configured: it is on
        the configured issuer's origin, or that issuer is itself on a private host. The
        metadata is the issuer's data: it does not open this host's network to a public one."""
        if self._issuer is None:
            return False
        return same_origin(endpoint, self._issuer) or private_host(self._issuer)

    async def _resource_issuer(self, client: httpx.AsyncClient, challenge: httpx.Response) -> str:
        found = _RESOURCE_METADATA.search(challenge.headers.get("www-authenticate", ""))
        candidates = [found.group(1)] if found else resource_metadata_urls(self._guard.server_url)
        for index, url in enumerate(candidates):
            last = index == len(candidates) - 1
            data = await self._json(
                client, url, "resource metadata URL", configured=False, last=last
            )
            if data is not None:
                return issuer_of(data, self._resource)
        raise OAuthError("the MCP server publishes no protected resource metadata")

    async def _json(
        self, client: httpx.AsyncClient, url: str, what: str, *, configured: bool, last: bool
    ) -> Any:
        """The JSON object at ``url``; None for a 404 when another place is left to try."""
        status, data = await self._fetch(client, url, what, configured=configured)
        if status == 404 and not last:
            return None
        if status != 200:
            raise OAuthError(f"OAuth discovery failed: {shown(url)} answered {status}")
        if not isinstance(data, dict):
            raise OAuthError(f"OAuth discovery failed: {shown(url)} is not a JSON object")
        return data
