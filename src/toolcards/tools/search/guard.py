"""URL guard: refuses URLs that would reach private, loopback, link-local or metadata hosts."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves a host name and port to the IP addresses a connection could use."""

_METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata", "metadata.azure.com", "instance-data"}
)
_EXTRA_BLOCKED = (
    ipaddress.ip_network("100.64.0.0/10"),  # carrier-grade NAT
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS metadata over IPv6
)


class URLRefused(ValueError):
    """The URL is not allowed; the message says why (safe to show to a model)."""


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6), via the system resolver."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def blocked_reason(address: str) -> str | None:
    """Why ``address`` must not be contacted, or None when it is a public address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour
        if mapped is not None:
            return blocked_reason(str(mapped))
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local (metadata) address"
    if ip.is_private or any(ip in net for net in _EXTRA_BLOCKED):
        return "a private address"
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved:
        return "a non-routable address"
    return None


def parse_http_url(url: str) -> tuple[str, int]:
    """The host and port of an http(s) URL; URLRefused for other schemes or credentials."""
    if not isinstance(url, str) or not url.strip():
        raise URLRefused("the URL is empty")
    if any(ch.isspace() or ord(ch) < 32 for ch in url.strip()):
        raise URLRefused("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise URLRefused(f"the URL is malformed ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise URLRefused(f"only http and https URLs are allowed, not {scheme or 'no scheme'!r}")
    if parts.username is not None or parts.password is not None:
        raise URLRefused("URLs with credentials (user:password@) are not allowed")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise URLRefused("the URL has no host")
    return host, port or (443 if scheme == "https" else 80)


async def check_url(url: str, resolver: Resolver = system_resolver) -> list[str]:
    """The public addresses the URL's host resolves to; URLRefused if any is not public."""
    host, port = parse_http_url(url)
    if host in _METADATA_HOSTS or host == "localhost" or host.endswith(".localhost"):
        raise URLRefused(f"refused: {host} is an internal host")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = await resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise URLRefused(f"cannot resolve {host}: {exc}") from None
        if not addresses:
            raise URLRefused(f"cannot resolve {host}: no addresses")
    for address in addresses:
        reason = blocked_reason(address)
        if reason is not None:
            raise URLRefused(f"refused: {host} resolves to {address}, {reason}")
    return addresses
