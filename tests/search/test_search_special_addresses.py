"""The SSRF guard against IANA's special-purpose address registries, and host names that
only the connection used to reject.

A redirect to the deprecated site-local range (``fec0::/10``) used to be followed; with
``allow_private=True``, ``http://xn--/`` raised ``idna.IDNAError`` out of ``web_fetch``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from toolcards import RetriableError
from toolcards.core.hosts import blocked_reason
from toolcards.core.trust import private_host
from toolcards.tools.search import SearchTool, WebFetch

SPECIAL = [
    "fec0::1",  # site-local, deprecated (was let through)
    "feff::1",
    "3fff::1",  # documentation (was let through)
    "192.88.99.1",  # 6to4 relay anycast, deprecated (was let through)
    "192.0.0.9",  # inside 192.0.0.0/24 (was let through)
    "0.1.2.3",
    "100.64.0.1",
    "192.0.0.8",
    "198.18.0.1",
    "198.51.100.7",
    "240.0.0.1",
    "255.255.255.255",
    "::ffff:10.0.0.1",  # IPv4-mapped
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b:1::1",  # local-use NAT64
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2001::1",  # Teredo
    "2001:2::1",  # benchmarking
    "2001:db8::1",
    "100::1",  # discard-only
    "5f00::1",
    "fd00:ec2::254",
    "::",
]
PUBLIC = ["93.184.216.34", "2606:4700::1111", "2002:808:808::1", "64:ff9b::808:808"]
BAD_A_LABELS = ["http://xn--/", "http://xn--zz.example/", "http://a.xn--a.example/"]


def _web_fetch(card: SearchTool) -> Callable[..., Any]:
    return {fn.__name__: fn for fn in card.get_tools()}["web_fetch"]


def _redirecting_card(location: str, hops: list[str]) -> SearchTool:
    """A direct-fetch card whose public page redirects to ``location`` (hops recorded)."""

    def redirect(request: httpx.Request) -> httpx.Response:
        hops.append(str(request.url))
        return httpx.Response(302, headers={"location": location})

    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    card = SearchTool(api_key=SecretStr("k"), web_fetch=WebFetch(backend="direct"))
    card._transport = httpx.MockTransport(redirect)
    card._resolver = resolver
    return card


@pytest.mark.parametrize("address", SPECIAL)
def test_a_redirect_to_a_special_purpose_address_is_refused(address: str) -> None:
    hops: list[str] = []
    host = f"[{address}]" if ":" in address else address
    card = _redirecting_card(f"http://{host}/admin", hops)
    with pytest.raises(RetriableError, match=r"^refused: .* is a (private|non-routable) "):
        asyncio.run(_web_fetch(card)("http://example.com/"))
    assert hops == ["http://93.184.216.34/"]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_and_their_6to4_and_nat64_forms_pass(address: str) -> None:
    assert blocked_reason(address) is None


@pytest.mark.parametrize("address", SPECIAL + PUBLIC)
def test_a_card_from_data_needs_trust_for_exactly_the_addresses_the_guard_refuses(
    address: str,
) -> None:
    """The load-time check (a private host needs ``HostTrust``) and this guard share one rule."""
    host = f"[{address}]" if ":" in address else address
    assert private_host(f"http://{host}/") is (blocked_reason(address) is not None)


@pytest.mark.parametrize("url", BAD_A_LABELS)
def test_a_bad_a_label_is_a_retry_even_with_private_addresses_allowed(url: str) -> None:
    """The real transport: the error came from encoding the host when connecting."""
    card = SearchTool(
        api_key=SecretStr("k"), web_fetch=WebFetch(backend="direct"), allow_private=True
    )
    with pytest.raises(RetriableError, match="invalid international label"):
        asyncio.run(_web_fetch(card)(url))


def test_a_valid_a_label_is_fetched() -> None:
    hosts: list[str] = []

    def page(request: httpx.Request) -> httpx.Response:
        hosts.append(request.headers["host"])
        return httpx.Response(200, text="hello", headers={"content-type": "text/plain"})

    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    card = SearchTool(api_key=SecretStr("k"), web_fetch=WebFetch(backend="direct"))
    card._transport = httpx.MockTransport(page)
    card._resolver = resolver
    assert "hello" in asyncio.run(_web_fetch(card)("http://xn--bcher-kva.example/"))
    assert hosts == ["xn--bcher-kva.example"]
