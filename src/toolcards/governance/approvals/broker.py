"""Approvals: a pending request is bound to (call id, tool, argument digest, principal), never
changes once recorded, expires, and runs its call at most once.

A surface records a request (:meth:`ApprovalBroker.request`) and shows it to a human. The
human's answer names *that* request (its ``approval_id``, or the request object itself):
:meth:`~ApprovalBroker.grant` and :meth:`~ApprovalBroker.deny` take the handle and the
approver's :class:`Identity`, who must hold the approver role and must not be the caller.
Decisions are audited with the approver's identity. A caller waiting for a decision made in
another thread or process awaits :meth:`~ApprovalBroker.wait` (or passes
:meth:`~ApprovalBroker.waiter` as the executor's approver).

Storage is pluggable (:mod:`toolcards.stores.approvals`): in memory by default, or a
SQLite file shared by the processes of one machine. The approver's side (grant, deny) is
:mod:`.approval_decisions`; the errors and handle types are :mod:`.approval_types`.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from toolcards.core.approvals import (
    ApprovalRecord,
    ApprovalRequest,
    ApprovalState,
)
from toolcards.core.identity import Identity
from toolcards.governance.approvals.decisions import ApprovalDecisions
from toolcards.governance.approvals.types import (
    ApprovalError,
    ApprovalTimedOut,
    Approver,
    EditCheck,
    EditRefusedError,
    GrantedEdit,
    Handle,
    handle_id,
)
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor, canonical_json
from toolcards.stores.approvals import Listed, SqlApprovalStore, listed
from toolcards.stores.memory import MemoryApprovalStore

if TYPE_CHECKING:
    from toolcards.governance.audit.log import AuditLog
    from toolcards.stores.base import ApprovalStore

__all__ = [
    "ApprovalBroker",
    "ApprovalError",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalState",
    "ApprovalTimedOut",
    "Approver",
    "EditCheck",
    "EditRefusedError",
    "GrantedEdit",
    "Handle",
]

log = logging.getLogger(__name__)


class ApprovalBroker(ApprovalDecisions):
    """Pending approvals and their decisions.

    ``store`` holds them (a :class:`~toolcards.stores.memory.MemoryApprovalStore`
    by default). ``approver_role`` is the role a deciding principal must hold. With ``audit``
    every decision, and every refused attempt to decide, is written down with the approver's
    identity (an executor given an audit log lends it to its broker).
    """

    def __init__(
        self,
        ttl: float = 900.0,
        clock: Callable[[], float] = time.time,
        *,
        store: ApprovalStore | None = None,
        approver_role: str = "approver",
        audit: AuditLog | None = None,
    ) -> None:
        if store is None:
            store = MemoryApprovalStore()
        self.ttl = ttl
        self._clock = clock
        self.store = store
        self.approver_role = approver_role
        self.audit = audit
        self.edit_check: EditCheck | None = None
        """Checks an edited grant before it is recorded (an executor sharing this broker lends
        its own); without one, the edit is checked when the call runs."""

    # -- the caller's side -----------------------------------------------------------------

    def request(
        self,
        *,
        tool_id: str,
        args: Mapping[str, Any],
        identity: Identity,
        args_digest: str | None = None,
        reason: str,
        sensitive: Iterable[str] = (),
        call_id: str | None = None,
        surface: str = "",
        redactor: Redactor | None = None,
        session: str = "",
    ) -> ApprovalRequest:
        """Record a pending request. The same call asked again (same call id, tool, digest and
        principal) gets the request already recorded; a request is never replaced.

        The request keeps the exact arguments (canonical JSON, for the approver) and a
        redacted copy (for the audit trail and for viewers). ``args_digest``, when given,
        must be their digest: an approver is never shown other arguments than the grant
        binds."""
        exact = canonical_json(args)
        digest = hashlib.sha256(exact.encode()).hexdigest()
        if args_digest is not None and args_digest != digest:
            raise ValueError("args_digest is not the digest of args")
        now = self._clock()
        req = ApprovalRequest(
            call_id=call_id or uuid.uuid4().hex,
            tool_id=tool_id,
            args_digest=digest,
            principal=identity.id,
            args=(redactor or DEFAULT_REDACTOR).value(dict(args), sensitive),
            reason=reason,
            expires_at=now + self.ttl,
            surface=surface,
            identity=identity,
            created_at=now,
            args_json=exact,
            session=session,
        )
        return self.store.add(req, now).request

    def settle(
        self,
        call_id: str,
        *,
        tool_id: str,
        args_digest: str,
        principal: str,
        approved: bool = False,
    ) -> tuple[ApprovalState, ApprovalRequest | None]:
        """The state of the request recorded for exactly this call, spending it when decided:
        GRANTED runs the call (once), DENIED refuses it (once), PENDING still waits, EXPIRED
        means there is none. ``approved=True`` is a surface whose human just said yes to this
        call id (pydantic-ai's deferred approvals): it grants a pending request for exactly
        this call, and nothing else."""
        record = self.settle_record(
            call_id,
            tool_id=tool_id,
            args_digest=args_digest,
            principal=principal,
            approved=approved,
        )
        if record is None:
            return ApprovalState.EXPIRED, None
        return record.state, record.request

    def settle_record(
        self,
        call_id: str,
        *,
        tool_id: str,
        args_digest: str,
        principal: str,
        approved: bool = False,
        session: str | None = None,
    ) -> ApprovalRecord | None:
        """:meth:`settle`, as the record (with an approver's edit, ``edited_json``); None when
        there is none. ``session``: a record another session asked is returned unspent."""
        binding = (call_id, tool_id, args_digest, principal)
        return self.store.take(binding, approved=approved, now=self._clock(), session=session)

    def withdraw(self, handle: Handle, *, only_pending: bool = False) -> bool:
        """Drop a request (the surface asked its own human inline, or gave up waiting); True
        when it was there. ``only_pending``: only while nobody decided it, in one step (a
        caller whose wait ended honours a decision that landed after its last look, which
        its approver was told was recorded)."""
        return self.store.remove(handle_id(handle), only_pending=only_pending)

    async def wait(
        self, handle: Handle, timeout: float, *, poll: float = 0.005, max_poll: float = 0.25
    ) -> ApprovalState:
        """Wait (at most ``timeout`` seconds) for a decision made anywhere: in another task,
        thread or process sharing the store. Polls with a growing interval (``poll`` up to
        ``max_poll`` seconds); returns PENDING on timeout."""
        import asyncio  # lazy: ~4x python -c pass; listing tools never loads it

        approval_id = handle_id(handle)
        deadline = time.monotonic() + timeout
        delay = poll
        while True:
            state = self.state(approval_id)
            if state is not ApprovalState.PENDING:
                return state
            left = deadline - time.monotonic()
            if left <= 0:
                return ApprovalState.PENDING
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 1.5, max_poll)

    def waiter(self, timeout: float) -> Approver:
        """An executor approver that waits (at most ``timeout`` seconds) for an approver
        principal to decide out of band (:meth:`grant`/:meth:`deny` from another task,
        thread or process). No decision in time counts as no."""

        async def wait_for_decision(request: ApprovalRequest) -> bool:
            return await self.wait(request, timeout) is ApprovalState.GRANTED

        return wait_for_decision

    # -- reading (the approver's side, deciding, is :class:`ApprovalDecisions`') -----------

    def get(self, handle: Handle) -> ApprovalRequest | None:
        """The recorded request (None when unknown or expired)."""
        record = self._live(handle_id(handle))
        return None if record is None else record.request

    def state(self, handle: Handle) -> ApprovalState:
        record = self._live(handle_id(handle))
        return ApprovalState.EXPIRED if record is None else record.state

    def pending(self) -> list[ApprovalRequest]:
        """Unexpired requests waiting for a decision, oldest first."""
        return [r.request for r in self.store.pending(self._clock())]

    def listing(self, limit: int, chars: int) -> tuple[list[Listed], int]:
        """The oldest ``limit`` pending requests as an inbox lists them, each read no further
        than ``chars`` characters of its arguments (see :class:`Listed`), and how many are
        pending in all. A SQL store reads no more than that; another holds them in memory."""
        now = self._clock()
        if isinstance(self.store, SqlApprovalStore):
            return self.store.listing(now, limit, chars)
        records = self.store.pending(now)
        return [listed(r.request, chars) for r in records[:limit]], len(records)

    def pending_ids(self) -> list[str]:
        """The ids of :meth:`pending`'s requests (read alone: what a watcher polls)."""
        return self.store.pending_ids(self._clock())

    def edit_of(self, handle: Handle) -> dict[str, Any] | None:
        """The arguments a grant with an edit runs (None: no edit, or no such request)."""
        record = self._live(handle_id(handle))
        return None if record is None else record.edited_args
