"""The MCP server's live resource updates start at the log's position, reading no event."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from toolcards.core.identity import ANONYMOUS
from toolcards.runtime import Team
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.resources import ResourceCatalog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


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
