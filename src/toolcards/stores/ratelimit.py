"""Token-bucket rate limits keyed by (limit, principal, tool)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

_MAX_BUCKETS = 100_000


class Limit(Protocol):
    """One rate limit as the buckets see it: its rule index, ``count`` calls per ``period``
    seconds (the policy's compiled limits have these attributes)."""

    @property
    def index(self) -> int: ...

    @property
    def count(self) -> int: ...

    @property
    def period(self) -> float: ...


class RateLimits(Protocol):
    """What the executor needs of a rate limiter: :class:`RateLimiter` (this process's
    memory) or :class:`~toolcards.stores.postgres.governance.PostgresRateLimiter` (shared by every
    process of a team)."""

    def acquire(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """Take one token from every applicable bucket: 0.0 when allowed, else the seconds
        until the call would be (no token is taken then)."""
        ...


class RateLimiter:
    """Holds one bucket per (limit, principal id, tool id); refills continuously."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[tuple[int, int, float, str, str], list[float]] = {}
        self._lock = threading.Lock()

    def acquire(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """Take one token from every applicable bucket. Returns 0.0 when allowed, else the
        seconds until the call would be allowed (no token is taken then)."""
        if not limits:
            return 0.0
        now = self._clock()
        with self._lock:
            buckets = []
            wait = 0.0
            for lim in limits:
                key = (lim.index, lim.count, lim.period, principal, tool_id)
                bucket = self._buckets.get(key)
                if bucket is None:
                    if len(self._buckets) >= _MAX_BUCKETS:
                        self._forget_idle(now)
                    bucket = self._buckets[key] = [float(lim.count), now]
                rate = lim.count / lim.period
                tokens = min(float(lim.count), bucket[0] + (now - bucket[1]) * rate)
                bucket[0], bucket[1] = tokens, now
                if tokens < 1.0:
                    wait = max(wait, (1.0 - tokens) / rate)
                buckets.append(bucket)
            if wait > 0.0:
                return wait
            for bucket in buckets:
                bucket[0] -= 1.0
            return 0.0

    def _forget_idle(self, now: float) -> None:
        """Drop buckets that have refilled completely: recreating one gives the same state."""
        idle = [k for k, b in self._buckets.items() if b[0] + (now - b[1]) * k[1] / k[2] >= k[1]]
        for key in idle:
            del self._buckets[key]

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()
