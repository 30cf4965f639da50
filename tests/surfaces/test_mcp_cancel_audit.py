"""A call an MCP client cancels (the official SDK sends ``notifications/cancelled``) ends in
exactly one audit row, under the call id its approval rows carry too: real `toolcards serve`
processes over stdio and over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from endings_support import (
    APPROVER,
    CALLER,
    Endings,
    endings_config,
    grant_when_pending,
    wait_running,
)
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_clients import http_session

from surfaces.surface_support import TOOLCARDS, HttpServer, token_for
from toolcards.governance import AuditLog

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

Opener = Callable[[], AbstractAsyncContextManager[ClientSession]]


@pytest.fixture(params=["stdio", "http"])
async def opened(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Endings, Opener]]:
    endings = endings_config(tmp_path, approval_timeout=60)
    if request.param == "stdio":
        params = StdioServerParameters(
            command=str(TOOLCARDS), args=["serve", "--config", str(endings.config)], env=endings.env
        )

        def stdio() -> AbstractAsyncContextManager[ClientSession]:
            return _stdio_session(params)

        yield endings, stdio
        return
    server = HttpServer(endings.config, env=endings.env)
    try:
        yield endings, lambda: http_session(server.url, token_for(CALLER))
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def _stdio_session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def cancel_while_running(
    session: ClientSession,
    endings: Endings,
    tool: str,
    tag: str,
    meanwhile: Callable[[], Awaitable[Any]] | None = None,
) -> None:
    """Call ``tool``, then cancel the request (the client sends notifications/cancelled) once
    the tool runs; the session stays usable."""
    with anyio.fail_after(90):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(session.call_tool, tool, {"tag": tag})
            if meanwhile is not None:
                await meanwhile()
            await wait_running(endings.marks, tag)
            tasks.cancel_scope.cancel()
        await session.send_ping()


async def test_cancelled_calls_of_two_sessions_have_one_row_each_under_their_own_ids(
    opened: tuple[Endings, Opener],
) -> None:
    endings, open_session = opened
    for tag in ("cancel-first", "cancel-second"):  # same request ids in both sessions
        async with open_session() as session:
            await cancel_while_running(session, endings, "hold", tag)
    first, second = endings.settled_rows("cancel-first"), endings.settled_rows("cancel-second")
    assert [(r.outcome, r.principal) for r in first + second] == [("cancelled", CALLER.id)] * 2
    with AuditLog(endings.audit) as log:
        ids = [e.call_id for e in log.query(limit=1000)]
    assert first[0].call_id != second[0].call_id
    assert ids.count(first[0].call_id) == ids.count(second[0].call_id) == 1


async def test_a_cancelled_approved_call_has_one_row_under_its_approval_call_id(
    opened: tuple[Endings, Opener],
) -> None:
    endings, open_session = opened
    tag = "cancel-approved"
    async with open_session() as session:

        async def approve() -> None:
            await grant_when_pending(endings, tag)

        await cancel_while_running(session, endings, "hold_approved", tag, approve)
        rows = endings.settled_rows(tag)
    everything = endings.rows(tag)
    assert [(r.outcome, r.principal) for r in rows] == [("cancelled", CALLER.id)]
    granted = [r for r in everything if r.outcome == "approval_granted"]
    assert [(r.principal, r.call_id) for r in granted] == [(APPROVER.id, rows[0].call_id)]
    assert {r.call_id for r in everything} == {rows[0].call_id}
