"""MCPTool on a server whose tools declare output schemas that refuse their results: a
backtracking ``pattern`` (``jsonschema`` and Python's ``re`` took 2^n steps for a string of n
characters, on the event loop), 18 nested unions by ``$ref`` (a 4,000-character schema the
client library made a type of at each call: 2^18 steps, past the call's timeout) and a schema
of 400,000 characters. The client keeps no output schema of a server: its transports leave
them out of every tool listing, over stdio, streamable HTTP (event streams and JSON bodies)
and SSE alike, so no tool carries one, none is checked or made a type of, and each result
comes back whole, a task's too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as mcp_types
import pytest
from mcp_support import ServerProcess
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from support.launch import PYTHON
from toolcards import MCPTool
from toolcards.tools.mcp.wire import _BoundedBody, _Events, _session_message
from toolcards.tools.mcp.wire_json import WireBounds

pytestmark = [pytest.mark.timeout(120)]

SERVER = Path(__file__).parent / "servers" / "pattern_server.py"
UNIONS = 18
"""Levels of the ``unions`` tool's result (``pattern_server.UNIONS``)."""


def card(transport: str, start_server: type[ServerProcess]) -> MCPTool:
    """The card of ``pattern_server.py`` over ``transport`` (``streamable-http+json``: JSON
    bodies)."""
    fields: dict[str, Any] = {"timeout_seconds": 60, "connect_timeout_seconds": 60}
    if transport == "stdio":
        return MCPTool(
            name="patterns", transport="stdio", command=PYTHON, args=[str(SERVER)], **fields
        )
    kind, _, body = transport.partition("+")
    env = {"FASTMCP_JSON_RESPONSE": "true"} if body == "json" else {}
    server = start_server(SERVER, kind, env).start()
    return MCPTool(name="patterns", transport=kind, url=server.url, **fields)


@pytest.mark.parametrize("name", ["lookup", "task_lookup"])
def test_a_servers_output_schema_pattern_is_never_run_on_its_results(
    name: str, start_server: type[ServerProcess]
) -> None:
    pytest.importorskip("fastmcp_tasks")
    toolset = card("stdio", start_server).get_toolsets()[0]
    ctx: Any = RunContext(deps=None, model=TestModel(), usage=RunUsage())

    async def run() -> None:
        async with toolset:
            tools = await toolset.get_tools(ctx)
            assert tools[name].tool_def.return_schema is None  # declared, never kept
            # 12 characters: the pattern, had it run, refuses the result; 40: about 11 hours
            for size in (12, 40):
                result = await toolset.call_tool(name, {"size": size}, ctx, tools[name])
                assert result == {"code": "a" * size + "!"}, size

    anyio.run(run)


@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "streamable-http+json", "sse"])
def test_no_output_schema_of_a_server_reaches_the_client(
    transport: str, start_server: type[ServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastmcp_tasks")
    from fastmcp.client.mixins import tools as fastmcp_tools

    made: list[Any] = []

    def type_of(schema: Any) -> Any:  # the client library's, run on each structured result
        made.append(schema)
        raise AssertionError("a type is made of a server's output schema")

    monkeypatch.setattr(fastmcp_tools, "json_schema_to_type_adapter", type_of)
    toolset = card(transport, start_server).get_toolsets()[0]
    ctx: Any = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    value: Any = "oops"
    for _ in range(UNIONS):
        value = {"x": value}

    async def run() -> None:
        async with toolset:
            tools = await toolset.get_tools(ctx)
            assert [n for n, t in tools.items() if t.tool_def.return_schema is not None] == []
            assert sorted(tools) == ["lookup", "task_lookup", "unions", "vast"]
            result = await toolset.call_tool("unions", {}, ctx, tools["unions"])
            assert result == {"r": value}  # whole, though its schema wants an integer
            result = await toolset.call_tool("vast", {"size": 3}, ctx, tools["vast"])
            assert result == {"x": "aaa"}

    anyio.run(run)
    assert made == []


@pytest.mark.parametrize("key", ["outputSchema", "output_schema", "outputSch\\u0065ma"])
def test_a_listing_reaches_the_session_without_output_schemas(key: str) -> None:
    """However the server spells the key (the SDK reads the field's name as well as its
    camel-case alias, and JSON escapes), over stdio and in an event stream."""
    tool = f'{{"name": "t", "inputSchema": {{"type": "object"}}, "{key}": {{"type": "object"}}}}'
    listing = f'{{"jsonrpc": "2.0", "id": 3, "result": {{"tools": [{tool}]}}}}'
    stdio = _session_message(listing)
    assert not isinstance(stdio, Exception)
    event = _Events(WireBounds()).feed(f"data: {listing}\n\n".encode()).decode()
    http = mcp_types.jsonrpc_message_adapter.validate_json(event.removeprefix("data: "))
    for message in (stdio.message, http):
        assert isinstance(message, mcp_types.JSONRPCResponse)
        (listed,) = mcp_types.ListToolsResult.model_validate(message.result).tools
        assert (listed.name, listed.input_schema) == ("t", {"type": "object"})
        assert listed.output_schema is None
        assert sorted(message.result["tools"][0]) == ["inputSchema", "name"]


@pytest.mark.parametrize("kind", ["application/json", "application/jsonx", "application/json, x"])
def test_a_json_body_of_any_type_the_sdk_reads_as_json_loses_its_output_schemas(kind: str) -> None:
    """The SDK reads a body as JSON when its type starts with ``application/json``: one named
    ``application/jsonx`` passed the bounded reader whole, its output schemas kept."""
    tool = '{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}'
    listing = f'{{"jsonrpc": "2.0", "id": 3, "result": {{"tools": [{tool}]}}}}'
    response = httpx.Response(200, headers={"content-type": kind}, content=listing.encode())

    async def read() -> bytes:
        body = _BoundedBody(response, WireBounds(), lambda _: None)
        return b"".join([chunk async for chunk in body])

    message = mcp_types.jsonrpc_message_adapter.validate_json(anyio.run(read))
    assert isinstance(message, mcp_types.JSONRPCResponse)
    assert sorted(message.result["tools"][0]) == ["inputSchema", "name"]
