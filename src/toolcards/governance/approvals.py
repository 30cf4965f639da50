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
SQLite file shared by the processes of one machine.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from toolcards.core.approvals import (
    ApprovalRecord,
    ApprovalRequest,
    ApprovalState,
)
from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import Identity
from toolcards.governance.redact import DEFAULT_REDACTOR, Redactor, canonical_json

if TYPE_CHECKING:
    from toolcards.governance.audit import AuditLog
    from toolcards.stores.base import ApprovalStore

__all__ = [
    "ApprovalBroker",
    "ApprovalError",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalState",
    "Approver",
    "EditRefusedError",
]

log = logging.getLogger(__name__)


class ApprovalError(ToolcardsError, PermissionError):
    """A grant or deny was refused; the message says why."""


class EditRefusedError(ApprovalError):
    """A grant's edited arguments were refused (not one JSON object, too long, invalid for
    the tool's schema, or denied by the policy); the request still waits."""


Approver = Callable[[ApprovalRequest], Awaitable[bool]]
"""An async callable a surface provides: ``await approver(request) -> bool``."""

EditCheck = Callable[[ApprovalRequest, dict[str, Any]], str]
"""Checks an approver's edit of ``request``'s arguments as a fresh call's would be checked
(an executor lends its own, see :mod:`toolcards.governance.edits`): returns the canonical JSON
that will run, or raises :class:`~toolcards.governance.edits.EditRefused`."""

Handle = ApprovalRequest | str
"""What a decision names: the request the human saw, or its ``approval_id``."""


