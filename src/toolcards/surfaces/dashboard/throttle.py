"""Backoff on failed dashboard sign-ins, per client address.

The first ``free`` wrong tokens from an address are answered as usual; each one after them
closes the address to sign-ins for a time that doubles (``base`` seconds, then twice that,
up to ``ceiling``). While closed, every sign-in from the address is refused with 429 and
``Retry-After`` before its token is looked at, so guessing goes no faster than the backoff
allows. A sign-in that succeeds forgets the address's failures; so does ``ceiling`` seconds
of quiet after the address reopened. At most ``max_addresses`` addresses are tracked (the oldest
are dropped first).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

FREE_FAILURES = 5
BASE_DELAY = 1.0
MAX_DELAY = 300.0
MAX_ADDRESSES = 10_000


@dataclass
class _Record:
    failures: int = 0
    closed_until: float = 0.0
    last: float = 0.0


class SignInThrottle:
    """Failed sign-ins per address, and how long each address must wait."""

    def __init__(
        self,
        *,
        free: int = FREE_FAILURES,
        base: float = BASE_DELAY,
        ceiling: float = MAX_DELAY,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free = free
        self.base = base
        self.ceiling = ceiling
        self.max_addresses = max_addresses
        self.clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Whole seconds ``address`` must still wait before its next sign-in, or None."""
        now = self.clock()
        with self._lock:
            record = self._records.get(address)
            if record is None or record.closed_until <= now:
                return None
            return max(1, math.ceil(record.closed_until - now))

    def failed(self, address: str) -> None:
        """Count a wrong token from ``address`` (closing it once past the free ones)."""
        now = self.clock()
        with self._lock:
            record = self._records.pop(address, None)
            if record is None or now - max(record.last, record.closed_until) > self.ceiling:
                record = _Record()
            record.failures += 1
            record.last = now
            beyond = record.failures - self.free
            if beyond >= 0:
                record.closed_until = now + min(self.ceiling, self.base * 2 ** min(beyond, 32))
            self._records[address] = record
            while len(self._records) > self.max_addresses:
                self._records.popitem(last=False)

    def succeeded(self, address: str) -> None:
        """A sign-in from ``address`` worked: its failures are forgotten."""
        with self._lock:
            self._records.pop(address, None)
