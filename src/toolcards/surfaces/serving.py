"""Run a runtime's MCP server (stdio or HTTP), with the CLI's control endpoint beside it
when it was opened from a config file (:mod:`.control`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolcards.surfaces.runtime import SurfaceRuntime


async def serve_runtime(
    rt: SurfaceRuntime,
    transport: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    config: Path | None = None,
) -> None:
    """Serve until the client leaves (stdio) or the process is signalled (HTTP)."""
    from toolcards.surfaces.control import control_endpoint

    http = f"http://{host}:{port}/mcp" if transport == "http" else None
    async with contextlib.AsyncExitStack() as stack:
        if config is not None:
            await stack.enter_async_context(control_endpoint(rt, config, http))
        if transport == "stdio":
            from toolcards.surfaces.mcp_server import run_stdio

            await run_stdio(rt)
        elif transport == "http":
            from toolcards.surfaces.mcp_http import run_http

            await run_http(rt, host=host, port=port)
        else:
            raise ValueError("transport must be 'stdio' or 'http'")
