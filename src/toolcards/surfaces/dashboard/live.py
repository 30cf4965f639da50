"""Live updates: one team subscription fanned out to every open page over Server-Sent Events
(each event with its secrets redacted, as the audit panel shows arguments).

The team delivers its events on a subscription thread; each connected page has a bounded
queue on the server's event loop. A page that connects with ``since`` (the log position its
HTML was rendered at) first gets the events it missed, then live ones, without duplicates.
Pending approvals are watched too (their store may be shared with other processes), so the
inbox changes on the page when a call starts or stops waiting: by their ids only, as the
watcher polls several times a second (the inbox itself is read when the page asks for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor
from toolcards.surfaces.dashboard.views import event_item

if TYPE_CHECKING:
    from toolcards.core.events import ToolStateEvent
    from toolcards.governance.approvals.broker import ApprovalBroker
    from toolcards.runtime.events import Subscription
    from toolcards.runtime.team import Team

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000
APPROVAL_POLL = 0.25
MAX_REPLAY = 500
Message = tuple[str, dict[str, Any]]
_CLOSE: Message = ("close", {})


class LiveHub:
    """Fans team events and approval changes out to the connected pages."""

    def __init__(
        self,
        team: Team | None,
        broker: ApprovalBroker | None,
        redactor: Redactor = DEFAULT_REDACTOR,
    ) -> None:
        self.team = team
        self.broker = broker
        self.redactor = redactor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: set[asyncio.Queue[Message]] = set()
        self._sub: Subscription | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._pending: tuple[str, ...] = ()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        team = self.team
        if team is not None and team.running:
            self._sub = team.subscribe(self._on_event, since=team.log.position)
        if self.broker is not None:
            self._watcher = asyncio.create_task(self._watch_approvals())

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await anyio.to_thread.run_sync(sub.close)
        for queue in list(self._clients):
            self._put(queue, _CLOSE)

    # -- fan-out ---------------------------------------------------------------------------

    def _on_event(self, event: ToolStateEvent) -> None:  # the subscription's thread
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        item = event_item(event, self.redactor)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._broadcast, ("team", item))

    def _broadcast(self, message: Message) -> None:
        for queue in list(self._clients):
            self._put(queue, message)

    @staticmethod
    def _put(queue: asyncio.Queue[Message], message: Message) -> None:
        try:
            queue.put_nowait(message)
        except asyncio.QueueFull:  # a stalled page: tell it to reload what it shows
            with contextlib.suppress(asyncio.QueueEmpty):
                while True:
                    queue.get_nowait()
            queue.put_nowait(("resync", {}))

    async def _watch_approvals(self) -> None:
        broker = self.broker
        assert broker is not None
        while True:
            if self._clients:  # the ids alone: no arguments read, no expired row removed
                try:
                    ids = tuple(await anyio.to_thread.run_sync(broker.pending_ids))
                except Exception:  # a store that went away: say so once per change
                    log.exception("reading pending approvals failed")
                    ids = ()
                if ids != self._pending:
                    self._pending = ids
                    self._broadcast(("approvals", {"count": len(ids)}))
            await asyncio.sleep(APPROVAL_POLL)

    # -- one page --------------------------------------------------------------------------

    async def stream(self, since: int | None) -> AsyncIterator[Message]:
        """The messages for one page: missed events after ``since``, then live ones."""
        queue: asyncio.Queue[Message] = asyncio.Queue(QUEUE_SIZE)
        self._clients.add(queue)
        try:
            yield ("hello", {"approvals": len(self._pending)})
            seen: set[tuple[str, int]] = set()
            for item in await anyio.to_thread.run_sync(self._missed, since):
                seen.add((item["tool_id"], item["seq"]))
                yield ("team", item)
            while True:
                kind, data = await queue.get()
                if kind == "close":
                    return
                if kind == "team" and (data["tool_id"], data["seq"]) in seen:
                    continue
                yield kind, data
        finally:
            self._clients.discard(queue)

    def _missed(self, since: int | None) -> list[dict[str, Any]]:
        team = self.team
        if team is None or since is None or not team.running:
            return []
        start = max(since, team.log.position - MAX_REPLAY, 0)
        return [event_item(e, self.redactor) for _, e in team.log.entries(start)]

    @property
    def clients(self) -> int:
        return len(self._clients)
