"""MCPTool against the reference server ``@modelcontextprotocol/server-everything`` (stdio).

Uses the ``mcp-server-everything`` command when it is installed (``npm install -g
@modelcontextprotocol/server-everything``), else ``npx -y``; skipped when neither is available.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest
from mcp_support import call_tools, make_agent

from toolcards import ToolFactory
from toolcards.tools.mcp import MCPTool

PACKAGE = "@modelcontextprotocol/server-everything"


def reference_card() -> tuple[MCPTool, bool]:
    """The card, and whether it runs through npx (which may need to download the package)."""
    installed = shutil.which("mcp-server-everything")
    if installed:
        return MCPTool(
            name="everything", transport="stdio", command=installed, args=["stdio"]
        ), False
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip(f"neither mcp-server-everything nor npx is on PATH; cannot run {PACKAGE}")
    card = MCPTool(
        name="everything",
        transport="stdio",
        command=npx,
        args=["-y", PACKAGE, "stdio"],
        connect_timeout_seconds=120,
    )
    return card, True


def test_reference_server_echo_through_agent() -> None:
    card, via_npx = reference_card()
    card.tool_prefix = "ref_"
    agent, script = make_agent([ToolFactory([card]).toolset()])
    out = asyncio.run(call_tools(agent, script, [("ref_echo", {"message": "hello"})]))
    error = card.get_toolsets()[0].last_error
    if via_npx and error:
        pytest.skip(f"npx could not start {PACKAGE}: {error}")
    assert error is None
    assert out == ["Echo: hello"]
    assert len(script.seen_tools) > 3
    assert all(name.startswith("ref_") for name in script.seen_tools)
