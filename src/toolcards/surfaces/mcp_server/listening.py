"""``subscriptions/listen`` (MCP 2026-07-28): a client's listen request is the stream of
``notifications/resources/updated`` for the resources it names (the planning board, the
graph, a workspace file...).

Filtered by what the principal may read: a URI the caller could not read (or that does not
exist) is left out of the acknowledged filter, exactly as ``resources/subscribe`` refuses it.
A listen is kept by the resources' canonical URIs (spellings of one resource are one: the
first names its updates on that stream), with what each watches recorded when it is made, so
an event or a poll never looks a resource up. Bounded: at most :data:`MAX_URIS` URIs per
listen, :data:`PER_PRINCIPAL` open listens per principal and :data:`MAX_STREAMS` in all; each
resource is announced at most once per :data:`INTERVAL` seconds (changes in between are
announced once, at its end). Resources the team's events change (``watch``) are announced
from those events; others (workspace files) are read every :data:`POLL` seconds, at most
:data:`MAX_POLLED` of them shared among the callers, and announced when their content changed.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

import anyio
import mcp.types as types
from anyio.abc import TaskGroup
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from toolcards.core.identity import Identity

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_URIS = 64
PER_PRINCIPAL = 8
MAX_STREAMS = 256
INTERVAL = 0.5
POLL = 2.0
MAX_POLLED = 64


class Watched(NamedTuple):
    """What a subscription to a resource watches, recorded when it is made so that an event
    or a poll never looks the resource up again (a lookup walks the workspace)."""

    uri: str
    """The resource's canonical URI: spellings of one resource are one subscription."""
    watch: tuple[str, ...]
    """The team actors whose events change it; none: it is polled."""
    read: Callable[[], str | bytes]


class Catalog(Protocol):
    """What listening reads of the resource catalog (:mod:`.resources`)."""

    def subscribable(self, who: Identity, uri: str) -> Watched | None: ...


Stream = tuple[str, dict[str, tuple[str, Watched]]]
"""A listen: its principal and, by canonical URI, the spelling it asked for and what it
watches."""


class Listening:
    """Serves ``subscriptions/listen`` over a resource catalog."""

    def __init__(self, catalog: Catalog, identity_of: Callable[[Any], Identity]) -> None:
        self.catalog = catalog
        self.identity_of = identity_of
        self.bus = InMemorySubscriptionBus()
        self.handler = ListenHandler(self.bus, max_subscriptions=MAX_STREAMS)
        self._streams: dict[object, Stream] = {}
        self._last: dict[str, float] = {}
        self._due: set[str] = set()
        self._digests: dict[str, str] = {}
        self._turn = 0
        self._group: TaskGroup | None = None

    async def listen(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        who = self.identity_of(ctx)
        asked = list(params.notifications.resource_subscriptions or [])
        if len(asked) > MAX_URIS:
            raise MCPError(-32602, f"at most {MAX_URIS} resources per listen")
        if Counter(p for p, _ in self._streams.values())[who.id] >= PER_PRINCIPAL:
            raise MCPError(-32603, f"at most {PER_PRINCIPAL} open listens per caller")
        key = object()
        self._streams[key] = (who.id, {})  # counted from the check on, before any wait
        try:
            uris: dict[str, tuple[str, Watched]] = {}
            for uri in dict.fromkeys(asked):
                watched = await anyio.to_thread.run_sync(self.catalog.subscribable, who, uri)
                if watched is not None:  # the first spelling of a resource names its updates
                    uris.setdefault(watched.uri, (uri, watched))
            readable = [spelling for spelling, _ in uris.values()]
            honored = params.notifications.model_copy(
                update={"resource_subscriptions": readable or None}
            )
            self._streams[key] = (who.id, uris)
            return await self.handler(ctx, params.model_copy(update={"notifications": honored}))
        finally:
            del self._streams[key]

    def listened(self) -> set[str]:
        """The canonical URIs listened to."""
        return {uri for _, uris in self._streams.values() for uri in uris}

    async def changed(self, actor: str) -> None:
        """The team's events of ``actor`` changed what it holds: announce what watches it."""
        found = {
            uri
            for _, uris in self._streams.values()
            for uri, (_spelling, watched) in uris.items()
            if actor in watched.watch
        }
        for uri in found:
            await self.announce(uri)

    async def announce(self, uri: str) -> None:
        """The resource ``uri`` (canonical) changed: announced now, or once at the end of its
        interval."""
        wait = self._last.get(uri, 0.0) + INTERVAL - time.monotonic()
        if wait <= 0:
            await self._publish(uri)
        elif uri not in self._due and self._group is not None:
            self._due.add(uri)
            self._group.start_soon(self._later, uri, wait)

    async def _later(self, uri: str, wait: float) -> None:
        await anyio.sleep(wait)
        self._due.discard(uri)
        await self._publish(uri)

    async def _publish(self, uri: str) -> None:
        """Announce ``uri`` to each listen under the spelling it asked for."""
        self._last[uri] = time.monotonic()
        spellings = {uris[uri][0] for _, uris in self._streams.values() if uri in uris}
        for spelling in spellings:
            await self.bus.publish(ResourceUpdated(uri=spelling))

    async def poll(self, group: TaskGroup) -> None:
        """Read the listened resources no event announces, and announce a changed one."""
        self._group = group
        while True:
            await anyio.sleep(POLL)
            for watched in self._polled():
                digest = await anyio.to_thread.run_sync(_digest, watched.read)
                before = self._digests.get(watched.uri)
                self._digests[watched.uri] = digest
                if before is not None and digest != before:
                    await self.announce(watched.uri)
            listened = self.listened()  # what no listen names any more is forgotten
            self._digests = {u: d for u, d in self._digests.items() if u in listened}
            self._last = {u: t for u, t in self._last.items() if u in listened}

    def _polled(self) -> list[Watched]:
        """At most :data:`MAX_POLLED` of the listened resources no event announces, shared
        fairly: one of each caller's, then a second of each... (a caller's own: one of each of
        its listens in turn), each round starting further along, so that many listens crowd
        out no other caller's and leave none of their own unpolled for ever."""
        lists: dict[str, list[list[Watched]]] = {}
        for principal, uris in self._streams.values():
            polled = [watched for _, watched in uris.values() if not watched.watch]
            lists.setdefault(principal, []).append(polled)
        turn, self._turn = self._turn, self._turn + 1
        share = max(1, MAX_POLLED // max(1, len(lists)))
        callers = [_turned(_in_turn(mine), turn * share) for mine in lists.values()]
        return _in_turn(_turned(callers, turn))[:MAX_POLLED]


def _in_turn(lists: list[list[Watched]]) -> list[Watched]:
    """The resources of ``lists``, the first of each, then the second of each... (each once)."""
    picked: dict[str, Watched] = {}
    for row in itertools.zip_longest(*lists):
        for watched in row:
            if watched is not None:
                picked.setdefault(watched.uri, watched)
    return list(picked.values())


def _turned(items: list[T], by: int) -> list[T]:
    """``items`` rotated left ``by`` places."""
    at = by % len(items) if items else 0
    return items[at:] + items[:at]


def _digest(read: Callable[[], str | bytes]) -> str:
    """The digest of what ``read`` answers now (empty when it cannot be read)."""
    try:
        content = read()
    except Exception:
        return ""
    data = content if isinstance(content, bytes) else content.encode("utf-8", "replace")
    return hashlib.sha256(data).hexdigest()
