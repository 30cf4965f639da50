"""The stores in this process's memory: pending approvals and their grants, rate-limit
buckets and budget counters (the test seam, and the default when nothing must be shared
between processes)."""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from toolcards.core.approvals import ApprovalRecord, ApprovalRequest, ApprovalState
from toolcards.core.grants import Grant
from toolcards.stores.base import DEFAULT_TEAM, Binding, Limit, Spend
from toolcards.stores.errors import StoreUnavailable
from toolcards.stores.governance import PENDING_PER_PRINCIPAL, TooManyApprovals

_MAX_BUCKETS = 100_000


class MemoryGrants:
    """Grants in this process's memory (see :class:`~toolcards.stores.base.GrantStore`)."""

    fresh = True

    def __init__(self, team_id: str = DEFAULT_TEAM) -> None:
        self.team_id = team_id
        self._grants: dict[str, Grant] = {}
        self._changes = 0
        self._lock = threading.Lock()

    def add(self, grant: Grant, limit: int) -> bool:
        with self._lock:
            if sum(1 for g in self._grants.values() if g.live(grant.created_at)) >= limit:
                return False
            self._grants[grant.grant_id] = grant
            self._changes += 1
            return True

    def revoke(self, grant_id: str, by: str, now: float) -> Grant | None:
        with self._lock:
            grant = self._grants.get(grant_id)
            if grant is None or not grant.live(now):
                return None
            grant = self._grants[grant_id] = replace(grant, revoked_at=now, revoked_by=by)
            self._changes += 1
            return grant

    def get(self, grant_id: str) -> Grant | None:
        with self._lock:
            return self._grants.get(grant_id)

    def listing(self, now: float, *, ended: bool = False, limit: int = 1000) -> list[Grant]:
        with self._lock:
            found = [g for g in self._grants.values() if ended or g.live(now)]
        return sorted(found, key=lambda g: (-g.created_at, g.grant_id))[:limit]

    def live(self, grant_id: str, now: float) -> bool:
        grant = self.get(grant_id)
        return grant is not None and grant.live(now)

    def stamp(self) -> object:
        return self._changes


class MemoryApprovalStore:
    """Approvals in this process's memory (one store per team: nothing to share), with the
    team's grants (``grants``)."""

    def __init__(self, team_id: str = DEFAULT_TEAM) -> None:
        self.team_id = team_id
        self._records: dict[str, ApprovalRecord] = {}
        self._by_binding: dict[Binding, str] = {}
        self._lock = threading.Lock()
        self.grants = MemoryGrants(team_id)

    def add(self, request: ApprovalRequest, now: float) -> ApprovalRecord:
        with self._lock:
            self._prune(now)
            existing = self._by_binding.get(request.binding)
            if existing is not None:
                return self._records[existing]
            if self._held(request.principal) >= PENDING_PER_PRINCIPAL:
                raise TooManyApprovals(request.principal)
            record = ApprovalRecord(request)
            self._records[request.approval_id] = record
            self._by_binding[request.binding] = request.approval_id
            return record

    def get(self, approval_id: str) -> ApprovalRecord | None:
        with self._lock:
            return self._records.get(approval_id)

    def decide(
        self,
        approval_id: str,
        state: ApprovalState,
        approver: str,
        now: float,
        *,
        edited: str = "",
    ) -> ApprovalRecord | None:
        with self._lock:
            record = self._records.get(approval_id)
            if (
                record is None
                or record.state is not ApprovalState.PENDING
                or record.request.expires_at <= now
            ):
                return None
            record = replace(
                record, state=state, approver=approver, decided_at=now, edited_json=edited
            )
            self._records[approval_id] = record
            return record

    def take(
        self, binding: Binding, *, approved: bool, now: float, session: str | None = None
    ) -> ApprovalRecord | None:
        with self._lock:
            approval_id = self._by_binding.get(binding)
            if approval_id is None:
                return None
            record = self._records[approval_id]
            if record.request.expires_at <= now:
                self._drop(approval_id)
                return None
            if session is not None and record.request.session != session:
                return record  # another session's: never spent here
            if record.state is ApprovalState.PENDING:
                if not approved:
                    return record
                record = replace(record, state=ApprovalState.GRANTED, decided_at=now)
            self._drop(approval_id)
            return record

    def remove(self, approval_id: str, *, only_pending: bool = False) -> bool:
        with self._lock:
            record = self._records.get(approval_id)
            if only_pending and record is not None and record.state is not ApprovalState.PENDING:
                return False
            return self._drop(approval_id)

    def pending(self, now: float) -> list[ApprovalRecord]:
        with self._lock:
            self._prune(now)
            records = [r for r in self._records.values() if r.state is ApprovalState.PENDING]
        return sorted(records, key=lambda r: r.request.created_at)

    def pending_ids(self, now: float) -> list[str]:
        with self._lock:
            records = [
                r.request
                for r in self._records.values()
                if r.state is ApprovalState.PENDING and r.request.expires_at > now
            ]
        return [r.approval_id for r in sorted(records, key=lambda r: r.created_at)]

    def _held(self, principal: str) -> int:
        pending = ApprovalState.PENDING
        return sum(
            1
            for r in self._records.values()
            if r.request.principal == principal and r.state is pending
        )

    def _drop(self, approval_id: str) -> bool:
        record = self._records.pop(approval_id, None)
        if record is None:
            return False
        if self._by_binding.get(record.request.binding) == approval_id:
            del self._by_binding[record.request.binding]
        return True

    def _prune(self, now: float) -> None:
        expired = [k for k, r in self._records.items() if r.request.expires_at <= now]
        for approval_id in expired:
            self._drop(approval_id)


