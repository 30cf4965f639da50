"""A card's views of team state (its RESOURCE channel) on every surface that shows them: the
MCP server lists and reads them as resources, the dashboard draws the ones with a panel. A new
card brings its own (this module's ``NotesTool``) without a change to any surface, and who reads
a view follows the card's state rule: a caller the policy gives none of the card's tools (and
no ``context:<CardType>`` read right) neither lists nor reads it, even under a default allow."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from pydantic import Field
from starlette.testclient import TestClient

from surfaces.surface_support import write_config
from toolcards.core.card import CardCapability, ToolCard
from toolcards.core.channels import Channels
from toolcards.core.params import BaseToolParam
from toolcards.core.registry import CARD_TYPES
from toolcards.core.views import Panel, TeamReader, TeamView
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.config import load_config
from toolcards.surfaces.dashboard.app import Dashboard
from toolcards.surfaces.http.tokens import TokenTable
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = [pytest.mark.timeout(120)]

LEAD = Identity("lead", "user", ["viewer"])
GUEST = Identity("guest", "user", ["viewer"])


class NotesView(BaseToolParam):
    """The notes as a view."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.RESOURCE})


def read_notes(team: TeamReader, variables: Mapping[str, str], query: str) -> dict[str, Any]:
    return {
        "available": True,
        "notes": ["ship on friday"],
        "count": team.state_of("#Notes").count(),
    }


NOTES = TeamView(
    "notes",
    "notes",
    "The team's notes.",
    read_notes,
    ("#Notes",),
    Panel(
        "Notes",
        '<h2>Notes</h2>{% if view.available %}<p data-testid="notes">'
        '{{ view.notes|join(", ") }}</p>{% endif %}',
    ),
)


class NotesTool(ToolCard):
    """A card of this test: one view with a panel, and no tools."""

    notes: bool | NotesView = True
    capabilities: ClassVar[dict[str, CardCapability]] = {
        "notes": CardCapability(resource=lambda card, param: NOTES)
    }


POLICY = {
    "default_effect": "allow",
    "rules": [
        {"callers": ["guest"], "targets": ["*_planning*"], "effect": "deny"},
        {"callers": ["lead"], "targets": ["context:NotesTool"], "effect": "allow"},
    ],
}


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    CARD_TYPES.register(NotesTool)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    cards = [{"type": "PlanningTool", "vector_store": False}, {"type": "NotesTool"}]
    yield write_config(tmp_path, local=LEAD, tokens=[GUEST], policy=policy, tools=[],
                       cards=cards, team_id="crew")  # fmt: skip


@contextlib.asynccontextmanager
async def mcp(config: Path, who: Identity) -> AsyncIterator[Client]:
    with SurfaceRuntime.from_config(load_config(config), durability="sync") as rt:
        rt.local = who
        server = GovernedMCPServer(rt)
        async with server.running(), Client(server.server) as client:
            yield client


@pytest.mark.anyio
async def test_a_new_cards_view_is_an_mcp_resource(config: Path) -> None:
    async with mcp(config, LEAD) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        read = await client.read_resource("toolcards://team/crew/notes")
    assert {"toolcards://team/crew/notes", "toolcards://team/crew/planning"} <= uris
    found = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    assert found == {"available": True, "notes": ["ship on friday"], "count": 0}


@pytest.mark.anyio
async def test_a_caller_denied_the_cards_tools_neither_lists_nor_reads_its_view(
    config: Path, tmp_path: Path
) -> None:
    async with mcp(config, GUEST) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        with pytest.raises(MCPError):
            await client.read_resource("toolcards://team/crew/planning")
    assert "toolcards://team/crew/planning" not in uris
    assert "toolcards://team/crew/notes" not in uris  # no tools, no read right
    with AuditLog(tmp_path / "audit.db", team_id="crew") as log:
        rows = [(e.principal, e.tool, e.outcome) for e in log.query(principal="guest")]
    assert ("guest", "resource:toolcards://team/crew/planning", "denied") in rows


@pytest.fixture
def dashboard(config: Path) -> Iterator[TestClient]:
    with SurfaceRuntime.from_config(load_config(config), durability="sync") as rt:
        tokens = TokenTable.from_tokens([("lead-token", LEAD)])
        assert rt.factory is not None
        dash = Dashboard(tokens=tokens, team=rt.team, views=rt.factory.get_views())
        with TestClient(dash.app(), base_url="http://127.0.0.1" + dash.base_path) as client:
            page = client.get("/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert csrf is not None
            client.post("/login", data={"token": "lead-token", "csrf": csrf.group(1)})
            yield client


def test_a_new_cards_panel_is_drawn_by_the_dashboard(dashboard: TestClient) -> None:
    page = dashboard.get("/").text
    assert '<section id="notes"' in page and 'data-watch="#Notes"' in page
    assert '<p data-testid="notes">ship on friday</p>' in page
    assert '<section id="plan"' in page and 'data-watch="#PlanningTool"' in page
    panel = dashboard.get("/panel/notes")
    assert panel.status_code == 200 and "ship on friday" in panel.text
