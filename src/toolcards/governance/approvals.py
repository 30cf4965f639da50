"""Approvals bound to (tool call id, tool, canonical argument digest, principal), single-use,
expiring. A surface records a pending request; the human's yes consumes it exactly once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolcards.governance.identity import Identity
from toolcards.governance.redact import redact


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a human is asked to approve. ``args`` are redacted; ``args_digest`` binds the
    approval to the exact arguments."""

    call_id: str
    tool_id: str
    args_digest: str
    principal: str
    args: Mapping[str, Any]
    reason: str
    expires_at: float  # wall-clock (time.time()) seconds
    surface: str = ""
    identity: Identity | None = field(default=None, compare=False)

    def as_metadata(self) -> dict[str, Any]:
        """A JSON-able summary for ``DeferredToolRequests.metadata`` or a UI."""
        return {
            "tool": self.tool_id,
            "principal": self.principal,
            "args_digest": self.args_digest,
            "args": dict(self.args),
            "reason": self.reason,
            "expires_at": self.expires_at,
        }


Approver = Callable[[ApprovalRequest], Awaitable[bool]]
"""An async callable a surface provides: ``await approver(request) -> bool``."""


@dataclass(slots=True)
class _Pending:
    request: ApprovalRequest
    granted: bool = False


class ApprovalBroker:
    """Pending approvals in memory. ``request`` records one; ``grant`` marks a human's yes
    out of band; ``consume`` spends it once, only for the same tool, digest and principal."""

    def __init__(self, ttl: float = 900.0, clock: Callable[[], float] = time.time) -> None:
        self.ttl = ttl
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    def request(
        self,
        *,
        tool_id: str,
        args: Mapping[str, Any],
        args_digest: str,
        identity: Identity,
        reason: str,
        sensitive: tuple[str, ...] = (),
        call_id: str | None = None,
        surface: str = "",
    ) -> ApprovalRequest:
        """Record a pending approval (replacing any earlier one for the same call id)."""
        req = ApprovalRequest(
            call_id=call_id or uuid.uuid4().hex,
            tool_id=tool_id,
            args_digest=args_digest,
            principal=identity.id,
            args=redact(dict(args), sensitive),
            reason=reason,
            expires_at=self._clock() + self.ttl,
            surface=surface,
            identity=identity,
        )
        with self._lock:
            self._prune()
            self._pending[req.call_id] = _Pending(req)
        return req

    def grant(self, call_id: str) -> bool:
        """Mark a pending request approved (for surfaces where the human answers later)."""
        with self._lock:
            entry = self._pending.get(call_id)
            if entry is None or entry.request.expires_at <= self._clock():
                return False
            entry.granted = True
            return True

    def deny(self, call_id: str) -> bool:
        """Drop a pending request; a later consume fails."""
        with self._lock:
            return self._pending.pop(call_id, None) is not None

    def consume(
        self,
        call_id: str,
        *,
        tool_id: str,
        args_digest: str,
        principal: str,
        approved: bool = False,
    ) -> bool:
        """Spend the approval for ``call_id``: True once, and only when the request exists, has
        not expired, was granted (or ``approved`` is passed by a surface whose human just said
        yes to this call id) and matches tool, digest and principal. A mismatch voids it."""
        with self._lock:
            entry = self._pending.pop(call_id, None)
            if entry is None:
                return False
            req = entry.request
            if req.expires_at <= self._clock():
                return False
            if (req.tool_id, req.args_digest, req.principal) != (tool_id, args_digest, principal):
                return False
            if not (entry.granted or approved):
                self._pending[call_id] = entry  # still waiting for the human
                return False
            return True

    def pending(self) -> list[ApprovalRequest]:
        """Unexpired pending requests, oldest first."""
        with self._lock:
            self._prune()
            return [e.request for e in self._pending.values()]

    def _prune(self) -> None:
        now = self._clock()
        expired = [k for k, e in self._pending.items() if e.request.expires_at <= now]
        for key in expired:
            del self._pending[key]
