"""A wake-up timer over a heap of due times, and a delivery thread.

:class:`DueScheduler` sleeps on a condition until the earliest due time (or until an entry is
pushed or the clock is kicked), pops every key that is due and hands them to a callback: no
per-second scan of all entries. :class:`Courier` runs possibly-blocking deliveries off the
caller's thread, one at a time, in order.
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from toolcards.core.threads import background_thread

logger = logging.getLogger(__name__)

MAX_WAIT = 30.0
"""Longest single sleep: a wall-clock jump is noticed within this many seconds."""


class DueScheduler:
    """Calls ``on_due(keys)`` on its own thread once each key's due time has passed.

    Times come from ``clock`` (wall-clock seconds by default), so a due time stored before a
    restart is honoured after it. :meth:`push` reschedules a known key; :meth:`discard` drops
    one (lazily: its heap slot is skipped when it surfaces).
    """

    def __init__(
        self,
        on_due: Callable[[list[int]], Any],
        *,
        clock: Callable[[], float] = time.time,
        name: str = "due-scheduler",
    ) -> None:
        self._on_due = on_due
        self._clock = clock
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._due: dict[int, float] = {}
        self._stopped = False
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        with self._cond:
            return len(self._due)

    def next_due(self) -> float | None:
        """The earliest pending due time, or None."""
        with self._cond:
            self._drop_stale()
            return self._heap[0][0] if self._heap else None

    def push(self, due_at: float, key: int) -> None:
        """Schedule (or reschedule) ``key`` at ``due_at``."""
        with self._cond:
            self._due[key] = due_at
            heapq.heappush(self._heap, (due_at, key))
            if len(self._heap) > 2 * len(self._due) + 64:  # many stale slots: rebuild
                self._heap = [(due, k) for k, due in self._due.items()]
                heapq.heapify(self._heap)
            self._cond.notify()

    def discard(self, key: int) -> None:
        """Forget ``key`` (no error when unknown)."""
        with self._cond:
            self._due.pop(key, None)

    def kick(self) -> None:
        """Re-read the clock now (after the clock was changed, in tests)."""
        with self._cond:
            self._cond.notify()

    def pop_due(self, now: float) -> list[int]:
        """Remove and return every key due at ``now``, earliest first."""
        with self._cond:
            found: list[int] = []
            while self._heap and self._heap[0][0] <= now:
                due_at, key = heapq.heappop(self._heap)
                if self._due.get(key) == due_at:
                    del self._due[key]
                    found.append(key)
            return found

    def _drop_stale(self) -> None:
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)

    # ---- thread ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the timer thread (a daemon)."""
        with self._cond:
            if self._thread is not None:
                return
            self._thread = background_thread(self._run, name=self._name)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop the thread; True when it ended within ``timeout``."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                due = self.pop_due(self._clock())
                if not due:
                    self._drop_stale()
                    wait = MAX_WAIT
                    if self._heap:
                        wait = min(max(self._heap[0][0] - self._clock(), 0.0), MAX_WAIT)
                    self._cond.wait(wait)
                    continue
            try:
                self._on_due(due)
            except Exception:
                logger.exception("%s: due callback failed for %s", self._name, due)


class Courier:
    """Runs submitted calls one at a time on its own daemon thread, in submission order."""

    _STOP = object()

    def __init__(self, name: str = "courier") -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = background_thread(self._run, name=name)
        self._started = False
        self._name = name

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def submit(self, call: Callable[[], Any]) -> None:
        """Queue ``call``; returns at once. A failing call is logged and skipped."""
        self._queue.put(call)

    def stop(self, timeout: float = 2.0) -> bool:
        """Finish the queued calls (bounded by ``timeout``) and end the thread."""
        self._queue.put(self._STOP)
        if not self._started or self._thread is threading.current_thread():
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            call = self._queue.get()
            if call is self._STOP:
                return
            try:
                call()
            except Exception:
                logger.exception("%s: delivery failed", self._name)
