"""The stores in this process's memory: pending approvals and their grants, and rate-limit
buckets (the test seam, and the default when nothing must be shared between processes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from toolcards.core.approvals import ApprovalRecord, ApprovalRequest, ApprovalState
from toolcards.core.grants import Grant
from toolcards.stores.base import DEFAULT_TEAM, Binding, Limit

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

    def take(self, binding: Binding, *, approved: bool, now: float) -> ApprovalRecord | None:
        with self._lock:
            approval_id = self._by_binding.get(binding)
            if approval_id is None:
                return None
            record = self._records[approval_id]
            if record.request.expires_at <= now:
                self._drop(approval_id)
                return None
            if record.state is ApprovalState.PENDING:
                if not approved:
                    return record
                record = replace(record, state=ApprovalState.GRANTED, decided_at=now)
            self._drop(approval_id)
            return record

    def remove(self, approval_id: str) -> bool:
        with self._lock:
            return self._drop(approval_id)

    def pending(self, now: float) -> list[ApprovalRecord]:
        with self._lock:
            self._prune(now)
            records = [r for r in self._records.values() if r.state is ApprovalState.PENDING]
        return sorted(records, key=lambda r: r.request.created_at)

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
