"""A small MCP server for the integration tests, written with the official ``mcp`` SDK.

Usage: ``python echo_server.py stdio`` or ``python echo_server.py (sse|http) PORT``.
With ``ECHO_REQUIRED_TOKEN`` set, HTTP requests without that bearer token get a 401.
"""

from __future__ import annotations

import os
import sys
from typing import Any

try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
except ImportError:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server  # type: ignore[no-redef]

try:
    server: Any = Server("echo", host="127.0.0.1", log_level="WARNING")
except TypeError:  # mcp 2.x: the host is the app's concern
    server = Server("echo", log_level="WARNING")


try:
    from mcp.types import ToolAnnotations
except ImportError:  # an SDK without annotations: the tools are not marked
    ToolAnnotations = None  # type: ignore[assignment,misc]


def _marked(**hints: bool) -> Any:
    """Tool annotations with these hints (camelCase: every SDK version reads them)."""
    return None if ToolAnnotations is None else ToolAnnotations.model_validate(hints)


# echo and pid may be repeated after a broken connection (the client repeats only these)
@server.tool(annotations=_marked(idempotentHint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=_marked(readOnlyHint=True))
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def big(size: int) -> str:
    """A text of ``size`` characters."""
    return "z" * size


try:  # the SDK reports a ToolError's message to the client (other errors stay private)
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x reported any exception's message
    ToolError = ValueError  # type: ignore[assignment,misc]


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@server.tool(name="docs.search")
def docs_search(q: str) -> str:
    """A tool whose name has a dot."""
    return f"docs for {q}"


@server.tool(name="docs_search")
def docs_search_plain(q: str) -> str:
    """A tool whose name collides with docs.search after sanitizing."""
    return f"plain docs for {q}"


@server.tool(name="a" * 80)
def long_name() -> str:
    """A tool whose name is too long for providers."""
    return "long"


def _with_token(app: Any, token: str) -> Any:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    mode = sys.argv[1]
    if mode == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.sse_app() if mode == "sse" else server.streamable_http_app()
    token = os.environ.get("ECHO_REQUIRED_TOKEN")
    if token:
        app = _with_token(app, token)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