class ApprovalTimedOut(ToolcardsError):
    """Raised by an approver when nobody decided on the call within its wait (``seconds``):
    the executor reports ``approval_timeout``, not a refusal."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no approver decided within {seconds:g} s")
        self.seconds = seconds


class ApprovalBroker:
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
            from toolcards.stores.memory import MemoryApprovalStore

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
    ) -> ApprovalRecord | None:
        """:meth:`settle`, as the record (with an approver's edit, ``edited_json``); None when
        there is none."""
        binding = (call_id, tool_id, args_digest, principal)
        return self.store.take(binding, approved=approved, now=self._clock())

    def withdraw(self, handle: Handle) -> bool:
        """Drop a request (the surface asked its own human inline, or gave up waiting)."""
        return self.store.remove(_handle_id(handle))

    async def wait(
        self, handle: Handle, timeout: float, *, poll: float = 0.005, max_poll: float = 0.25
    ) -> ApprovalState:
        """Wait (at most ``timeout`` seconds) for a decision made anywhere: in another task,
        thread or process sharing the store. Polls with a growing interval (``poll`` up to
        ``max_poll`` seconds); returns PENDING on timeout."""
        import asyncio  # loaded by the running loop (listing tools does without it)

        approval_id = _handle_id(handle)
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

    # -- the approver's side ---------------------------------------------------------------

    def grant(
        self,
        handle: Handle,
        *,
        approver: Identity,
        surface: str = "python",
        args: Mapping[str, Any] | None = None,
    ) -> ApprovalRequest:
        """Approve the request named by ``handle`` (what the human saw), once. Raises
        :class:`ApprovalError` when it is unknown, expired, already decided, changed, or when
        ``approver`` is the caller or lacks the approver role.

        ``args`` are the approver's edit of the arguments: they, not the caller's, are what is
        approved and what runs (once, without asking again), checked as a fresh call's would
        be (:mod:`toolcards.governance.edits`); :meth:`grant_record` also says what will run."""
        return self.grant_record(handle, approver=approver, surface=surface, args=args).request

    def grant_record(
        self,
        handle: Handle,
        *,
        approver: Identity,
        surface: str = "python",
        args: Mapping[str, Any] | None = None,
    ) -> ApprovalRecord:
        """:meth:`grant`, answering the granted record: its ``edited_args`` (None: no edit)
        are the canonical arguments that will run."""
        return self._decide(handle, ApprovalState.GRANTED, approver, surface, None, args)

    def edit_of(self, handle: Handle) -> dict[str, Any] | None:
        """The arguments a grant with an edit runs (None: no edit, or no such request)."""
        record = self._live(_handle_id(handle))
        return None if record is None else record.edited_args

    def deny(
        self,
        handle: Handle,
        *,
        approver: Identity,
        surface: str = "python",
        reason: str | None = None,
    ) -> ApprovalRequest:
        """Refuse the request named by ``handle``; the waiting call is refused, once."""
        return self._decide(handle, ApprovalState.DENIED, approver, surface, reason).request

    def grant_by_caller(self, handle: Handle, *, surface: str) -> ApprovalRequest:
        """The caller approves its own call, once: only for a surface configured to trust
        its caller (``approval: client``: MCP elicitation, the ``toolcards call`` prompt).
        Audited as a grant with the caller as the deciding principal, saying so."""
        approval_id = _handle_id(handle)
        record = self._live(approval_id)
        request = record.request if record is not None else None
        why = None
        if record is None or record.state is not ApprovalState.PENDING:
            why = "no such pending request (unknown, expired or already decided)"
        elif isinstance(handle, ApprovalRequest) and handle != record.request:
            why = "the request shown differs from the one recorded"
        else:
            who = record.request.principal
            if self.store.decide(approval_id, ApprovalState.GRANTED, who, self._clock()) is None:
                why = "the request was decided by someone else or expired"
        caller = _caller(request)
        if why is not None:
            self._audit(request, caller, surface, "none", "approval_rejected", why, handle)
            raise ApprovalError(f"cannot decide approval {approval_id}: {why}")
        assert request is not None
        note = "approval: client trusts the caller: the caller approved its own call"
        self._audit(request, caller, surface, "grant", "approval_granted", note, handle)
        return request

    def get(self, handle: Handle) -> ApprovalRequest | None:
        """The recorded request (None when unknown or expired)."""
        record = self._live(_handle_id(handle))
        return None if record is None else record.request

    def state(self, handle: Handle) -> ApprovalState:
        record = self._live(_handle_id(handle))
        return ApprovalState.EXPIRED if record is None else record.state

    def pending(self) -> list[ApprovalRequest]:
        """Unexpired requests waiting for a decision, oldest first."""
        return [r.request for r in self.store.pending(self._clock())]

    def _live(self, approval_id: str) -> ApprovalRecord | None:
        record = self.store.get(approval_id)
        if record is None or record.request.expires_at <= self._clock():
            return None
        return record

    def _decide(
        self,
        handle: Handle,
        state: ApprovalState,
        approver: Identity,
        surface: str,
        reason: str | None,
        args: Mapping[str, Any] | None = None,
    ) -> ApprovalRecord:
        approval_id = _handle_id(handle)
        record = self._live(approval_id)
        request = record.request if record is not None else None
        why = self._refusal(handle, record, approver, state)
        decided = None
        edited, refused_edit = "", False
        if why is None and args is not None:
            assert request is not None
            from toolcards.governance.edits import granted_json

            edited, why = granted_json(request, args, self.edit_check)
            refused_edit = why is not None
        if why is None:
            assert request is not None
            decided = self.store.decide(
                approval_id, state, approver.id, self._clock(), edited=edited
            )
            if decided is None:  # decided or expired between the check and the update
                why = "the request was decided by someone else or expired"
        digest = _digest(edited)
        if why is not None:
            self._audit(
                request, approver, surface, "none", "approval_rejected", why, handle, digest
            )
            error = EditRefusedError if refused_edit else ApprovalError
            raise error(f"cannot decide approval {approval_id}: {why}")
        assert request is not None
        outcome = "approval_granted" if state is ApprovalState.GRANTED else "approval_denied"
        note = f"requested by {request.principal}" + (f": {reason}" if reason else "")
        if edited:
            note += "; granted with edited arguments (approved_args_digest)"
        effect = "grant" if state is ApprovalState.GRANTED else "deny"
        self._audit(request, approver, surface, effect, outcome, note, handle, digest)
        assert decided is not None
        return decided

    def _refusal(
        self,
        handle: Handle,
        record: ApprovalRecord | None,
        approver: Identity,
        state: ApprovalState,
    ) -> str | None:
        if not isinstance(approver, Identity) or approver.is_anonymous:
            return "an approver must be an identified principal"
        if self.approver_role not in approver.roles:
            return f"{approver.id} does not hold the {self.approver_role!r} role"
        if record is None:
            return "no such pending request (unknown, expired or already spent)"
        if record.state is not ApprovalState.PENDING:
            return f"the request was already {record.state.value}"
        if approver.id == record.request.principal:
            return "a caller cannot approve its own call"
        if state is ApprovalState.GRANTED and not record.request.exact_recorded:
            return "its exact arguments were not recorded, so nobody can have seen them"
        if isinstance(handle, ApprovalRequest) and handle != record.request:
            return "the request shown differs from the one recorded"
        return None

    def _audit(
        self,
        request: ApprovalRequest | None,
        approver: Identity,
        surface: str,
        decision: str,
        outcome: str,
        reason: str,
        handle: Handle,
        approved_args_digest: str | None = None,
    ) -> None:
        audit = self.audit
        if audit is None:
            return
        from toolcards.governance.approval_audit import decision_record

        approval_id = _handle_id(handle)
        if request is None:  # expired or already spent: the row still names its call
            stored = self.store.get(approval_id)
            request = stored.request if stored is not None else None
        row = decision_record(
            self._clock(), request, approver, surface, decision, outcome, reason, approval_id,
            approved_args_digest,
        )  # fmt: skip
        audit.record(row)


def _digest(edited: str) -> str | None:
    return hashlib.sha256(edited.encode()).hexdigest() if edited else None


def _handle_id(handle: Handle) -> str:
    if isinstance(handle, ApprovalRequest):
        return handle.approval_id
    if isinstance(handle, str) and handle:
        return handle
    raise TypeError("an approval handle is an ApprovalRequest or its approval_id")


def _caller(request: ApprovalRequest | None) -> Identity:
    """The calling principal of ``request`` (anonymous when unknown)."""
    from toolcards.core.identity import ANONYMOUS

    if request is None:
        return ANONYMOUS
    return request.identity or Identity(request.principal)
