"""A stdio MCP server whose tools drop the connection (official SDK).

Usage: ``python dying_server.py EFFECTS_FILE``. ``pay`` writes its effect to the file, then
exits before it answers; ``balance`` (read-only) exits the first time it is called, and
answers from then on. Each call is a line of the file, so a test counts what ran.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import mcp.types as types
from mcp.server.mcpserver import MCPServer

warnings.simplefilter("ignore")
server = MCPServer("dying", log_level="WARNING")
EFFECTS = Path(sys.argv[1])


def _record(line: str) -> int:
    """Append ``line`` to the effects file; how many such lines it holds now."""
    with EFFECTS.open("a") as f:
        f.write(line + "\n")
    return EFFECTS.read_text().splitlines().count(line)


@server.tool()
def pay(amount: int) -> str:
    """Pay ``amount`` (an effect), then drop the connection before answering."""
    _record(f"paid {amount}")
    os._exit(0)


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def balance() -> str:
    """The balance (read-only); the first call drops the connection."""
    if _record("balance") == 1:
        os._exit(0)
    return "42"


if __name__ == "__main__":
    server.run("stdio")
