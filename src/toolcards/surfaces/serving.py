"""Run a runtime's MCP server (stdio or HTTP), with the CLI's control endpoint beside it
when it was opened from a config file with an embedded store (:mod:`.cli.control`; with a
PostgreSQL store every CLI process opens the team itself)."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from toolcards.surfaces.http.ports import MCP_PORT

if TYPE_CHECKING:
    from toolcards.surfaces.runtime import SurfaceRuntime


async def serve_runtime(
    rt: SurfaceRuntime,
    transport: str,
    *,
    host: str = "127.0.0.1",
    port: int = MCP_PORT,
    config: Path | None = None,
    dashboard: bool = False,
    sock: socket.socket | None = None,
) -> None:
    """Serve until the client leaves (stdio) or the process is signalled (HTTP). With
    ``dashboard`` (HTTP), the team's dashboard is at ``/`` and approval-required calls wait
    in its approvals inbox. ``sock`` (HTTP): a socket already bound to ``host:port``
    (:func:`toolcards.surfaces.http.ports.listen`)."""
    from toolcards.surfaces.card_toolsets import connected
    from toolcards.surfaces.cli.control import control_endpoint
    from toolcards.surfaces.policy_watch import watching_policy

    http = f"http://{host}:{port}/mcp" if transport == "http" else None
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(watching_policy(rt.policy))
        await stack.enter_async_context(connected(rt.toolsets))
        if config is not None and not (rt.config is not None and rt.config.shared_store):
            await stack.enter_async_context(control_endpoint(rt, config, http))
        if transport == "stdio":
            await _until_signalled(rt)
        elif transport == "http" and dashboard:
            from toolcards.surfaces.combined import run_mcp_with_dashboard

            await run_mcp_with_dashboard(
                rt, host=host, port=port, approval_timeout=rt.approval_timeout, sock=sock
            )
        elif transport == "http":
            from toolcards.surfaces.mcp_server.http import run_http

            await run_http(rt, host=host, port=port, sock=sock)
        else:
            raise ValueError("transport must be 'stdio' or 'http'")


async def _until_signalled(rt: SurfaceRuntime) -> None:
    """stdio until the client leaves, or SIGTERM/SIGINT (then cleanly, records removed)."""
    import signal

    import anyio

    from toolcards.surfaces.mcp_server.server import run_stdio

    async with anyio.create_task_group() as tasks:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(watch)
        await run_stdio(rt)
        tasks.cancel_scope.cancel()
