"""The uvicorn server of the HTTP surfaces (imported when one starts: uvicorn is not light)."""

from __future__ import annotations

import socket

import uvicorn


class GuardedServer(uvicorn.Server):
    """uvicorn's server whose shutdown first marks its guarded protocol ``stopping`` (see
    :mod:`toolcards.surfaces.http.guard`): a connection accepted just before the listening
    socket closed, but made after uvicorn asked the open ones to shut down, is closed at once
    instead of holding the shutdown until its deadline."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        protocol = getattr(self.config, "http_protocol_class", None)
        if protocol is not None and hasattr(protocol, "stopping"):
            protocol.stopping = True
        await super().shutdown(sockets)
