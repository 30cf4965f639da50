"""The MCP server's live resource updates: they start at the log's position, reading no
event; an event looks no resource up and reaches only live sessions; a listen is kept by
canonical URI and the polled files are shared among the listens (the official client in
process)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.shared.subscriptions import ResourceUpdated

from surfaces.surface_support import write_config
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.runtime import Team
from toolcards.surfaces.config import load_config
from toolcards.surfaces.mcp_server import listening
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.resources import ResourceCatalog
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

WS = "toolcards://workspace/w/"
BOARD = "toolcards://team/t/planning"


async def test_watching_subscribes_from_the_log_position_without_reading_the_log() -> None:
    with Team("mcp-position", ":memory:") as team:
        for i in range(5):
            team.log.append("#Noise", {"n": i})
        subscribed: list[int] = []

        def events(since: int = 0) -> list[Any]:
            raise AssertionError("the whole log was read")

        def subscribe(callback: Any, since: int = 0) -> Any:
            subscribed.append(since)
            return SimpleNamespace(close=lambda: None)

        team.events = events  # type: ignore[method-assign]
        team.subscribe = subscribe  # type: ignore[method-assign]
        catalog = ResourceCatalog(SimpleNamespace(team=team), MCPOptions(), lambda _: ANONYMOUS)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tasks:
            with catalog.watching(tasks):
                pass
            tasks.cancel_scope.cancel()
        assert subscribed == [team.log.position]


@contextlib.asynccontextmanager
async def served(base: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[GovernedMCPServer]:
    """A server of the planning board and the workspace ``w`` (``notes.txt``, ``victim.txt``
    and 64 files ``a00.txt``... that sort before them)."""
    ws = base / "workspaces" / "w"
    ws.mkdir(parents=True)
    for name in ["notes.txt", "victim.txt", *(f"a{i:02d}.txt" for i in range(64))]:
        (ws / name).write_text("v0", encoding="utf-8")
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(base / "workspaces"))
    (base / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    cards = [{"type": "WorkspaceTool", "workspace_id": "w"}, {"type": "PlanningTool"}]
    config = write_config(base, local=Identity("lead", "user", ["lead"]), tools=[],
                          policy=base / "policy.yaml", cards=cards, team_id="t")  # fmt: skip
    with SurfaceRuntime.from_config(load_config(config), durability="sync") as rt:
        server = GovernedMCPServer(rt)
        async with server.running():
            yield server


async def test_an_event_looks_no_resource_up_and_reaches_only_live_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subscription records what it watches: an event walks no workspace (each lookup did,
    per subscription, ended sessions' included), and a session's end forgets its own."""
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async with served(tmp_path, monkeypatch) as server:
        catalog = server.resources
        async with Client(server.server, mode="legacy") as gone:
            for i in range(8):
                await gone.session.subscribe_resource(f"{WS}./a{i:02d}.txt")
            await gone.session.subscribe_resource(BOARD)
        async with Client(server.server, mode="legacy", message_handler=on_message) as live:
            await live.session.subscribe_resource(BOARD)
            await live.session.subscribe_resource(f"{WS}notes.txt")
            lookups: list[str] = []
            walk = catalog.sources

            def sources() -> list[Any]:
                lookups.append("walk")
                return walk()

            monkeypatch.setattr(catalog, "sources", sources)
            await live.call_tool("update_planning", {"create": [{"description": "ship it"}]})
            with anyio.fail_after(10):
                while not updated:
                    await anyio.sleep(0.02)
            assert lookups == []
            assert [len(uris) for _session, uris in catalog._subs.values()] == [2]
    assert updated == [BOARD]


async def test_a_listen_is_kept_by_canonical_uri_and_shares_the_polls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 spellings of one file are one resource (updates name the first); a URI past
    4 KiB is unknown; a caller's 64 files that sort first leave another listener's file
    polled (only the first 64 listened URIs were, in sorted order)."""
    monkeypatch.setattr(listening, "POLL", 0.05)
    spellings = [WS + "%2E%2F" * i + "notes.txt" for i in range(1, 65)]
    too_long = WS + "./" * 2100 + "a00.txt"  # past 4 KiB
    files = [f"{WS}a{i:02d}.txt" for i in range(63)]
    async with (
        served(tmp_path, monkeypatch) as server,
        Client(server.server, mode="2026-07-28") as attacker,
        Client(server.server, mode="2026-07-28") as victim,
        attacker.listen(resource_subscriptions=spellings) as notes,
        attacker.listen(resource_subscriptions=[too_long, *files]) as many,
        victim.listen(resource_subscriptions=[f"{WS}victim.txt"]) as mine,
    ):
        assert notes.honored.resource_subscriptions == spellings[:1]
        assert many.honored.resource_subscriptions == files
        ws = tmp_path / "workspaces" / "w"
        got: dict[str, ResourceUpdated] = {}

        async def first(name: str, sub: Any) -> None:
            got[name] = await sub.__anext__()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(first, "victim", mine)
                tasks.start_soon(first, "notes", notes)
                for turn in range(1, 10_000):  # changed until a poll announces a change
                    (ws / "victim.txt").write_text(f"v{turn}", encoding="utf-8")
                    (ws / "notes.txt").write_text(f"v{turn}", encoding="utf-8")
                    await anyio.sleep(0.05)
                    if len(got) == 2:
                        break
    assert got["victim"].uri == f"{WS}victim.txt"
    assert got["notes"].uri == spellings[0]
