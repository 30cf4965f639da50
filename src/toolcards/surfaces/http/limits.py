"""Bounds on what an HTTP client may make the server hold: the body of one request, the time
it may take to send it, the connections of one address, and how long a stopping server waits.

``HttpLimits`` is the ``http:`` key of the surfaces config; :class:`BodyLimit` is the ASGI
middleware in front of the MCP endpoint and the dashboard. A request whose
``Content-Length`` is over ``max_body`` gets 413 before a byte of its body is read; a body
sent in chunks is read up to the cap and then refused the same way; a body not complete
within ``body_timeout`` seconds gets 408. Both answers close the connection. The
connection-level bounds (request headers in time, connections per address) are
:mod:`toolcards.surfaces.http.guard`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 4 * 1024 * 1024
"""Default cap on one request body (4 MiB)."""


class HttpLimits(BaseModel):
    """What one HTTP client may make a server hold (``http:`` in the surfaces config)."""

    model_config = ConfigDict(extra="forbid")

    max_body: int = Field(default=MAX_BODY, ge=1024)
    """Bytes of one request body; a longer one gets 413 (refused by ``Content-Length``, or
    once that many bytes of a chunked body arrived)."""
    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds from a connection (or its previous answer) until the request's headers are
    complete; then the connection is closed (408)."""
    body_timeout: float = Field(default=15.0, gt=0)
    """Seconds for the whole body of a request once its headers arrived; then 408."""
    per_client: int = Field(default=64, ge=1)
    """Open connections of one client address; one more is answered 429 (and read until its
    client closes it, at most ``header_timeout``: see :mod:`toolcards.surfaces.http.guard`)."""
    shutdown_timeout: float = Field(default=3.0, ge=0)
    """Seconds a stopping server (SIGTERM) waits for running requests before cancelling
    them."""


class BodyLimit:
    """ASGI middleware: the request body, read whole (at most ``max_body`` bytes, within
    ``body_timeout`` seconds) before ``app`` runs, which then receives it in one message.
    ``cap_name`` is what the 413 answer names as the cap."""

    def __init__(
        self,
        app: ASGIApp,
        limits: HttpLimits | None = None,
        cap_name: str = "the server's http.max_body",
    ) -> None:
        self.app = app
        self.limits = limits or HttpLimits()
        self.cap_name = cap_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        chunked = "chunked" in (_header(scope, b"transfer-encoding") or "").lower()
        if length is None and not chunked:  # no body
            await self.app(scope, receive, send)
            return
        if length is not None and not self._fits(length):
            await self._too_large(send)
            return
        body = await self._read(receive, send)
        if body is not None:
            await self.app(scope, replaying(body, receive), send)

    def _fits(self, length: str) -> bool:
        return length.isdigit() and len(length) < 19 and int(length) <= self.limits.max_body

    async def _read(self, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once the client was answered (or left)."""
        import anyio  # lazy: anyio; a CLI loads this module and never serves

        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.limits.body_timeout) as waited:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > self.limits.max_body:
                    await self._too_large(send)
                    return None
                chunks.append(chunk)
                if not message.get("more_body"):
                    break
        if waited.cancelled_caught:
            seconds = f"{self.limits.body_timeout:g}"
            await close_with(send, 408, f"the request body took longer than {seconds} s")
            return None
        return b"".join(chunks)

    async def _too_large(self, send: Send) -> None:
        cap = self.limits.max_body
        await close_with(send, 413, f"request body over {cap} bytes ({self.cap_name})")


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` (complete) first, then what ``receive`` gives (the
    client's disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def close_with(send: Send, status: int, message: str) -> None:
    """A plain-text answer that ends the connection (the rest of the request is not read)."""
    body = f"{message}\n".encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None
