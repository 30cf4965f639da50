"""``notifications/progress`` for a tool call whose client passed a progress token: binds
:func:`toolcards.core.progress.report_progress` to the call's request.

Reports may come from the event loop (async tools) or a worker thread (sync tools); each is
sent in order, only when ``progress`` grew, and all are sent before the call's result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolcards.core.progress import progress_reporter

_DRAIN_TIMEOUT = 2.0


class CallProgress:
    """The progress channel of one call (a no-op when the client asked for none)."""

    def __init__(self, ctx: Any) -> None:
        raw = getattr(ctx, "params", None) or {}
        meta = raw.get("_meta") if isinstance(raw, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.token = token if isinstance(token, str | int) and not isinstance(token, bool) else None
        self._session = ctx.session
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._last: float | None = None
        self._lock = threading.Lock()
        self._pending: list[asyncio.Task[None]] = []

    @property
    def wanted(self) -> bool:
        return self.token is not None

    def report(self, progress: float, total: float | None, message: str | None) -> None:
        with self._lock:
            if self._last is not None and progress <= self._last:
                return
            self._last = progress
        if threading.get_ident() == self._thread:
            self._start(progress, total, message)
        else:
            self._loop.call_soon_threadsafe(self._start, progress, total, message)

    def _start(self, progress: float, total: float | None, message: str | None) -> None:
        previous = self._pending[-1] if self._pending else None
        task = self._loop.create_task(self._send(previous, progress, total, message))
        self._pending.append(task)

    async def _send(
        self,
        previous: asyncio.Task[None] | None,
        progress: float,
        total: float | None,
        message: str | None,
    ) -> None:
        if previous is not None:  # keep them in order
            await asyncio.gather(previous, return_exceptions=True)
        try:
            await self._session.report_progress(progress, total, message)
        except Exception:
            return

    @contextmanager
    def bound(self) -> Iterator[None]:
        if not self.wanted:
            yield
            return
        with progress_reporter(self.report):
            yield

    async def drain(self) -> None:
        """Wait (briefly) until every report made so far is sent (a worker thread's reports
        reached the loop before its result did)."""
        if self._pending:
            await asyncio.wait(self._pending, timeout=_DRAIN_TIMEOUT)
            self._pending.clear()
