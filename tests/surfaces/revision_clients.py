"""Official-SDK ``Client``s pinned to one MCP revision against real `toolcards serve`
processes or, for behaviour that is not the transport's, the same governed server in process
on an in-memory connection; and a raw stdio line channel for what a client would not send
(unsupported versions)."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from surfaces.mcp_clients import http_client as sdk_http_client
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS
from toolcards.surfaces.config import load_config
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.runtime import SurfaceRuntime

MODERN = "2026-07-28"
"""The per-request-envelope revision (a ``Client`` in this mode opens no handshake)."""
LEGACY = "legacy"
"""The ``Client`` mode that opens with the initialize handshake (2025-11-25 offered)."""


def stdio_params(config: Path, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(TOOLCARDS),
        args=["serve", "--config", str(config)],
        env={**SURFACE_ENV, **(env or {})},
    )


@contextlib.asynccontextmanager
async def stdio_client(
    config: Path, mode: str, env: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """A ``Client`` in ``mode`` (``"legacy"`` or a revision) over a `toolcards serve` stdio
    subprocess."""
    async with Client(stdio_params(config, env), mode=mode, **options) as client:  # type: ignore[arg-type]
        yield client


@contextlib.asynccontextmanager
async def in_process_client(config: Path, mode: str, **options: Any) -> AsyncIterator[Client]:
    """A ``Client`` in ``mode`` on an in-memory connection to the governed MCP server of
    ``config``, as `toolcards serve` runs it (its local principal, its approval channel)."""
    with SurfaceRuntime.from_config(load_config(config)) as runtime:
        server = GovernedMCPServer(runtime)
        async with server.running(), Client(server.server, mode=mode, **options) as client:
            yield client


@contextlib.asynccontextmanager
async def http_client(
    url: str, mode: str, token: str | None = None, **options: Any
) -> AsyncIterator[Client]:
    """A ``Client`` in ``mode`` over streamable HTTP at ``url`` (bearer ``token``)."""
    headers = None if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        sdk_http_client(headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,  # type: ignore[arg-type]
    ):
        yield client


class StdioLines:
    """`toolcards serve` over stdio, one JSON-RPC message per line, stdin kept open."""

    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen(
            [str(TOOLCARDS), "serve", "--config", str(config)],
            env=SURFACE_ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.put(json.loads(line))

    def request(self, ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request; its response (other messages before it are dropped)."""
        assert self.proc.stdin is not None
        message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            found = self.lines.get(timeout=60)
            if found.get("id") == ident and "method" not in found:
                return found

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def envelope(version: str) -> dict[str, Any]:
    """The 2026-07-28 per-request ``_meta`` envelope claiming ``version``."""
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    }
