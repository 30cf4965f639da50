"""The connection-level bounds of the HTTP surfaces, under uvicorn.

uvicorn has no deadline for request headers (``timeout_keep_alive`` runs only between
requests, never while a request's first bytes trickle in) and no bound on connections per
address. :func:`guarded_protocol` adds both to its HTTP protocol: the headers of a request
must be complete within ``header_timeout`` seconds of the connection (or of the previous
answer), else the connection is answered 408 and closed; an address holding ``per_client``
connections has its next one answered 429, half-closed, and read (its request dropped) until
its client closes it or ``header_timeout`` passes: closed with a request unread, it would be
reset, and a client may then lose the answer (the TCP reset problem of RFC 9112, 9.6); at most
``per_client`` refused connections of an address are kept so, one more is closed at once. A
stopping server drops at once the connections whose request is still arriving (uvicorn would
wait for them), and a connection made once it began stopping (accepted a moment before the
listening socket closed, it would hold the shutdown until its deadline:
:class:`toolcards.surfaces.http.server.GuardedServer` marks the protocol ``stopping`` first).
:func:`server_config` is the uvicorn configuration every HTTP surface runs with: that
protocol, a shutdown that cancels what still runs after ``shutdown_timeout`` seconds, and
client addresses taken from the socket (``X-Forwarded-For`` is not believed: it would let
one client pose as many).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolcards.surfaces.http.limits import HttpLimits


def _answer(status: int, reason: str, message: str) -> bytes:
    body = f"{message}\n".encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _leave(counts: Counter[str], address: str | None) -> None:
    """One connection of ``address`` fewer in ``counts`` (an address left with none is
    forgotten); nothing for None."""
    if address is not None:
        counts[address] -= 1
        if counts[address] <= 0:
            del counts[address]


def guarded_protocol(limits: HttpLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header deadline and a per-address connection cap (the
    count is shared by the connections of the class returned)."""
    open_by_address: Counter[str] = Counter()
    refused_by_address: Counter[str] = Counter()
    too_slow = _answer(408, "Request Timeout", "the request headers took too long")
    too_many = _answer(429, "Too Many Requests", "too many open connections from this address")

    class GuardedH11Protocol(H11Protocol):
        stopping = False
        """Set when the server begins stopping: a connection made after is closed at once."""
        _address: str | None = None
        _deadline: asyncio.TimerHandle | None = None
        _served: object = None
        """The request cycle answered last: headers are awaited while ``cycle`` is it."""
        _refused: str | None = None
        """The address of a connection answered 429 and read until its client closes it."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if type(self).stopping:
                transport.close()
                return
            address = self.client[0] if self.client else None
            if address is not None:
                if open_by_address[address] >= limits.per_client:
                    self._refuse(transport, address)
                    return
                open_by_address[address] += 1
                self._address = address
            self._arm()

        def _refuse(self, transport: asyncio.Transport, address: str) -> None:
            transport.write(too_many)
            if refused_by_address[address] >= limits.per_client or not transport.can_write_eof():
                transport.close()
                return
            transport.write_eof()
            refused_by_address[address] += 1
            self._refused = address
            self._deadline = self.loop.call_later(limits.header_timeout, transport.close)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            _leave(refused_by_address, self._refused)
            _leave(open_by_address, self._address)
            self._refused = self._address = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused is not None:
                return  # answered 429: what it sends is dropped
            super().data_received(data)
            if self._deadline is not None and self.cycle is not self._served:
                self._disarm()  # the headers are in; the body has its own deadline

        def eof_received(self) -> None:
            if self._refused is not None:
                self.transport.close()  # its client is done: nothing is left unread
                return
            super().eof_received()

        def shutdown(self) -> None:
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not cycle.response_started:
                self.transport.close()  # its request is still arriving: nothing to finish
                return
            super().shutdown()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:  # no pipelined request
                self._served = self.cycle
                self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(limits.header_timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self.cycle is self._served and not self.transport.is_closing():
                self.transport.write(too_slow)
                self.transport.close()

    return GuardedH11Protocol


def server_config(app: Any, host: str, port: int, limits: HttpLimits | None = None) -> Any:
    """The ``uvicorn.Config`` of an HTTP surface serving ``app`` on ``host:port``."""
    limits = limits or HttpLimits()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=guarded_protocol(limits),
        # no surface speaks WebSocket: an upgrade handed the connection to another protocol,
        # which never gave back the address's count (64 of them locked the address out)
        ws="none",
        proxy_headers=False,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=math.ceil(limits.shutdown_timeout),
    )
