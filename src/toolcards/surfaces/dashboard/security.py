"""Response headers every dashboard page carries, and the Host check against DNS rebinding.

The Content-Security-Policy allows scripts, styles and connections from the dashboard's own
origin only: no inline script, no inline event handler, nothing from another site. A server
bound to a loopback address answers only requests addressed to a loopback host name, so a
web page on another site cannot reach it through a rebound DNS name.

A stranger's body is never read: :class:`BodyGate` answers a path outside the secret base
path, and a request with a body from no session, before a byte of the body is read (only the
sign-in form's is, up to its own small cap).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from toolcards.surfaces.http.limits import BodyLimit, HttpLimits, close_with

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["CSP", "HEADERS", "BodyGate", "SecurityHeaders", "host_name"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'; object-src 'none'"
)
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8765`` -> ``[::1]``)."""
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class SecurityHeaders:
    """ASGI middleware: the headers above on every response; ``no-store`` on all but static
    assets (under ``base_path``: the app's, told to whoever serves it); requests for other
    host names refused (when ``allowed_hosts`` is given)."""

    def __init__(
        self, app: ASGIApp, allowed_hosts: Iterable[str] | None = None, base_path: str = ""
    ) -> None:
        self.app = app
        self.allowed = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.base_path = base_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.allowed is not None:
            host = ""
            for key, value in scope.get("headers") or ():
                if key == b"host":
                    host = host_name(bytes(value).decode("latin-1").lower())
            if host not in self.allowed:
                await _refuse(send)
                return
        static = str(scope.get("path", "")).startswith(self.base_path + "/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or ())
                headers.extend(HEADERS)
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class BodyGate:
    """ASGI middleware in front of :class:`BodyLimit`: which requests' bodies are read at all,
    judged from the path and the session cookie before any byte of the body.

    Outside ``base_path``: 404 (the path of a dashboard is its first secret). Inside, a body
    is read only for a request that ``signed_in`` says has a session (up to ``limits``), or
    for the sign-in POST to ``sign_in`` (up to ``form_cap``: 413 for a longer announced
    length, a chunked body cut there); any other gets 401. A refusal closes the connection,
    so the rest of the body is never read, as this request's or as a next one."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limits: HttpLimits,
        base_path: str,
        sign_in: str,
        form_cap: int,
        signed_in: Callable[[Scope], bool],
    ) -> None:
        self.app = app
        self.base_path, self.sign_in, self.signed_in = base_path, sign_in, signed_in
        self.member = BodyLimit(app, limits)
        small = limits.model_copy(update={"max_body": min(form_cap, limits.max_body)})
        self.stranger = BodyLimit(app, small, cap_name="the sign-in form's limit")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if path != self.base_path and not path.startswith(self.base_path + "/"):
            await close_with(send, 404, "Not Found")
        elif not _has_body(scope) or self.signed_in(scope):
            await self.member(scope, receive, send)
        elif scope.get("method") == "POST" and path == self.sign_in:
            await self.stranger(scope, receive, send)
        else:
            await close_with(send, 401, "sign in first")


def _has_body(scope: Scope) -> bool:
    """Whether the request announces a body (chunked, or a Content-Length other than 0)."""
    for key, value in scope.get("headers") or ():
        name = bytes(key).lower()
        if name == b"transfer-encoding" or (name == b"content-length" and bytes(value) != b"0"):
            return True
    return False


async def _refuse(send: Send) -> None:
    body = b"unexpected Host header\n"
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
