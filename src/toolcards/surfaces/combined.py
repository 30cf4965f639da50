"""MCP and the dashboard on one port (``toolcards serve --transport http --dashboard``): MCP
at ``/mcp``, the dashboard under its secret path, approval-required calls waiting in the
dashboard's inbox.

It composes two wings (MCP serving and the dashboard), so it lives beside them, not in either.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.routing import Mount, Route

from toolcards.surfaces.approval import APPROVAL_TIMEOUT, OutOfBandApprovals
from toolcards.surfaces.dashboard.app import Dashboard
from toolcards.surfaces.dashboard.serve import dashboard_for, uvicorn_server, warn_if_exposed
from toolcards.surfaces.http.ports import MCP_PORT
from toolcards.surfaces.mcp_server.http import MCP_PATH, http_app

if TYPE_CHECKING:
    from toolcards.surfaces.http.tokens import TokenTable
    from toolcards.surfaces.mcp_server.options import MCPOptions
    from toolcards.surfaces.runtime import SurfaceRuntime


def mcp_with_dashboard(
    runtime: SurfaceRuntime,
    *,
    host: str = "127.0.0.1",
    approval_timeout: float = APPROVAL_TIMEOUT,
    page: str | None = None,
    options: MCPOptions | None = None,
    tokens: TokenTable | None = None,
    base_path: str | None = None,
) -> tuple[Any, Dashboard]:
    """One ASGI app: MCP at ``/mcp`` (approval-required calls wait in the dashboard's
    inbox, at most ``approval_timeout`` seconds, announced to the caller like without a
    dashboard, naming the page's address ``page``) and the dashboard under ``base_path``
    (default: a new secret one, ``dashboard.base_path``; ``tokens``: one-time sign-in tokens
    instead of the runtime's)."""
    dashboard = dashboard_for(runtime, host=host, tokens=tokens, base_path=base_path)
    assert dashboard.approvals is not None
    inbox = OutOfBandApprovals(dashboard.approvals, approval_timeout, page=page)
    mcp_app = http_app(runtime, host=host, approvals=inbox, options=options)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app), dashboard.lifespan():
            yield

    app = Starlette(
        routes=[
            Route(MCP_PATH, endpoint=mcp_app, methods=None),
            *runtime.http_auth().metadata_routes(),
            Mount("/", app=dashboard.app()),
        ],
        lifespan=lifespan,
    )
    return app, dashboard


async def run_mcp_with_dashboard(
    runtime: SurfaceRuntime,
    *,
    host: str = "127.0.0.1",
    port: int = MCP_PORT,
    approval_timeout: float = APPROVAL_TIMEOUT,
    sock: socket.socket | None = None,
    options: MCPOptions | None = None,
    tokens: TokenTable | None = None,
    base_path: str | None = None,
) -> None:
    """``toolcards serve --transport http --dashboard``: both on ``host:port`` (``sock``:
    a socket already bound there; ``tokens``: the dashboard's one-time sign-in tokens;
    ``base_path``: its secret path)."""
    warn_if_exposed(host)
    page = "the address this server printed"  # not the address: callers are agents, and its
    # secret path is what keeps a server of theirs from the approver's cookie
    app, _ = mcp_with_dashboard(
        runtime,
        host=host,
        approval_timeout=approval_timeout,
        page=page,
        options=options,
        tokens=tokens,
        base_path=base_path,
    )
    server = uvicorn_server(app, host, port, runtime.http_limits)
    await server.serve(None if sock is None else [sock])
