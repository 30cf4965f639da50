"""The default consent step of MCP OAuth: open the authorization URL, wait for the redirect on
a loopback listener.

Anyone on the host (or a page in the user's browser) can send requests to the listener. Only
the redirect that carries the ``state`` of the authorization URL ends the wait; any other
request on the callback path is answered 400 and ignored, so a stray
``GET /callback?state=forged`` cannot abort the flow. The wait ends at the flow's deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from toolcards.tools.mcp.oauth_urls import OAuthError, is_loopback

AuthorizationHandler = Callable[[str], Awaitable[str]]
"""Takes the authorization URL the user must visit; returns the redirect URL with the code."""

_READ_SECONDS = 10.0
"""Longest wait for the request line of one connection to the listener."""


def _state_of(url: str) -> str | None:
    values = parse_qs(urlsplit(url).query).get("state")
    return values[0] if values else None


def _answer(target: str, path: str, state: str | None) -> tuple[bytes, bytes, bool]:
    """(status, body, whether this is the redirect awaited) for a request to ``target``."""
    if urlsplit(target).path != path:
        return b"404 Not Found", b"no", False
    if state is not None and _state_of(target) != state:
        return b"400 Bad Request", b"This is not the authorization this client waits for.", False
    return b"200 OK", b"Authorization received; you can close this window.", True


def loopback_handler(redirect_uri: str, *, open_browser: bool = True) -> AuthorizationHandler:
    """A handler that opens the authorization URL in a browser (or prints it) and waits for
    the redirect on ``redirect_uri``, which must be an http URL on a loopback host. The wait
    ends with the redirect carrying the authorization URL's ``state``; others get 400."""
    parts = urlsplit(redirect_uri)
    if parts.scheme != "http" or not is_loopback(parts.hostname or "") or not parts.port:
        raise OAuthError("a loopback redirect_uri looks like http://127.0.0.1:PORT/callback")
    host, port, path = parts.hostname or "127.0.0.1", parts.port, parts.path or "/"

    async def handle(url: str) -> str:
        got: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        state = _state_of(url)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = (await asyncio.wait_for(reader.readline(), _READ_SECONDS)).decode("latin-1")
                target = line.split(" ")[1] if line.count(" ") >= 2 else ""
                status, body, awaited = _answer(target, path, state)
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\n")
                writer.write(b"Connection: close\r\n\r\n" + body)
                await writer.drain()
                if awaited and not got.done():
                    got.set_result(f"http://{parts.netloc}{target}")
            except (OSError, TimeoutError, IndexError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, host, port)
        try:
            if open_browser:
                import webbrowser  # lazy: webbrowser; only an interactive sign-in opens one

                if not webbrowser.open(url):
                    print(f"Open this URL to authorize the MCP server:\n{url}")
            else:
                print(f"Open this URL to authorize the MCP server:\n{url}")
            return await got
        finally:
            server.close()
            await server.wait_closed()

    return handle
