"""An MCP server with large answers, written with the official ``mcp`` SDK.

Tools: ``text(size)`` (``size`` characters), ``image(size)`` (a PNG-typed image of ``size``
bytes), ``items(count)`` (``count`` small text items); with ``LARGE_TOOLS=N`` in the
environment, ``N`` more tools ``tool_<i>`` are listed. Usage: ``python large_server.py`` (stdio)
or ``python large_server.py (sse|http) PORT``.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, TextContent

server = MCPServer("large", log_level="WARNING")


@server.tool()
def text(size: int) -> list[TextContent]:
    """A text of ``size`` characters."""
    return [TextContent(type="text", text="z" * size)]


@server.tool()
def image(size: int) -> list[ImageContent]:
    """A PNG-typed image of ``size`` bytes (base64 on the wire)."""
    import base64

    data = base64.b64encode(b"\x89PNG" + b"\0" * max(0, size - 4)).decode()
    return [ImageContent(type="image", data=data, mime_type="image/png")]


@server.tool()
def items(count: int) -> list[TextContent]:
    """``count`` small text items."""
    return [TextContent(type="text", text=f"item {i}") for i in range(count)]


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
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
