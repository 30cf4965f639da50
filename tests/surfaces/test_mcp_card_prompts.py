"""A card's MCP prompt and its team-state resources (the board, the graph) show team state:
through the official client over HTTP, a caller the policy gives none of the card's tools (and
no ``context:<CardType>`` read right) neither lists nor gets them, even where the policy allows
every prompt and resource."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_clients import http_session

from surfaces.surface_support import HttpServer, token_for, write_config
from toolcards.governance import Identity

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PLANNER = Identity("planner", "user")
GUEST = Identity("guest", "user")
OBSERVER = Identity("observer", "user")
SECRET = "rotate the db password hunter2"
POLICY = """\
default_effect: allow
rules:
  - description: only the planner plans
    callers: ["guest", "observer"]
    targets: ["*_planning", "*_planning_*", "*_graph"]   # the tools, not the resources
    effect: deny
  - description: the observer reads the board
    callers: ["observer"]
    targets: ["context:PlanningTool"]
    effect: allow
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base = tmp_path_factory.mktemp("card-prompts")
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    cards = [
        {"type": "PlanningTool", "vector_store": False},
        {"type": "KnowledgeGraphTool", "vector_store": False},
        {"type": "WorkspaceTool", "workspace_id": "ws"},
    ]
    config = write_config(
        base, tokens=[PLANNER, GUEST, OBSERVER], policy=policy, tools=[], cards=cards
    )
    srv = HttpServer(config, env={"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")})
    yield srv
    srv.stop()


def session(server: HttpServer, who: Identity) -> Any:
    return http_session(server.url, token_for(who))


async def board_prompt(server: HttpServer, who: Identity) -> tuple[set[str], str]:
    """The prompts ``who`` lists, and the text of the PlanningTool prompt it gets."""
    async with session(server, PLANNER) as s:
        await s.call_tool("update_planning", {"create": [{"description": SECRET}]})
    async with session(server, who) as s:
        names = {p.name for p in (await s.list_prompts()).prompts}
        prompt = await s.get_prompt("PlanningTool")
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent)
    return names, content.text


async def test_a_caller_without_the_cards_tools_neither_lists_nor_gets_its_prompt(
    server: HttpServer,
) -> None:
    async with session(server, PLANNER) as s:
        await s.call_tool("update_planning", {"create": [{"description": SECRET}]})
    async with session(server, GUEST) as s:
        names = {p.name for p in (await s.list_prompts()).prompts}
        with pytest.raises(MCPError) as refused:
            await s.get_prompt("PlanningTool")
        assert "WorkspaceTool" not in names  # the workspace card has no prompt: unchanged
    assert "PlanningTool" not in names
    assert refused.value.error.message == "unknown prompt 'PlanningTool'"


async def test_a_caller_with_the_cards_tools_gets_its_prompt(server: HttpServer) -> None:
    names, text = await board_prompt(server, PLANNER)
    assert "PlanningTool" in names and "tasks total (" in text


async def test_a_declared_read_right_gets_the_prompt_without_the_tools(server: HttpServer) -> None:
    names, text = await board_prompt(server, OBSERVER)
    assert "PlanningTool" in names and "tasks total (" in text
    async with session(server, OBSERVER) as s:
        tools = {t.name for t in (await s.list_tools()).tools}
    assert not any("planning" in name for name in tools)


BOARD = "toolcards://team/surfaces/planning"
GRAPH = "toolcards://team/surfaces/graph"
ENTITY = "toolcards://team/surfaces/graph/entity/vault"


async def plant(server: HttpServer) -> None:
    async with session(server, PLANNER) as s:
        await s.call_tool("update_planning", {"create": [{"description": SECRET}]})
        entity = {"name": "vault", "entity_type": "system", "description": SECRET}
        await s.call_tool("update_graph", {"create_entities": [entity]})


async def test_a_caller_without_the_cards_tools_neither_lists_nor_reads_its_state_resources(
    server: HttpServer,
) -> None:
    await plant(server)
    async with session(server, GUEST) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        templates = {t.uri_template for t in (await s.list_resource_templates()).resource_templates}
        codes = []
        for uri in (BOARD, GRAPH, ENTITY):
            with pytest.raises(MCPError) as refused:
                await s.read_resource(uri)
            codes.append(refused.value.error.code)
    assert not {BOARD, GRAPH} & uris
    assert not [t for t in templates if "/graph/" in t]
    assert codes == [-32002, -32002, -32002]  # exactly like a resource that does not exist


async def test_the_cards_callers_and_the_read_right_read_the_board_resource(
    server: HttpServer,
) -> None:
    await plant(server)
    for who in (PLANNER, OBSERVER):
        async with session(server, who) as s:
            uris = {str(r.uri) for r in (await s.list_resources()).resources}
            content = (await s.read_resource(BOARD)).contents[0]
        assert BOARD in uris
        assert isinstance(content, types.TextResourceContents) and SECRET in content.text
