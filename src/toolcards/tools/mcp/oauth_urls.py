"""URL rules of the MCP OAuth client: which resource a token is for, where it may be sent,
and which discovery URLs may be contacted.

A hostile MCP server chooses every URL of the discovery (its ``resource_metadata``, the
authorization servers it names, their endpoints). Those URLs go through the same SSRF guard
as ``web_fetch`` (``tools/_common/url_guard``): https only, and never a loopback, private or
link-local address, unless the MCP server itself is on a loopback host (then plain http on a
loopback host is allowed too). URLs the card configures are the user's choice: they only need
https, or http on a loopback host.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from toolcards.core.errors import ToolcardsError
from toolcards.tools._common.url_guard import CheckedURL, Resolver, check_url, system_resolver
from toolcards.tools._common.urls import URLRefused

_DEFAULT_PORTS = {"http": 80, "https": 443}


class OAuthError(ToolcardsError, RuntimeError):
    """The authorization flow failed; the message never contains a token."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def shown(url: str) -> str:
    """``url`` cut for an error message."""
    return repr(url if len(url) <= 200 else url[:200] + "...")


def require_secure(url: str, what: str) -> str:
    """``url`` when it is https, or http on a loopback host; else OAuthError."""
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname or "")):
        return url
    raise OAuthError(f"the {what} must use https (or http on a loopback host): {shown(url)}")


def canonical_resource(url: str) -> str:
    """The canonical URI of a server (RFC 8707, MCP): lower-case scheme and host, no default
    port, no fragment, no trailing slash."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OAuthError(f"not a usable server URL: {shown(url)}") from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise OAuthError(f"not a usable server URL: {shown(url)}")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    query = f"?{parts.query}" if parts.query else ""
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}{query}"


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` in canonical form."""
    parts = urlsplit(canonical_resource(url))
    return f"{parts.scheme}://{parts.netloc}"


def same_origin(url: str, other: str) -> bool:
    """Whether both URLs have the same scheme, host and port (False when one is unusable)."""
    try:
        return origin(url) == origin(other)
    except OAuthError:
        return False


def resource_for(server_url: str, configured: str | None = None) -> str:
    """The resource indicator to request: the MCP server's canonical URL, or the configured
    one when it names the same server (same origin, a parent path of the server's URL)."""
    server = canonical_resource(server_url)
    if configured is None:
        return server
    wanted = canonical_resource(configured)
    if origin(wanted) != origin(server) or not (
        server == wanted or server.startswith(wanted.rstrip("/") + "/")
    ):
        raise OAuthError(
            "the oauth resource must be the MCP server's URL or a parent path of it on the "
            f"same origin, not {shown(configured)}"
        )
    return wanted


@dataclass
class DiscoveryGuard:
    """Decides whether a discovery or token URL may be contacted, for one MCP server."""

    server_url: str
    resolver: Resolver = field(default=system_resolver)

    @property
    def local(self) -> bool:
        """Whether the MCP server is on a loopback host (its discovery may stay there)."""
        return is_loopback(urlsplit(self.server_url).hostname or "")

    async def check(self, url: str, what: str, *, configured: bool = False) -> CheckedURL:
        """``url`` in canonical form with the addresses to connect to (empty when nothing was
        resolved); OAuthError when it must not be contacted. ``configured``: the card names
        it (only https, or http on a loopback host, is required). A URL on the MCP server's
        own origin is not checked for private addresses (the client connects there anyway)."""
        scheme = urlsplit(url).scheme.lower()
        if configured:
            require_secure(url, what)
        elif scheme != "https" and not (scheme == "http" and self.local):
            rule = "" if self.local else "; plain http only for an MCP server on a loopback host"
            raise OAuthError(f"the {what} must use https{rule}: {shown(url)}")
        try:
            private = configured or self.local or same_origin(url, self.server_url)
            checked = await check_url(url, self.resolver, allow_private=private)
        except URLRefused as exc:
            raise OAuthError(f"the {what} {shown(url)} is refused ({exc})") from None
        if scheme == "http" and not is_loopback(checked.parsed.host):
            raise OAuthError(
                f"the {what} must use https (or http on a loopback host): {shown(url)}"
            )
        return checked
