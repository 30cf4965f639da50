"""Streamable HTTP transport: bearer-token callers, loopback by default.

``Authorization: Bearer <token>`` is checked against the configured sha256 digests in
constant time, or as a JWT of the configured OAuth issuer (:mod:`toolcards.surfaces.http.auth`,
which also serves the protected-resource metadata). No header: the caller is anonymous (a
default-deny policy rejects it; with OAuth, 401 and the challenge). A token that matches
nothing, or another scheme: 401 before any MCP processing. Sessions are
bound to the caller that opened it and bounded per caller and in total
(:mod:`.sessions`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

from toolcards.core import outside_json
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.surfaces.approval import ApprovalChannel
from toolcards.surfaces.config import SessionLimits
from toolcards.surfaces.http.auth import BearerAuth
from toolcards.surfaces.http.guard import server_config
from toolcards.surfaces.http.limits import BodyLimit, HttpLimits, replaying
from toolcards.surfaces.http.ports import local_names
from toolcards.surfaces.http.server import GuardedServer
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.server import IDENTITY_SCOPE_KEY, GovernedMCPServer
from toolcards.surfaces.mcp_server.sessions import (
    ASGIApp,
    InFlight,
    Receive,
    Scope,
    Send,
    SessionGuard,
    manager_sessions,
    reply,
)
from toolcards.surfaces.mcp_server.stdio import checked_message, invalid_request
from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"


def identity_from_scope(ctx: Any) -> Identity:
    """The caller the middleware resolved for this request (anonymous when absent)."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    found = scope.get(IDENTITY_SCOPE_KEY)
    return found if isinstance(found, Identity) else ANONYMOUS


class _RoutineDisconnects(logging.Filter):
    """A client that goes away mid-stream is routine: its ``ClosedResourceError`` /
    ``BrokenResourceError`` tracebacks are logged at debug, not as errors; so is the
    ``RuntimeError`` of an answer the server then fails to send while handling one (the SDK
    answers a notification of a client that left, whose 202 went out already)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _is_disconnect(exc) and record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
        return True
    if isinstance(exc, RuntimeError) and exc.__context__ is not None:
        return _is_disconnect(exc.__context__)
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_disconnect(e) for e in exc.exceptions)
    return False


_DISCONNECT_LOGGERS = (
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "mcp.server.runner",
    "mcp.shared.jsonrpc_dispatcher",
    "uvicorn.error",
)


def quiet_disconnects() -> None:
    """Install the routine-disconnect filter on the transport's loggers (idempotent)."""
    for name in _DISCONNECT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RoutineDisconnects) for f in logger.filters):
            logger.addFilter(_RoutineDisconnects())


MAX_INITIALIZE = 16_384
"""Bytes of one ``initialize`` request: the SDK keeps its params as long as the session lives
(an initialize of 4 MiB of empty objects held 108 MiB), while clients send a few hundred."""
MAX_INITIALIZE_VALUES = 1_000
"""Values of one ``initialize`` request (see :data:`~toolcards.core.outside_json.MAX_VALUES`):
16 KiB of empty objects would still keep 400 KiB; clients send a few dozen."""


class JsonRpcEdge:
    """ASGI middleware: a POST whose body is not JSON-RPC 2.0 (or an ``initialize`` beyond
    :data:`MAX_INITIALIZE` bytes or :data:`MAX_INITIALIZE_VALUES` values) gets the JSON-RPC
    error (-32700 / -32600) before the SDK sees it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        problem = _post_problem(body)
        if problem is not None:
            await reply(send, 400, json.dumps(problem).encode(), b"application/json")
            return
        await self.app(scope, replaying(body, receive), send)


def _post_problem(body: bytes) -> dict[str, Any] | None:
    data, problem = checked_message(body)
    if data is None or not _large(body):
        return problem
    if data.get("method") != "initialize":
        return None
    limits = f"{MAX_INITIALIZE:,} bytes and {MAX_INITIALIZE_VALUES:,} values"
    return invalid_request(data.get("id"), f"an initialize request holds at most {limits}")


def _large(body: bytes) -> bool:
    """Too large for an ``initialize`` (only such a body has its method looked at, to tell)."""
    return len(body) > MAX_INITIALIZE or outside_json.over_values(body, MAX_INITIALIZE_VALUES)


def http_app(
    runtime: SurfaceRuntime,
    *,
    host: str = "127.0.0.1",
    approvals: ApprovalChannel | None = None,
    sessions: SessionLimits | None = None,
    limits: HttpLimits | None = None,
    options: MCPOptions | None = None,
) -> Any:
    """The Starlette app serving MCP at ``/mcp`` for ``runtime`` (``approvals``: who decides
    approval-required calls, see :class:`~toolcards.surfaces.approval.ApprovalChannel`;
    ``sessions``: their bounds, by default the config's; ``limits``: request bodies, by
    default the runtime's, see :mod:`toolcards.surfaces.http.limits`; ``options``: the
    server's own, see :class:`~toolcards.surfaces.mcp_server.options.MCPOptions`)."""
    if sessions is None:
        sessions = runtime.config.sessions if runtime.config is not None else SessionLimits()
    in_flight = InFlight(sessions.per_principal)  # one count for both protocol revisions
    mcp_server = GovernedMCPServer(
        runtime,
        identity_of=identity_from_scope,
        approvals=approvals,
        options=options,
        in_flight=in_flight,
    )
    # SSE responses (not plain JSON): an approval asks the human mid-call, on the call's stream
    manager = StreamableHTTPSessionManager(
        app=mcp_server.server,
        security_settings=_rebinding_guard(host),
        session_idle_timeout=sessions.idle_timeout,
        max_sessions=sessions.max,
    )
    guard = SessionGuard(
        JsonRpcEdge(manager.handle_request),
        manager_sessions(manager),
        sessions,
        IDENTITY_SCOPE_KEY,
        in_flight,
    )
    auth = runtime.http_auth()
    # the caller first: a request without a credential is refused before its body is read
    handler = BearerAuth(BodyLimit(guard, limits or runtime.http_limits), auth, IDENTITY_SCOPE_KEY)
    quiet_disconnects()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with mcp_server.running(), manager.run():
            yield

    routes = [Route(MCP_PATH, endpoint=handler, methods=None), *auth.metadata_routes()]
    return Starlette(routes=routes, lifespan=lifespan)


def _rebinding_guard(host: str) -> TransportSecuritySettings | None:
    """On a ``host`` that binds loopback, requests addressed to other names (421) or sent by pages
    of other origins (403) are refused: a web page whose DNS name is rebound to this machine
    cannot reach the server (on any loopback address, 127.0.0.2 or a name bound to 127.0.1.1)."""
    names = local_names(host)
    if names is None:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"http://{name}:*" for name in names],
    )


async def run_http(
    runtime: SurfaceRuntime,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    on_ready: Callable[[], None] | None = None,
    sock: socket.socket | None = None,
    options: MCPOptions | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled or signalled
    (``sock``: a socket already bound there, see :mod:`toolcards.surfaces.http.ports`)."""
    if local_names(host) is None:
        log.warning("serving MCP on %s: reachable beyond this machine", host)

    class Server(GuardedServer):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """Shut down on SIGINT/SIGTERM, then return normally (uvicorn would re-raise
            the signal, killing the process before the caller's cleanup runs)."""
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    app = http_app(runtime, host=host, options=options)
    config = server_config(app, host, port, runtime.http_limits)
    server = Server(config)
    sockets = None if sock is None else [sock]
    if on_ready is None:
        await server.serve(sockets)
        return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve, sockets)
        while not server.started:
            await anyio.sleep(0.01)
        on_ready()
