"""A failing MCP server never breaks the agent's other tools; bearer tokens from env."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from mcp_support import ECHO, SERVERS, ServerProcess, call_tools, free_port, make_agent
from pydantic_ai.toolsets import FunctionToolset

from support.launch import PYTHON
from toolcards import ToolFactory
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
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


def dying_card(effects: Path) -> MCPTool:
    """A stdio card of ``servers/dying_server.py``, whose calls are lines of ``effects``."""
    script = str(SERVERS / "dying_server.py")
    return MCPTool(
        name="bank",
        transport="stdio",
        command=PYTHON,
        args=[script, str(effects)],
        connect_timeout_seconds=60.0,
        retry_interval_seconds=0,
    )


def test_a_call_that_drops_the_connection_after_its_effect_runs_once_and_is_an_error(
    tmp_path: Path,
) -> None:
    """``pay`` pays, then the server drops the connection: the call is not repeated on the
    reconnected server (it paid twice under one approval), the model is not told it did not
    run, and its one audit row is an error (it read ``ok``)."""
    effects = tmp_path / "effects.log"
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        governed = GovernedToolset(
            ToolFactory([dying_card(effects)]).toolset(),
            policy=Policy.from_dict({"default_effect": "allow"}),
            identity=Identity("agent.writer", "agent"),
            audit=audit,
        )
        agent, script = make_agent([governed])
        (told,) = asyncio.run(call_tools(agent, script, [("pay", {"amount": 100})]))
        rows = audit.query(tool="pay")
    assert effects.read_text().splitlines() == ["paid 100"]
    assert told.startswith("error:") and "did not run" not in told
    assert [r.outcome for r in rows] == ["error"]
    assert "may have had its effect" in (rows[0].error or "")


def test_only_a_read_only_call_is_repeated_after_a_broken_connection(tmp_path: Path) -> None:
    """Without governance the model reads that the call may have had its effect; a tool the
    server marks read-only is repeated on the new connection and answers."""
    effects = tmp_path / "effects.log"
    agent, script = make_agent([ToolFactory([dying_card(effects)]).toolset()])

    async def main() -> tuple[list[str], list[str]]:
        async with agent:
            paid = await call_tools(agent, script, [("pay", {"amount": 5})])
            return paid, await call_tools(agent, script, [("balance", {})])

    (told,), (balance,) = asyncio.run(main())
    assert "may have had its effect" in told and "not repeated" in told
    assert balance == "42"
    assert effects.read_text().splitlines() == ["paid 5", "balance", "balance"]


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


def test_a_servers_error_text_is_one_escaped_line() -> None:
    """A JSON-RPC error's message (the server's own text) went raw into logs, notes and the
    model's tool failures: escape sequences acted on the operator's terminal."""
    from toolcards.tools.mcp.toolset import _short

    said = RuntimeError("\x1b[2J\x1b]52;c;eA==\x07 ALL CHECKS PASSED\u202e C:\\x\nnext line")
    assert _short(ExceptionGroup("one", [said])) == (
        "RuntimeError: \\u001b[2J\\u001b]52;c;eA==\\u0007 ALL CHECKS PASSED\\u202e C:\\\\x"
    )
