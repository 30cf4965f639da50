"""A stdio MCP server reporting the environment it was started with (`python env_server.py`)."""

from __future__ import annotations

import json
import os
from typing import Any

try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
except ImportError:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server  # type: ignore[no-redef]

server: Any = Server("env", log_level="WARNING")


@server.tool()
def environment() -> str:
    """The server process's environment as a JSON object."""
    return json.dumps(dict(os.environ))


if __name__ == "__main__":
    server.run("stdio")