_BucketKey = tuple[int, int, float, str, str]  # (limit index, count, period, principal, tool)


class RateLimiter:
    """Holds one bucket per (limit, principal id, tool id), at most ``max_buckets``; refills
    continuously. A full bucket is forgotten to make room (recreating it gives the same state);
    with none full, a call that needs a new bucket waits until one is: resetting a bucket that
    is still refilling would give its caller tokens back."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, max_buckets: int = _MAX_BUCKETS
    ) -> None:
        self._clock = clock
        self._max = max_buckets
        self._buckets: dict[_BucketKey, list[float]] = {}
        # one (full at, key) per bucket, soonest first; "full at" only grows as tokens are
        # taken, so an entry is a lower bound, brought up to date when it reaches the top
        self._full: list[tuple[float, _BucketKey]] = []
        self._lock = threading.Lock()

    def acquire(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """Take one token from every applicable bucket. Returns 0.0 when allowed, else the
        seconds until the call would be allowed (no token is taken then)."""
        if not limits:
            return 0.0
        now = self._clock()
        keys = [(lim.index, lim.count, lim.period, principal, tool_id) for lim in limits]
        with self._lock:
            if not self._fits(keys):
                soonest = self._forget_idle(now)
                if not self._fits(keys):
                    return soonest - now
            buckets = []
            wait = 0.0
            for lim, key in zip(limits, keys, strict=True):
                bucket = self._buckets.get(key)
                if bucket is None:
                    bucket = self._buckets[key] = [float(lim.count), now]
                    heapq.heappush(self._full, (now, key))
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

    def peek(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """What :meth:`acquire` would answer now, taking no token and making no bucket (one
        not kept is full; the cap on buckets is left to :meth:`acquire`)."""
        now = self._clock()
        wait = 0.0
        with self._lock:
            for lim in limits:
                bucket = self._buckets.get((lim.index, lim.count, lim.period, principal, tool_id))
                if bucket is not None:
                    rate = lim.count / lim.period
                    tokens = bucket[0] + (now - bucket[1]) * rate
                    wait = max(wait, (1.0 - tokens) / rate)
        return wait

    def _fits(self, keys: Sequence[_BucketKey]) -> bool:
        missing = sum(1 for key in keys if key not in self._buckets)
        return len(self._buckets) + missing <= self._max

    def _forget_idle(self, now: float) -> float:
        """Drop the buckets that have refilled completely, soonest full first (each entry is
        looked at once more than its bucket was used, never every bucket); returns when the
        next one will be full."""
        while self._full:
            seen, key = self._full[0]
            bucket = self._buckets[key]
            full = bucket[1] + (key[1] - bucket[0]) * key[2] / key[1]
            if full <= now:
                heapq.heappop(self._full)
                del self._buckets[key]
            elif seen < full:
                heapq.heapreplace(self._full, (full, key))
            else:
                return full
        return math.inf

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()
            self._full.clear()


class MemoryBudgets:
    """Budget counters in this process's memory (see
    :class:`~toolcards.stores.base.BudgetStore`): at most ``max_counters`` counters and as
    many keys (the oldest keys are forgotten first). A full store forgets its expired
    counters, soonest expired first; with none expired, a use that needs a new counter is
    refused (:class:`~toolcards.stores.errors.StoreUnavailable`, nothing counted) until one
    expires: forgetting a live counter would start it again from zero, and the counter that
    ends soonest is often the team's own (today's), while every run adds one kept 7 days."""

    def __init__(self, team_id: str = DEFAULT_TEAM, *, max_counters: int = _MAX_BUCKETS) -> None:
        self.team_id = team_id
        self._max = max_counters
        self._spent: dict[str, list[float | None]] = {}  # counter -> [spent, updated, expires]
        # (expires, counter), soonest first: at least one entry per expiring counter no later
        # than its expiry (a counter's expiry mostly grows; an entry is brought up to date
        # when it reaches the top, and one more is pushed when it shrinks)
        self._expiry: list[tuple[float, str]] = []
        self._keys: dict[str, None] = {}
        self._lock = threading.Lock()

    def take(self, key: str | None, spends: Sequence[Spend], now: float) -> int | None:
        with self._lock:
            if key is not None and key in self._keys:
                return None
            for index, spend in enumerate(spends):
                row = self._spent.get(spend.counter)
                if (float(row[0] or 0.0) if row else 0.0) + spend.amount > spend.limit:
                    return index
            self._spend(key, spends, now)
        return None

    def add(self, key: str | None, spends: Sequence[Spend], now: float) -> None:
        with self._lock:
            if key is None or key not in self._keys:
                self._spend(key, spends, now)

    def spent(self, counters: Sequence[str]) -> dict[str, float]:
        with self._lock:
            return {c: float(self._spent[c][0] or 0.0) for c in counters if c in self._spent}

    def listing(self, now: float, limit: int = 1000) -> list[tuple[str, float, float]]:
        with self._lock:
            rows = [
                (c, float(r[0] or 0.0), float(r[1] or 0.0))
                for c, r in self._spent.items()
                if r[2] is None or r[2] > now
            ]
        return sorted(rows, key=lambda row: -row[2])[:limit]

    def _spend(self, key: str | None, spends: Sequence[Spend], now: float) -> None:
        """Add every spend, or none: raises before anything is added when the new counters
        do not fit."""
        if not self._fits(spends):
            self._forget_expired(now)
            if not self._fits(spends):
                raise StoreUnavailable(
                    f"the budget store is full ({self._max} live counters): try again later"
                )
        if key is not None:
            if len(self._keys) >= self._max:
                del self._keys[next(iter(self._keys))]
            self._keys[key] = None
        for spend in spends:
            row = self._spent.setdefault(spend.counter, [0.0, now, None])
            expires = spend.expires
            if expires is not None and (row[2] is None or expires < row[2]):
                heapq.heappush(self._expiry, (expires, spend.counter))
            row[0] = float(row[0] or 0.0) + spend.amount
            row[1], row[2] = now, expires

    def _fits(self, spends: Sequence[Spend]) -> bool:
        new = {spend.counter for spend in spends if spend.counter not in self._spent}
        return len(self._spent) + len(new) <= self._max

    def _forget_expired(self, now: float) -> None:
        """Drop the expired counters, soonest first: each entry is looked at once more than
        its counter was used, never every counter."""
        while self._expiry:
            expires, counter = self._expiry[0]
            row = self._spent.get(counter)
            ends = None if row is None else row[2]
            if ends is None or ends < expires:  # forgotten, kept for good, or pushed again
                heapq.heappop(self._expiry)
            elif expires < ends:
                heapq.heapreplace(self._expiry, (ends, counter))
            elif ends <= now:
                heapq.heappop(self._expiry)
                del self._spent[counter]
            else:
                return
