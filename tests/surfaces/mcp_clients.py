"""Official `mcp` client sessions against real `toolcards serve` processes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from surfaces.surface_support import SURFACE_ENV, TOOLCARDS
from toolcards.core.tls import default_verify


def http_client(headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
    """The HTTP client the SDK's transports use by default (30 s, 300 s to read a stream),
    with ``headers`` on every request (and the process's shared TLS context: the servers are
    plain HTTP on loopback, and a context of its own costs each client 25 ms of CPU)."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
        verify=default_verify(httpx2),
    )


@contextlib.asynccontextmanager
async def stdio_session(
    config: Path, env: dict[str, str] | None = None, **session: Any
) -> AsyncIterator[ClientSession]:
    """A session with ``toolcards serve`` over stdio (``env`` added to the surface env)."""
    params = StdioServerParameters(
        command=str(TOOLCARDS),
        args=["serve", "--config", str(config)],
        env={**SURFACE_ENV, **(env or {})},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **session) as s:
        await s.initialize()
        yield s


@contextlib.asynccontextmanager
async def http_session(
    url: str, token: str | None = None, **session: Any
) -> AsyncIterator[ClientSession]:
    headers = None if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        http_client(headers) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write, **session) as s,
    ):
        await s.initialize()
        yield s
