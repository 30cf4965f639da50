"""An MCP server with large answers, written with the official ``mcp`` SDK.

Tools: ``text(size, log)`` (``size`` characters), ``image(size)`` (a PNG-typed image of ``size``
bytes), ``items(count, pad)`` (``count`` small text items); with ``LARGE_TOOLS=N`` in the
environment, ``N`` more tools ``tool_<i>`` are listed. Usage: ``python large_server.py`` (stdio)
or ``python large_server.py (sse|http) PORT``; over HTTP, ``LARGE_CHARSET=NAME`` names that
charset in the Content-Type of every answer.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ImageContent, TextContent

server = MCPServer("large", log_level="WARNING")


@server.tool()
async def text(size: int, ctx: Context, log: bool = False) -> list[TextContent]:
    """A text of ``size`` characters (with ``log``, after a log message: over HTTP, an event
    stream)."""
    if log:
        with warnings.catch_warnings():  # deprecated in 2026-07-28, still sent
            warnings.simplefilter("ignore")
            await ctx.info("writing")
    return [TextContent(type="text", text="z" * size)]


@server.tool()
def image(size: int) -> list[ImageContent]:
    """A PNG-typed image of ``size`` bytes (base64 on the wire)."""
    import base64

    data = base64.b64encode(b"\x89PNG" + b"\0" * max(0, size - 4)).decode()
    return [ImageContent(type="image", data=data, mime_type="image/png")]


@server.tool()
def items(count: int, pad: int = 0) -> list[TextContent]:
    """``count`` small text items (each ``pad`` characters longer)."""
    return [TextContent(type="text", text=f"item {i}" + "z" * pad) for i in range(count)]


def _numbered(i: int) -> None:
    def tool(x: int = 0) -> str:
        return f"{i}:{x}"

    tool.__doc__ = f"Numbered tool {i}."
    server.tool(name=f"tool_{i}")(tool)


for _i in range(int(os.environ.get("LARGE_TOOLS", "0"))):
    _numbered(_i)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.sse_app() if sys.argv[1] == "sse" else server.streamable_http_app()
    charset = os.environ.get("LARGE_CHARSET")
    app = _with_charset(app, charset) if charset else app
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


def _with_charset(app: Any, charset: str) -> Any:
    """``app`` whose responses name ``charset`` in their Content-Type (bodies unchanged)."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        async def send_named(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (key, value.split(b";")[0] + b"; charset=" + charset.encode())
                    if key.lower() == b"content-type"
                    else (key, value)
                    for key, value in message["headers"]
                ]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_named)

    return wrapped


if __name__ == "__main__":
    main()
