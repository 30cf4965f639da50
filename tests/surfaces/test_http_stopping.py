"""A connection the server accepted just before its listening socket closed, but made (its
protocol set up) after uvicorn asked the open connections to shut down, is closed at once: it
would otherwise hold the shutdown until its header deadline or the shutdown timeout. The
connections here are real sockets handed to the guarded protocol as the event loop hands it
an accepted one, before and after the server's shutdown began."""

from __future__ import annotations

import asyncio
import socket

from starlette.applications import Starlette

from toolcards.surfaces.http.guard import server_config
from toolcards.surfaces.http.limits import HttpLimits
from toolcards.surfaces.http.server import GuardedServer

LIMITS = HttpLimits(header_timeout=300, body_timeout=300, shutdown_timeout=60)


async def _made_then_read(server: GuardedServer) -> bytes | None:
    """Hand an accepted socket to the server's protocol; what its peer reads within 2 s
    (b"": closed), or None when the connection stays open."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    config = server.config
    await loop.connect_accepted_socket(
        lambda: config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state={}
        ),
        ours,
    )
    theirs.setblocking(False)
    try:
        return await asyncio.wait_for(loop.sock_recv(theirs, 1024), timeout=2)
    except TimeoutError:
        return None
    finally:
        theirs.close()


def test_a_connection_made_after_the_shutdown_began_is_closed_at_once() -> None:
    async def scenario() -> tuple[bytes | None, bool, bytes | None]:
        server = GuardedServer(server_config(Starlette(), "127.0.0.1", 0, LIMITS))
        server.config.load()
        server.servers = []  # as after a start-up: nothing listening here
        server.force_exit = True  # no lifespan to end (the app was never started)
        before = await _made_then_read(server)
        await server.shutdown()
        stopping = bool(getattr(server.config.http_protocol_class, "stopping", False))
        after = await _made_then_read(server)
        return before, stopping, after

    before, stopping, after = asyncio.run(scenario())
    assert before is None  # a connection made while serving waits for its request
    assert stopping
    assert after == b""  # closed at once, nothing sent


def test_each_server_config_has_a_protocol_of_its_own() -> None:
    """Stopping one server (the dashboard) leaves another's connections (MCP) alone."""
    first = server_config(Starlette(), "127.0.0.1", 0, LIMITS)
    second = server_config(Starlette(), "127.0.0.1", 0, LIMITS)
    first.load()
    second.load()
    first_protocol = first.http_protocol_class
    second_protocol = second.http_protocol_class
    assert first_protocol is not second_protocol
    server = GuardedServer(first)
    server.servers = []
    server.force_exit = True
    asyncio.run(server.shutdown())
    assert getattr(first_protocol, "stopping", False)
    assert not getattr(second_protocol, "stopping", True)
