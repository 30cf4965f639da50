"""``completion/complete`` and ``resources/subscribe`` of missing URIs, through the official
client against `toolcards serve` (stdio and streamable HTTP): completions are governed like
listings (a value never names what the caller may not see)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_clients import http_session, stdio_session
from structured_tools import POLICY

from support.scripted import wait_until
from surfaces.surface_support import HttpServer, write_config
from toolcards.governance import AuditLog, Identity

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

LOCAL = Identity("local.user", "user")
Connect = Callable[[], contextlib.AbstractAsyncContextManager[ClientSession]]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("completions")
    workspace = base / "workspaces" / "ws"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "secret").mkdir()
    (workspace / "notes.md").write_text("# notes\n", encoding="utf-8")
    (workspace / "docs" / "guide.md").write_text("# guide\n", encoding="utf-8")
    (workspace / "secret" / "key.txt").write_text("k\n", encoding="utf-8")
    return base


@pytest.fixture(scope="module")
def env(base: Path) -> dict[str, str]:
    return {"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")}


@pytest.fixture(scope="module")
def config(base: Path) -> Path:
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return write_config(
        base,
        local=LOCAL,
        policy=policy,
        tools=["structured_tools:TOOLS"],
        prompts=["structured_tools:PROMPTS"],
        resources=["structured_tools:RESOURCES"],
        cards=[{"type": "WorkspaceTool", "workspace_id": "ws"}],
        team_id="crew",
    )


@pytest.fixture(scope="module")
def server(config: Path, env: dict[str, str]) -> Iterator[HttpServer]:
    srv = HttpServer(config, env=env)
    yield srv
    srv.stop()


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest, config: Path, env: dict[str, str]) -> Connect:
    if request.param == "stdio":
        return lambda: stdio_session(config, env)
    server: HttpServer = request.getfixturevalue("server")
    return lambda: http_session(server.url)


def prompt(name: str) -> types.PromptReference:
    return types.PromptReference(type="ref/prompt", name=name)


def template(uri: str) -> types.ResourceTemplateReference:
    return types.ResourceTemplateReference(type="ref/resource", uri=uri)


async def values(
    s: ClientSession,
    ref: types.PromptReference | types.ResourceTemplateReference,
    name: str,
    value: str,
) -> list[str]:
    return (await s.complete(ref, {"name": name, "value": value})).completion.values


# -- prompts --------------------------------------------------------------------------------------


async def test_the_completions_capability_is_declared(connect: Connect) -> None:
    async with connect() as s:
        caps = s.server_capabilities
    assert caps is not None and caps.completions is not None


async def test_a_tool_name_argument_completes_with_the_tools_the_caller_may_see(
    connect: Connect,
) -> None:
    async with connect() as s:
        every = await values(s, prompt("review"), "tool", "")
        some = await values(s, prompt("review"), "tool", "f")
    assert "hidden_tool" not in every
    assert {"forecast", "greet", "totals", "workspace_read"} <= set(every)
    assert set(some) == {"forecast", "flaky_forecast"}


async def test_a_literal_argument_completes_with_its_values(server: HttpServer) -> None:
    async with http_session(server.url) as s:
        assert await values(s, prompt("review"), "depth", "") == ["quick", "thorough"]
        assert await values(s, prompt("review"), "depth", "t") == ["thorough"]


async def test_an_enum_argument_completes_with_its_values(server: HttpServer) -> None:
    async with http_session(server.url) as s:
        assert await values(s, prompt("tone"), "mood", "c") == ["calm", "curious", "cross"]


async def test_a_complete_marker_gives_the_values_of_its_function(server: HttpServer) -> None:
    async with http_session(server.url) as s:
        assert await values(s, prompt("tone"), "topic", "ti") == ["tide"]


async def test_a_resource_uri_argument_completes_with_the_resources_the_caller_may_see(
    server: HttpServer,
) -> None:
    async with http_session(server.url) as s:
        found = await values(s, prompt("summarise"), "uri", "notes://")
    assert found == ["notes://static/public"]


async def test_a_hidden_prompt_is_refused_like_a_missing_one(server: HttpServer) -> None:
    async with http_session(server.url) as s:
        with pytest.raises(MCPError) as hidden:
            await values(s, prompt("secret_prompt"), "level", "")
        with pytest.raises(MCPError) as missing:
            await values(s, prompt("no_such_prompt"), "level", "")
    assert hidden.value.error.code == missing.value.error.code == -32602
    assert hidden.value.error.message == "unknown prompt 'secret_prompt'"
    assert missing.value.error.message == "unknown prompt 'no_such_prompt'"


# -- resource templates ---------------------------------------------------------------------------


async def test_a_template_variable_completes_without_values_the_caller_may_not_see(
    connect: Connect,
) -> None:
    async with connect() as s:
        every = await values(s, template("notes://{name}"), "name", "")
        some = await values(s, template("notes://{name}"), "name", "al")
    assert every == ["alpha", "alpine", "beta"]
    assert some == ["alpha", "alpine"]


async def test_workspace_paths_complete_with_the_files_the_caller_may_read(
    server: HttpServer,
) -> None:
    async with http_session(server.url) as s:
        found = await values(s, template("toolcards://workspace/ws/{+path}"), "path", "")
    assert sorted(found) == ["docs/guide.md", "notes.md"]


async def test_a_hidden_template_is_refused_like_a_missing_one(server: HttpServer) -> None:
    async with http_session(server.url) as s:
        with pytest.raises(MCPError) as hidden:
            await values(s, template("vault://{key}"), "key", "")
        with pytest.raises(MCPError) as missing:
            await values(s, template("nowhere://{key}"), "key", "")
    assert hidden.value.error.code == missing.value.error.code == -32602
    assert hidden.value.error.message == "unknown resource template 'vault://{key}'"


# -- subscriptions --------------------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["notes://gamma", "nowhere://at/all"])
async def test_subscribing_to_a_resource_that_cannot_be_read_is_refused_as_reading_it_is(
    server: HttpServer, uri: str
) -> None:
    async with http_session(server.url) as s:
        with pytest.raises(MCPError) as read:
            await s.read_resource(uri)
        with pytest.raises(MCPError) as subscribed:
            await s.subscribe_resource(uri)
    assert subscribed.value.error.code == read.value.error.code == -32002


async def test_a_prompt_get_whose_arguments_do_not_bind_is_audited(
    server: HttpServer, base: Path
) -> None:
    """The policy allowed the get, its arguments did not fit: one ``invalid_args`` row (it
    left none, so a caller could probe a prompt's parameters untraced)."""
    async with http_session(server.url) as s:
        with pytest.raises(MCPError) as refused:
            await s.get_prompt("review", {"probe_name": "x"})
    assert refused.value.error.code == -32602

    def rows() -> list[Any]:
        with AuditLog(base / "audit.db") as log:
            return [r for r in log.query(tool="prompt:review") if r.outcome == "invalid_args"]

    wait_until(lambda: len(rows()) == 1)
    row = rows()[0]
    assert row.args == {"probe_name": "x"} and row.decision == "allow"
