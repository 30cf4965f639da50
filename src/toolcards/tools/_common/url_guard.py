"""URL guard: refuses URLs that would reach private, loopback, link-local or metadata hosts."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from toolcards.core.hosts import blocked_reason, internal_name
from toolcards.tools._common.urls import ParsedURL, URLRefused, normalize_url

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves a host name and port to the IP addresses a connection could use."""


@dataclass(frozen=True)
class CheckedURL:
    """A URL that passed the guard: its canonical form and the addresses that were checked."""

    parsed: ParsedURL
    addresses: list[str]

    @property
    def url(self) -> str:
        """The canonical URL: send this, not the text the model wrote."""
        return self.parsed.url


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6), via the system resolver."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


async def check_url(
    url: object, resolver: Resolver = system_resolver, *, allow_private: bool = False
) -> CheckedURL:
    """``url`` in canonical form with the public addresses its host resolves to; URLRefused
    when it is malformed or (unless ``allow_private``) any of its addresses is not public.
    With ``allow_private`` nothing is resolved and ``addresses`` is empty."""
    parsed = normalize_url(url)
    if allow_private:
        return CheckedURL(parsed, [])
    host = parsed.host
    if internal_name(host):
        raise URLRefused(f"refused: {host} is an internal host")
    if parsed.address is not None:
        reason = blocked_reason(host)
        if reason is not None:
            raise URLRefused(f"refused: {host} is {reason}")
        return CheckedURL(parsed, [host])
    try:
        addresses = await resolver(host, parsed.port)
    except (OSError, UnicodeError, ValueError) as exc:
        raise URLRefused(f"cannot resolve {host}: {exc}") from None
    if not addresses:
        raise URLRefused(f"cannot resolve {host}: no addresses")
    for address in addresses:
        reason = blocked_reason(address)
        if reason is not None:
            raise URLRefused(f"refused: {host} resolves to {address}, {reason}")
    return CheckedURL(parsed, addresses)


class Pinnable(Protocol):
    """An httpx (or httpx2) request: what :func:`pinned` changes."""

    url: Any
    extensions: Any


RequestT = TypeVar("RequestT", bound=Pinnable)


def pinned(request: RequestT, address: str) -> RequestT:
    """``request`` sent to the checked ``address`` (no second DNS lookup that could answer
    differently), with the original host in the Host header and for TLS (SNI, certificate)."""
    host = request.url.host
    if host == address:
        return request
    request.url = request.url.copy_with(host=address)
    request.extensions = {**request.extensions, "sni_hostname": host}
    return request
