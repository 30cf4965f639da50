"""A failing MCP server never breaks the agent's other tools; bearer tokens from env."""

from __future__ import annotations

import asyncio
import logging

import pytest
from mcp_support import ECHO, ServerProcess, call_tools, free_port, make_agent
from pydantic_ai.toolsets import FunctionToolset

from toolcards import ToolFactory
from toolcards.tools.mcp import MCPAuth, MCPTool


def ping() -> str:
    """Answer pong."""
    return "pong"


def other_tools() -> FunctionToolset[None]:
    return FunctionToolset([ping])


@pytest.mark.parametrize(
    "card",
    [
        MCPTool(
            name="down", transport="streamable-http", url=f"http://127.0.0.1:{free_port()}/mcp"
        ),
        MCPTool(name="down", transport="sse", url=f"http://127.0.0.1:{free_port()}/sse"),
        MCPTool(name="down", transport="stdio", command="/nonexistent/mcp-server-binary"),
    ],
    ids=["streamable-http", "sse", "stdio"],
)
def test_unreachable_server_yields_no_tools_and_a_note(card: MCPTool) -> None:
    agent, script = make_agent([other_tools(), ToolFactory([card]).toolset()])
    assert asyncio.run(call_tools(agent, script, [("ping", {})])) == ["pong"]
    assert script.seen_tools == ["ping"]
    assert script.instructions is not None
    assert "MCP server 'down' is unavailable" in script.instructions
    assert card.get_toolsets()[0].last_error


def test_server_gone_mid_session_gives_readable_result(start_server: type[ServerProcess]) -> None:
    server = start_server(ECHO, "streamable-http").start()
    card = MCPTool(transport="streamable-http", url=server.url, retry_interval_seconds=0)
    agent, script = make_agent([other_tools(), ToolFactory([card]).toolset()])

    async def main() -> list[str]:
        async with agent:
            assert await call_tools(agent, script, [("echo", {"text": "a"})]) == ["a"]
            server.kill()
            return await call_tools(agent, script, [("echo", {"text": "b"}), ("ping", {})])

    echoed, pong = asyncio.run(main())
    assert echoed.startswith("error: MCP server 'mcp' is unavailable")
    assert pong == "pong"


def test_bearer_token_from_environment(
    start_server: type[ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_server(ECHO, "streamable-http", {"ECHO_REQUIRED_TOKEN": "t0k3n"}).start()
    monkeypatch.setenv("ECHO_TOKEN", "t0k3n")
    auth = MCPAuth(bearer_token_env="ECHO_TOKEN")
    card = MCPTool(transport="streamable-http", url=server.url, auth=auth)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    assert asyncio.run(call_tools(agent, script, [("echo", {"text": "ok"})])) == ["ok"]


def test_wrong_bearer_token_is_isolated(
    start_server: type[ServerProcess],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server = start_server(ECHO, "sse", {"ECHO_REQUIRED_TOKEN": "right"}).start()
    monkeypatch.setenv("ECHO_TOKEN", "wrong-token-value")
    auth = MCPAuth(bearer_token_env="ECHO_TOKEN")
    card = MCPTool(name="guarded", transport="sse", url=server.url, auth=auth)
    agent, script = make_agent([other_tools(), ToolFactory([card]).toolset()])
    assert asyncio.run(call_tools(agent, script, [("ping", {})])) == ["pong"]
    assert script.seen_tools == ["ping"]
    error = card.get_toolsets()[0].last_error or ""
    assert "401" in error
    assert "wrong-token-value" not in error and "wrong-token-value" not in caplog.text
    assert script.instructions is not None and "401" in script.instructions
