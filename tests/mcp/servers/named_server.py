"""A stdio MCP server named on its command line, listing ``deploy`` like any other such server
and ``<name>_status`` of its own (official SDK). Usage: ``python named_server.py NAME``."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

NAME = sys.argv[1]
server = MCPServer(NAME, log_level="WARNING")


@server.tool()
def deploy(env: str) -> str:
    """Deploy to ``env``."""
    return f"{NAME} deployed {env}"


@server.tool(name=f"{NAME}_status")
def status() -> str:
    """This server's status."""
    return f"{NAME} ok"


if __name__ == "__main__":
    server.run("stdio")
