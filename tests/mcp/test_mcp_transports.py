"""MCPTool against real MCP server processes over stdio, SSE and streamable HTTP; where the
subject is how tools are named and called, not the transport, against the same servers in
this process (``memory``: the SDK's in-memory streams)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp_support import (
    ECHO,
    IN_MEMORY,
    SERVERS,
    ServerProcess,
    call_tools,
    make_agent,
    serve_in_memory,
)

from support.launch import PYTHON
from toolcards import ToolFactory
from toolcards.tools.mcp import MCPTool
from toolcards.tools.mcp.toolset import bound_result

TRANSPORTS = ["stdio", "sse", "streamable-http"]


@pytest.fixture(autouse=True)
def in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    serve_in_memory(monkeypatch)


def card_for(
    transport: str, start_server: type[ServerProcess], **fields: Any
) -> tuple[MCPTool, ServerProcess | None]:
    """A card of the echo server: a process for a transport, or ``memory`` (this process)."""
    # A bound, not a measurement: a loaded machine may take well over the 10 s default to
    # start a Python server, and a server not connected in time has no tools.
    fields.setdefault("connect_timeout_seconds", 60.0)
    if transport == "memory":
        return MCPTool(transport="stdio", command=IN_MEMORY, args=[str(ECHO)], **fields), None
    if transport == "stdio":
        return MCPTool(transport="stdio", command=PYTHON, args=[str(ECHO), "stdio"], **fields), None
    server = start_server(ECHO, transport).start()
    return MCPTool(transport=transport, url=server.url, **fields), server


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_agent_calls_tools_with_prefix(transport: str, start_server: type[ServerProcess]) -> None:
    card, _ = card_for(transport, start_server, name="echo", tool_prefix="srv_")
    agent, script = make_agent([ToolFactory([card]).toolset()])

    async def main() -> list[str]:
        return await call_tools(
            agent, script, [("srv_echo", {"text": "hi"}), ("srv_add", {"a": 2, "b": 3})]
        )

    assert asyncio.run(main()) == ["hi", "5"]
    assert "srv_echo" in script.seen_tools and "echo" not in script.seen_tools
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in script.seen_tools)
    assert "srv_docs_search" in script.seen_tools
    assert any(n.startswith("srv_docs_search_") for n in script.seen_tools)


def test_a_remote_tool_never_takes_a_local_tools_name(
    start_server: type[ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """The server lists ``echo``, the name of a local card's tool: the local one is what the
    model sees and calls, the remote one is left out with a warning (the run failed on the
    duplicate name, losing every tool); the server's other tools stay."""
    from core_cards import EchoCard

    card, _ = card_for("memory", start_server, name="echo")  # no prefix
    agent, script = make_agent([ToolFactory([EchoCard(), card]).toolset()])

    async def main() -> list[str]:
        return await call_tools(
            agent, script, [("echo", {"text": "hi"}), ("add", {"a": 2, "b": 3})]
        )

    assert asyncio.run(main()) == ["echo: hi", "5"]
    assert "the name of a local tool" in caplog.text


def test_a_remote_tool_never_takes_a_config_tools_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The server lists ``add``, the name of one of the config's plain ``tools:``: the plain
    one is served, the remote one is left out with a warning (every command of the config
    failed: "two tools share a name")."""
    from toolcards.surfaces.runtime import SurfaceRuntime

    (tmp_path / "host_add.py").write_text(HOST_ADD, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    args = [str(ECHO), "stdio"]
    card = {"type": "MCPTool", "name": "echo", "transport": "stdio", "command": PYTHON}
    config = {
        "store": ":memory:",
        "policy": "policy.yaml",
        "tools": ["host_add:add"],
        "cards": [{**card, "args": args, "connect_timeout_seconds": 60}],
        "trust": {"commands": [{"command": PYTHON, "args": args}]},
    }
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    (tmp_path / "toolcards.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with SurfaceRuntime.open(tmp_path / "toolcards.yaml") as rt:
        assert rt.registry["add"].description == "The host's own add."
        assert "echo" in rt.registry  # the server's other tools stay
    assert "MCP server 'echo' lists a tool named 'add', the name of a local tool" in caplog.text


HOST_ADD = '''
def add(a: int, b: int) -> int:
    """The host's own add."""
    return a + b
