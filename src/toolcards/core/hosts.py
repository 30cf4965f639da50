"""Which hosts are internal: the one rule the load-time trust check (``core.trust``) and the
fetch-time SSRF guard (``tools._common.url_guard``) share, so neither lets through what the
other refuses."""

from __future__ import annotations

import ipaddress

METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata", "metadata.azure.com", "instance-data"}
)
"""Cloud metadata service names: internal whatever a resolver answers for them."""
_PRIVATE = "a private address"
_LOOPBACK = "a loopback address"
_LINK_LOCAL = "a link-local (metadata) address"
_NOT_ROUTED = "a non-routable address"
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_SPECIAL: tuple[tuple[_Network, str], ...] = tuple(
    (ipaddress.ip_network(net), reason)
    for net, reason in (
        # IANA IPv4 special-purpose address registry (and multicast, class E)
        ("0.0.0.0/8", _NOT_ROUTED),  # "this network": 0.0.0.0 reaches the host itself
        ("10.0.0.0/8", _PRIVATE),
        ("100.64.0.0/10", _PRIVATE),  # carrier-grade NAT
        ("127.0.0.0/8", _LOOPBACK),
        ("169.254.0.0/16", _LINK_LOCAL),
        ("172.16.0.0/12", _PRIVATE),
        ("192.0.0.0/24", _NOT_ROUTED),  # IETF protocol assignments
        ("192.0.2.0/24", _NOT_ROUTED),  # documentation
        ("192.88.99.0/24", _NOT_ROUTED),  # 6to4 relay anycast (deprecated)
        ("192.168.0.0/16", _PRIVATE),
        ("198.18.0.0/15", _NOT_ROUTED),  # benchmarking
        ("198.51.100.0/24", _NOT_ROUTED),  # documentation
        ("203.0.113.0/24", _NOT_ROUTED),  # documentation
        ("224.0.0.0/4", _NOT_ROUTED),  # multicast
        ("240.0.0.0/4", _NOT_ROUTED),  # reserved, and the broadcast address
        # IANA IPv6 special-purpose address registry (embedded IPv4 is checked first)
        ("::1/128", _LOOPBACK),
        ("64:ff9b:1::/48", _PRIVATE),  # local-use NAT64
        ("::/8", _NOT_ROUTED),  # unspecified, IPv4-compatible and -translated forms
        ("100::/8", _NOT_ROUTED),  # discard-only and dummy prefixes
        ("2001::/23", _NOT_ROUTED),  # IETF protocol assignments: Teredo, benchmarking, ORCHID
        ("2001:db8::/32", _NOT_ROUTED),  # documentation
        ("3fff::/20", _NOT_ROUTED),  # documentation
        ("5f00::/16", _NOT_ROUTED),  # segment routing identifiers
        ("fc00::/7", _PRIVATE),  # unique local, the AWS metadata address fd00:ec2::254 too
        ("fe80::/10", _LINK_LOCAL),
        ("fec0::/10", _PRIVATE),  # site-local (deprecated, still routed inside sites)
        ("ff00::/8", _NOT_ROUTED),  # multicast
    )
)
"""Ranges never contacted: every block of IANA's special-purpose registries that is not
globally reachable (the few global anycast services inside them are refused too)."""
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
"""Well-known NAT64 prefix: the last 32 bits are an IPv4 address."""


def internal_name(host: str) -> bool:
    """True when the host name ``host`` (ASCII, lower case) is internal before any lookup: a
    cloud metadata name, ``localhost`` or a name under ``.localhost``."""
    return host in METADATA_HOSTS or host == "localhost" or host.endswith(".localhost")


def blocked_reason(address: str) -> str | None:
    """Why ``address`` must not be contacted, or None when it is a public address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour
        if mapped is None and ip in _NAT64:
            mapped = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if mapped is not None:
            return blocked_reason(str(mapped))
    for net, reason in _SPECIAL:
        if ip in net:
            return reason
    # what this Python's ipaddress also knows (it grows with the registries)
    if ip.is_loopback:
        return _LOOPBACK
    if ip.is_link_local:
        return _LINK_LOCAL
    if ip.is_private:
        return _PRIVATE
    if ip.is_unspecified or ip.is_multicast or ip.is_reserved:
        return _NOT_ROUTED
    return None
