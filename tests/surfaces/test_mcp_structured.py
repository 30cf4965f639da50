"""Structured tool output through the official client against `toolcards serve` (stdio and
streamable HTTP): tools returning a model, a TypedDict or a dataclass declare an
``outputSchema``, and their results carry ``structuredContent`` that validates against it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp_clients import http_session, stdio_session
from structured_tools import POLICY

from surfaces.surface_support import HttpServer, write_config
from toolcards.governance import Identity

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

LOCAL = Identity("local.user", "user")
STRUCTURED = {"forecast", "totals", "span", "misdeclared", "flaky_forecast"}
Connect = Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("structured")
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return write_config(base, local=LOCAL, policy=policy, tools=["structured_tools:TOOLS"])


@pytest.fixture(scope="module")
def server(config: Path) -> Iterator[HttpServer]:
    srv = HttpServer(config)
    yield srv
    srv.stop()


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest, config: Path) -> Connect:
    if request.param == "stdio":
        return lambda: stdio_session(config)
    server: HttpServer = request.getfixturevalue("server")
    return lambda: http_session(server.url)


@contextlib.asynccontextmanager
async def over_http(server: HttpServer) -> AsyncIterator[ClientSession]:
    async with http_session(server.url) as s:
        await s.list_tools()  # the client validates results against the schemas it listed
        yield s


async def checked_call(server: HttpServer, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The structured content of a call, checked against the tool's listed output schema."""
    async with over_http(server) as s:
        schema = schema_of((await s.list_tools()).tools, name)
        result = await s.call_tool(name, args)
    assert result.is_error is False and result.structured_content is not None
    jsonschema.validate(result.structured_content, schema)
    assert json.loads(text_of(result)) == result.structured_content
    return result.structured_content


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def schema_of(tools: list[types.Tool], name: str) -> dict[str, Any]:
    schema = next(t for t in tools if t.name == name).output_schema
    assert schema is not None
    return schema


async def test_tools_returning_a_model_typed_dict_or_dataclass_declare_an_output_schema(
    connect: Connect,
) -> None:
    async with connect() as s:
        tools = (await s.list_tools()).tools
    assert {t.name for t in tools if t.output_schema is not None} == STRUCTURED
    forecast = schema_of(tools, "forecast")
    assert forecast["type"] == "object"
    assert forecast["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(forecast["properties"]) == {"cityName", "readings"}
    assert "Reading" in forecast["$defs"]


async def test_a_model_result_is_structured_content_valid_against_its_output_schema(
    connect: Connect,
) -> None:
    async with connect() as s:
        tools = (await s.list_tools()).tools
        result = await s.call_tool("forecast", {"city": "Oslo"})
    expected = {"cityName": "Oslo", "readings": [{"celsius": 21.5, "at": "noon"}]}
    assert result.is_error is False
    assert result.structured_content == expected
    jsonschema.validate(result.structured_content, schema_of(tools, "forecast"))
    assert json.loads(text_of(result)) == expected


async def test_a_typed_dict_result_is_structured_content_valid_against_its_output_schema(
    server: HttpServer,
) -> None:
    found = await checked_call(server, "totals", {"values": [1, 2, 3]})
    assert found == {"count": 3, "total": 6}


async def test_a_dataclass_result_is_structured_content_valid_against_its_output_schema(
    server: HttpServer,
) -> None:
    found = await checked_call(server, "span", {"start": 2, "end": 5})
    assert found == {"start": 2, "end": 5, "label": "2-5"}


async def test_a_value_not_of_the_declared_type_is_an_error_not_invalid_structured_content(
    server: HttpServer,
) -> None:
    async with over_http(server) as s:
        result = await s.call_tool("misdeclared", {})
    assert result.is_error is True
    assert result.structured_content is None
    assert (
        text_of(result)
        == "error: misdeclared returned a value that does not match its output schema"
    )


async def test_a_denied_call_of_a_tool_with_an_output_schema_keeps_the_error_shape(
    server: HttpServer,
) -> None:
    async with over_http(server) as s:
        tools = (await s.list_tools()).tools
        result = await s.call_tool("forecast", {"city": "Atlantis"})
    assert schema_of(tools, "forecast")
    assert result.is_error is True and result.structured_content is None
    assert text_of(result).startswith("denied")
    assert (result.meta or {})["toolcards/outcome"]["outcome"] == "denied"


async def test_a_failed_call_of_a_tool_with_an_output_schema_keeps_the_error_shape(
    server: HttpServer,
) -> None:
    async with over_http(server) as s:
        tools = (await s.list_tools()).tools
        result = await s.call_tool("flaky_forecast", {"city": "Oslo"})
    assert schema_of(tools, "flaky_forecast")
    assert result.is_error is True and result.structured_content is None
    assert "no station near Oslo" in text_of(result)
