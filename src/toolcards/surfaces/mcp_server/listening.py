"""``subscriptions/listen`` (MCP 2026-07-28): a client's listen request is the stream of
``notifications/resources/updated`` for the resources it names (the planning board, the
graph, a workspace file...).

Filtered by what the principal may read: a URI the caller could not read (or that does not
exist) is left out of the acknowledged filter, exactly as ``resources/subscribe`` refuses it.
Bounded: at most :data:`MAX_URIS` URIs per listen, :data:`PER_PRINCIPAL` open listens per
principal and :data:`MAX_STREAMS` in all; each resource is announced at most once per
:data:`INTERVAL` seconds (changes in between are announced once, at its end). Resources the
team's events change (``watch``) are announced from those events; others (workspace files) are
read every :data:`POLL` seconds, at most :data:`MAX_POLLED` of them, and announced when their
content changed.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import mcp.types as types
from anyio.abc import TaskGroup
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from toolcards.core.identity import Identity

log = logging.getLogger(__name__)

MAX_URIS = 64
PER_PRINCIPAL = 8
MAX_STREAMS = 256
INTERVAL = 0.5
POLL = 2.0
MAX_POLLED = 64


class Catalog(Protocol):
    """What listening reads of the resource catalog (:mod:`.resources`)."""

    def find(self, uri: str) -> tuple[Any, str, Callable[[], str | bytes]] | None: ...

    def subscribable(self, who: Identity, uri: str) -> str | None: ...


class Listening:
    """Serves ``subscriptions/listen`` over a resource catalog."""

    def __init__(self, catalog: Catalog, identity_of: Callable[[Any], Identity]) -> None:
        self.catalog = catalog
        self.identity_of = identity_of
        self.bus = InMemorySubscriptionBus()
        self.handler = ListenHandler(self.bus, max_subscriptions=MAX_STREAMS)
        self._streams: dict[object, tuple[str, frozenset[str]]] = {}
        self._last: dict[str, float] = {}
        self._due: set[str] = set()
        self._digests: dict[str, str] = {}
        self._group: TaskGroup | None = None

    async def listen(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        who = self.identity_of(ctx)
        asked = list(params.notifications.resource_subscriptions or [])
        if len(asked) > MAX_URIS:
            raise MCPError(-32602, f"at most {MAX_URIS} resources per listen")
        if Counter(p for p, _ in self._streams.values())[who.id] >= PER_PRINCIPAL:
            raise MCPError(-32603, f"at most {PER_PRINCIPAL} open listens per caller")
        key = object()
        self._streams[key] = (who.id, frozenset())  # counted from the check on, before any wait
        try:
            readable = []
            for uri in dict.fromkeys(asked):
                if await anyio.to_thread.run_sync(self.catalog.subscribable, who, uri):
                    readable.append(uri)
            honored = params.notifications.model_copy(
                update={"resource_subscriptions": readable or None}
            )
            self._streams[key] = (who.id, frozenset(readable))
            return await self.handler(ctx, params.model_copy(update={"notifications": honored}))
        finally:
            del self._streams[key]

    def listened(self) -> set[str]:
        return {uri for _, uris in self._streams.values() for uri in uris}

    async def changed(self, actor: str) -> None:
        """The team's events of ``actor`` changed what it holds: announce what watches it."""
        found = [
            uri
            for uri in self.listened()
            if (hit := self.catalog.find(uri)) is not None and actor in hit[0].watch
        ]
        for uri in found:
            await self.announce(uri)

    async def announce(self, uri: str) -> None:
        """``uri`` changed: announced now, or once at the end of its interval."""
        wait = self._last.get(uri, 0.0) + INTERVAL - time.monotonic()
        if wait <= 0:
            self._last[uri] = time.monotonic()
            await self.bus.publish(ResourceUpdated(uri=uri))
        elif uri not in self._due and self._group is not None:
            self._due.add(uri)
            self._group.start_soon(self._later, uri, wait)

    async def _later(self, uri: str, wait: float) -> None:
        await anyio.sleep(wait)
        self._due.discard(uri)
        self._last[uri] = time.monotonic()
        await self.bus.publish(ResourceUpdated(uri=uri))

    async def poll(self, group: TaskGroup) -> None:
        """Read the listened resources no event announces, and announce a changed one."""
        self._group = group
        while True:
            await anyio.sleep(POLL)
            unwatched = [
                uri
                for uri in sorted(self.listened())
                if (hit := self.catalog.find(uri)) is not None and not hit[0].watch
            ][:MAX_POLLED]
            for uri in unwatched:
                digest = await anyio.to_thread.run_sync(self._digest, uri)
                before = self._digests.get(uri)
                self._digests[uri] = digest
                if before is not None and digest != before:
                    await self.announce(uri)
            for uri in set(self._digests) - set(unwatched):
                del self._digests[uri]

    def _digest(self, uri: str) -> str:
        """The digest of what a read of ``uri`` answers now (empty when it cannot be read)."""
        found = self.catalog.find(uri)
        if found is None:
            return ""
        try:
            content = found[2]()
        except Exception:
            return ""
        data = content if isinstance(content, bytes) else content.encode("utf-8", "replace")
        return hashlib.sha256(data).hexdigest()
