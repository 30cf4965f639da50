"""The listening socket of an HTTP surface, bound before anything says it serves there: a
port that is taken ends the command in one line naming the port and ``--port``.

``serve`` and ``dashboard`` default to different ports, so both can run as the docs show.
Whether only this machine reaches a server, and by which names, is told here once, for both
(:func:`local_names`), from the address bound, not the name given.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any

from toolcards.core.errors import ToolcardsError

__all__ = [
    "DASHBOARD_PORT",
    "LOOPBACK_NAMES",
    "MCP_PORT",
    "PortUnavailable",
    "bound_address",
    "is_loopback",
    "listen",
    "local_names",
    "loopback_names",
    "url_host",
]

MCP_PORT = 8765
"""``toolcards serve --transport http`` (MCP at ``http://127.0.0.1:8765/mcp``)."""
DASHBOARD_PORT = 8766
"""``toolcards dashboard`` (the page at ``http://127.0.0.1:8766/``)."""


BACKLOG = 2048
"""Connections the kernel queues until the server accepts them (uvicorn's own default)."""


class PortUnavailable(ToolcardsError, OSError):
    """The address cannot be listened on; the message is one line for the user."""


def url_host(host: str) -> str:
    """``host`` as it goes in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""The names of this machine a request may address a loopback server by (as in ``Host``)."""


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from this machine only: ``localhost``
    or a loopback address (all of 127.0.0.0/8, in any spelling the socket takes, also mapped
    into IPv6 as ``::ffff:127.0.0.1``, and ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        found = socket.getaddrinfo(host.strip("[]"), None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return False
    return all(_unmapped(ipaddress.ip_address(info[4][0])).is_loopback for info in found)


def _unmapped(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """``ip``, or the IPv4 address an IPv6 one maps (``::ffff:127.0.0.1`` is not loopback to
    the ipaddress module of Python 3.11, yet only this machine reaches a socket bound to it)."""
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


def loopback_names(host: str) -> tuple[str, ...]:
    """The names a request may address a server bound to loopback ``host`` by (its ``Host``
    header, its ``Origin``): :data:`LOOPBACK_NAMES` and ``host`` itself (127.0.0.2, say)."""
    own = url_host(host.strip("[]")).lower()
    return LOOPBACK_NAMES if own in LOOPBACK_NAMES else (*LOOPBACK_NAMES, own)


def bound_address(host: str) -> str:
    """The address :func:`listen` binds for ``host`` (its socket's ``getsockname()[0]``), or
    ``host`` when it does not resolve: who reaches the server is told from this, not from the
    name given (``--host $(hostname)`` binds 127.0.1.1 on Debian, 127.0.0.1 on others)."""
    try:
        return str(_address(host, 0)[1][0])
    except (socket.gaierror, UnicodeError):
        return host


def local_names(host: str) -> tuple[str, ...] | None:
    """The names a request may address a server given ``host`` by (its ``Host`` header, its
    ``Origin``) when only this machine reaches it: :data:`LOOPBACK_NAMES`, ``host`` and the
    address it binds; refusing others stops a page whose DNS name is rebound to this machine.
    None when it binds an address others reach (no check: the server warns instead)."""
    bound = bound_address(host)
    if not (is_loopback(host) or is_loopback(bound)):
        return None
    return tuple(dict.fromkeys((*loopback_names(bound), *loopback_names(host))))


def _address(host: str, port: int) -> tuple[socket.AddressFamily, Any]:
    """The family and socket address ``host:port`` resolves to first: what :func:`listen`
    binds (the socket address, not the name again, so :func:`bound_address` is its own)."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return family, address


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (0: any free port), ready to hand to uvicorn: a
    client may connect as soon as the command says it serves, before uvicorn has started.

    It is made as a TCP socket by name (``IPPROTO_TCP``, not 0): asyncio turns Nagle's
    algorithm off only on connections accepted from such a socket, and uvicorn writes a
    response's head and body apart, so with it on each response waited for the client's
    delayed ACK (about 40 ms on Linux)."""
    try:
        family, address = _address(host, port)
    except (socket.gaierror, UnicodeError):
        raise PortUnavailable(f"cannot listen on {host}: no such address (see --host)") from None
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)  # a client that connects once "serving" is printed waits here
    except OSError as exc:
        sock.close()
        where = f"{url_host(host)}:{port}"
        if exc.errno == errno.EADDRINUSE:
            why = f"port {port} is in use on {host}; choose another with --port"
        elif exc.errno == errno.EACCES:
            why = f"no permission to listen on {where}; choose a port above 1023 with --port"
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = f"{host} is not an address of this machine (see --host)"
        else:
            why = f"cannot listen on {where}: {exc.strerror or exc}"
        raise PortUnavailable(why) from None
    return sock