'''


def search_tools(query: str) -> str:
    """A server tool named like pydantic-ai's tool search."""
    return f"remote {query}"


def final_result(answer: str) -> str:
    """A server tool named like pydantic-ai's output tool."""
    return f"remote {answer}"


@pytest.mark.parametrize(
    ("prefix", "offered"),
    [("", {"ping"}), ("srv", {"srv_ping", "srv_search_tools", "srv_final_result"})],
)
def test_a_remote_tool_never_takes_a_name_the_run_adds(prefix: str, offered: set[str]) -> None:
    """The server lists ``search_tools`` and ``final_result``, names pydantic-ai gives its tool
    search and output tool: they are left out (the run failed on the duplicate name, losing
    every tool), and a tool_prefix keeps them under another name."""
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset

    from toolcards.tools.mcp.toolset import MCPServerToolset

    class Out(BaseModel):
        answer: str

    def ping() -> str:
        """Answer pong."""
        return "pong"

    remote = MCPServerToolset(
        name="shadow",
        build=lambda: FunctionToolset([search_tools, final_result, ping]),
        prefix=prefix,
    )
    model = TestModel(call_tools=[f"{prefix}_ping" if prefix else "ping"])
    result = asyncio.run(Agent(model, toolsets=[remote], output_type=Out).run("go"))

    assert isinstance(result.output, Out)
    assert model.last_model_request_parameters is not None
    assert {t.name for t in model.last_model_request_parameters.function_tools} == offered


def named_card(name: str, **fields: Any) -> MCPTool:
    """A card of ``servers/named_server.py`` (it lists ``deploy`` and ``<name>_status``), in
    this process."""
    script = str(SERVERS / "named_server.py")
    fields.setdefault("connect_timeout_seconds", 60.0)
    return MCPTool(name=name, transport="stdio", command=IN_MEMORY, args=[script, name], **fields)


@pytest.mark.parametrize("order", [["a", "b"], ["b", "a"]])
def test_a_name_two_servers_list_is_the_earlier_cards(
    order: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Two servers list ``deploy``: the earlier card's is the one the model sees and calls,
    whichever server lists first; the later one's is left out with a warning (the run failed
    on the duplicate name, losing every tool); a tool_prefix keeps a third server's."""
    first, later = order
    cards = [named_card(name) for name in order]
    agent, script = make_agent([ToolFactory([*cards, named_card("c", tool_prefix="c")]).toolset()])

    async def main() -> list[str]:
        return await call_tools(
            agent, script, [("deploy", {"env": "prod"}), ("c_deploy", {"env": "dev"})]
        )

    assert asyncio.run(main()) == [f"{first} deployed prod", "c deployed dev"]
    assert sorted(script.seen_tools) == ["a_status", "b_status", "c_c_status", "c_deploy", "deploy"]
    assert f"MCP server {later!r} lists a tool named 'deploy'" in caplog.text


def test_a_bare_prefix_is_joined_with_an_underscore(start_server: type[ServerProcess]) -> None:
    card, _ = card_for("memory", start_server, name="crm", tool_prefix="crm")
    agent, script = make_agent([ToolFactory([card]).toolset()])

    async def main() -> list[str]:
        return await call_tools(agent, script, [("crm_echo", {"text": "hi"})])

    assert asyncio.run(main()) == ["hi"]
    assert "crm_echo" in script.seen_tools and "crmecho" not in script.seen_tools


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reconnects_after_server_restart(transport: str, start_server: type[ServerProcess]) -> None:
    card, server = card_for(transport, start_server, retry_interval_seconds=0)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    toolset = card.get_toolsets()[0]

    async def main() -> tuple[int, int, list[str]]:
        async with agent:
            (first,) = await call_tools(agent, script, [("pid", {})])
            if server is None:
                os.kill(int(first), signal.SIGKILL)
            else:
                server.kill()
                server.start()
            calls = [("pid", {}), *[("echo", {"text": f"back{i}"}) for i in range(4)]]
            second, *echoed = await call_tools(agent, script, calls)
            return int(first), int(second), echoed

    first, second, echoed = asyncio.run(main())
    assert first != second
    assert echoed == [f"back{i}" for i in range(4)]
    # concurrent calls share one reconnection (a client that re-opens an HTTP session by
    # itself, as fastmcp 4 does, needs none)
    assert toolset.connections <= 2


def test_tool_error_reaches_model_as_retry(start_server: type[ServerProcess]) -> None:
    card, _ = card_for("memory", start_server)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    (out,) = asyncio.run(call_tools(agent, script, [("fail", {"message": "disk full"})]))
    assert "disk full" in out


def test_mcp_tool_annotations_in_metadata(start_server: type[ServerProcess]) -> None:
    card, _ = card_for("memory", start_server, include_tools=["echo"])
    agent, script = make_agent([ToolFactory([card]).toolset()])
    asyncio.run(call_tools(agent, script, []))
    assert script.seen_tools == ["echo"]
    meta = script.tool_defs["echo"].metadata or {}
    assert meta["mcp_name"] == "echo" and meta["open_world"] is True and meta["readonly"] is False


def test_huge_result_is_cut_with_marker(start_server: type[ServerProcess]) -> None:
    card, _ = card_for("stdio", start_server, max_result_chars=1_000)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    (out,) = asyncio.run(call_tools(agent, script, [("big", {"size": 3_000_000})]))
    assert out.startswith("z" * 1_000) and out.endswith("[... truncated: 2999000 more chars]")


def test_bound_result_keeps_small_values_and_cuts_structures() -> None:
    assert bound_result({"a": 1}, 1_000) == {"a": 1}
    assert bound_result(b"raw", 1) == b"raw"
    cut = bound_result({"k": "v" * 5_000}, 1_000)
    assert isinstance(cut, str) and cut.startswith('{"k": "vvv') and "[... truncated:" in cut


def test_bound_result_cuts_what_an_apps_tool_return_sends_the_model() -> None:
    """An MCP Apps tool's result is a ``ToolReturn``: its return value and content are cut like
    any result (7.5 M characters reached the model at max_result_chars=1000), its metadata
    (for the app, not the model) is kept."""
    from pydantic_ai import ToolReturn

    app = {"ui": "raw result"}
    result = ToolReturn(["x" * 50_000] * 20, content="y" * 50_000, metadata=app)
    cut = bound_result(result, 1_000)

    assert isinstance(cut, ToolReturn) and cut.metadata is app
    assert isinstance(cut.return_value, str) and len(cut.return_value) < 1_100
    assert isinstance(cut.content, str) and len(cut.content) < 1_100
