"""The approver's side of the approval broker: granting (with an approver's edit of the
arguments, or remembered as a grant for later calls), denying, revoking a grant, and the
caller's own grant where a surface trusts it, each refused unless the deciding principal may
decide exactly this, and each audited with the approver's identity (see :mod:`.broker` and
:mod:`.grants`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolcards.core.approvals import ApprovalRecord, ApprovalRequest, ApprovalState
from toolcards.core.grants import Grant
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.governance.approvals.edits import granted_json
from toolcards.governance.approvals.grants import MAX_GRANTS, GrantError, Remember, describe
from toolcards.governance.approvals.records import decision_record, grant_record, redacted_grant
from toolcards.governance.approvals.types import (
    ApprovalError,
    EditCheck,
    EditRefusedError,
    Handle,
    handle_id,
)
from toolcards.stores.base import GrantStore

if TYPE_CHECKING:
    from toolcards.governance.audit.log import AuditLog
    from toolcards.stores.base import ApprovalStore

__all__ = ["ApprovalDecisions"]


class ApprovalDecisions:
    """Decides pending approvals (the broker's base; the broker holds the attributes)."""

    store: ApprovalStore
    approver_role: str
    audit: AuditLog | None
    edit_check: EditCheck | None
    _clock: Callable[[], float]

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
        be (:mod:`.edits`); :meth:`grant_record` also says what will run."""
        return self.grant_record(handle, approver=approver, surface=surface, args=args).request

    def grant_record(
        self,
        handle: Handle,
        *,
        approver: Identity,
        surface: str = "python",
        args: Mapping[str, Any] | None = None,
        remember: Remember | None = None,
    ) -> ApprovalRecord:
        """:meth:`grant`, answering the granted record: its ``edited_args`` (None: no edit)
        are the canonical arguments that will run.

        ``remember`` also remembers the decision as a grant for later calls (see
        :mod:`.grants`): the record's ``grant`` is then the grant made, audited with its own
        ``grant_created`` row. It is refused with an edit, for a request whose exact arguments
        were not recorded, and by a store that keeps no grants."""
        return self._decide(handle, ApprovalState.GRANTED, approver, surface, None, args, remember)

    def remember(
        self,
        handle: Handle,
        *,
        approver: Identity,
        surface: str = "python",
        remember: Remember,
    ) -> Grant:
        """Grant the request named by ``handle`` once and remember it as a grant: the grant
        (see :meth:`grant_record`)."""
        record = self.grant_record(handle, approver=approver, surface=surface, remember=remember)
        assert record.grant is not None
        return record.grant

    def revoke(self, grant_id: str, *, approver: Identity, surface: str = "python") -> Grant:
        """Revoke a live grant: no call runs by it any more, in any process sharing the store,
        from the next call on. Refused (:class:`ApprovalError`, audited) unless ``approver``
        holds the approver role and the grant is live."""
        grants = self.grant_store
        found = grants.get(grant_id) if grants is not None else None
        why = None
        if not isinstance(approver, Identity) or approver.is_anonymous:
            why = "an approver must be an identified principal"
        elif self.approver_role not in approver.roles:
            why = f"{approver.id} does not hold the {self.approver_role!r} role"
        elif grants is None:
            why = "this approvals store keeps no grants"
        elif found is None:
            why = "no such grant"
        revoked = None
        if why is None:
            assert grants is not None
            revoked = grants.revoke(grant_id, approver.id, self._clock())
            if revoked is None:
                why = "the grant already expired or was revoked"
        if why is not None:
            self._grant_row(found, grant_id, approver, surface, "none", "approval_rejected", why)
            raise ApprovalError(f"cannot revoke grant {grant_id}: {why}")
        assert revoked is not None
        self._grant_row(revoked, grant_id, approver, surface, "deny", "grant_revoked",
                        f"revoked: {describe(redacted_grant(revoked))}")  # fmt: skip
        return revoked

    def grants(self, *, ended: bool = False, limit: int = 1000) -> list[Grant]:
        """The team's live grants, newest first (``ended``: also revoked and expired ones)."""
        grants = self.grant_store
        return [] if grants is None else grants.listing(self._clock(), ended=ended, limit=limit)

    @property
    def grant_store(self) -> GrantStore | None:
        """Where the team's grants are kept: the approvals store's (None: it keeps none)."""
        found = getattr(self.store, "grants", None)
        return found if isinstance(found, GrantStore) else None

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
        approval_id = handle_id(handle)
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

    def answer_for_run(
        self,
        handle: Handle,
        *,
        approved: bool,
        run: Identity,
        via: str,
        why: str = "",
        surface: str = "pydantic-ai",
    ) -> bool:
        """The calling run's answer to a call made on its behalf (see :mod:`.nested`): the
        run's caller ``run`` decides it, through its deferred tool request for its tool
        ``via``. The first answer wins: False (nothing written) when the request was already
        decided, withdrawn or expired. Never the run's own call (a caller never approves its
        own call), never one whose exact arguments were not recorded."""
        approval_id = handle_id(handle)
        record = self._live(approval_id)
        if record is None or record.state is not ApprovalState.PENDING:
            return False
        request = record.request
        if not isinstance(run, Identity) or run.id == request.principal:
            return False
        if approved and not request.exact_recorded:
            return False
        state = ApprovalState.GRANTED if approved else ApprovalState.DENIED
        if self.store.decide(approval_id, state, run.id, self._clock()) is None:
            return False  # decided elsewhere first
        outcome = "approval_granted" if approved else "approval_denied"
        note = f"requested by {request.principal}; answered by the run calling {via}"
        self._audit(request, run, surface, "grant" if approved else "deny", outcome,
                    note + (f": {why}" if why else ""), handle)  # fmt: skip
        return True

    def deny_for_own_run(
        self, handle: Handle, *, run: Identity, why: str, surface: str = "pydantic-ai"
    ) -> bool:
        """The caller's own run refused its call (pydantic-ai's ``ToolDenied``, which never
        reaches the executor): the request is denied, decided by the caller as its run, so no
        approver grants it afterwards. False (nothing written) when it is not ``run``'s own, or
        was already decided, withdrawn or expired."""
        approval_id = handle_id(handle)
        record = self._live(approval_id)
        if record is None or record.state is not ApprovalState.PENDING:
            return False
        request = record.request
        if not isinstance(run, Identity) or run.id != request.principal:
            return False
        if self.store.decide(approval_id, ApprovalState.DENIED, run.id, self._clock()) is None:
            return False  # decided elsewhere first
        note = f"requested by {request.principal}; denied by its own run" + (
            f": {why}" if why else ""
        )
        self._audit(request, run, surface, "deny", "approval_denied", note, handle)
        return True

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
        remember: Remember | None = None,
    ) -> ApprovalRecord:
        approval_id = handle_id(handle)
        record = self._live(approval_id)
        request = record.request if record is not None else None
        why = self._refusal(handle, record, approver, state)
        decided = None
        edited, refused_edit = "", False
        if why is None and args is not None:
            assert request is not None
            edited, why = granted_json(request, args, self.edit_check)
            refused_edit = why is not None
        grant = None
        if why is None and remember is not None:
            assert request is not None
            grant, why = self._grant_of(request, approver, remember, edited)
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
        assert request is not None and decided is not None
        outcome = "approval_granted" if state is ApprovalState.GRANTED else "approval_denied"
        note = f"requested by {request.principal}" + (f": {reason}" if reason else "")
        if edited:
            note += "; granted with edited arguments (approved_args_digest)"
        if grant is not None:
            note += f"; remembered as grant {grant.grant_id}"
        effect = "grant" if state is ApprovalState.GRANTED else "deny"
        self._audit(request, approver, surface, effect, outcome, note, handle, digest,
                    grant.grant_id if grant is not None else None)  # fmt: skip
        if grant is None:
            return decided
        grants = self.grant_store
        assert grants is not None
        if not grants.add(grant, MAX_GRANTS):  # filled up since the check: granted once only
            why = f"not remembered: {MAX_GRANTS} live grants"
            self._grant_row(grant, grant.grant_id, approver, surface, "none",
                            "approval_rejected", why, request)  # fmt: skip
            raise ApprovalError(
                f"approval {approval_id} was granted once, but not remembered: the team "
                f"holds {MAX_GRANTS} live grants"
            )
        self._grant_row(grant, grant.grant_id, approver, surface, "grant", "grant_created",
                        describe(redacted_grant(grant, request)), request)  # fmt: skip
        return replace(decided, grant=grant)

    def _grant_of(
        self, request: ApprovalRequest, approver: Identity, remember: Remember, edited: str
    ) -> tuple[Grant | None, str | None]:
        """The grant ``remember`` makes of ``request``, or why it cannot be made."""
        grants = self.grant_store
        if grants is None:
            return None, "this approvals store keeps no grants"
        if edited:
            return None, "an edited grant cannot be remembered (remember the call as it is)"
        now = self._clock()
        try:
            grant = remember.grant(request, approver, now)
        except GrantError as exc:
            return None, f"cannot remember it: {exc}"
        if len(grants.listing(now, limit=MAX_GRANTS)) >= MAX_GRANTS:
            return None, f"cannot remember it: the team holds {MAX_GRANTS} live grants"
        return grant, None

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

    def _grant_row(
        self,
        grant: Grant | None,
        grant_id: str,
        approver: Identity,
        surface: str,
        decision: str,
        outcome: str,
        reason: str,
        request: ApprovalRequest | None = None,
    ) -> None:
        """The audit row of something done to a grant (made, revoked, or refused), its values
        redacted by ``request``, the one it was made from (None: withheld; see
        :func:`.records.redacted_grant`)."""
        audit = self.audit
        if audit is None:
            return
        ts = self._clock()
        audit.record(
            grant_record(ts, grant, grant_id, approver, surface, decision, outcome, reason, request)
        )

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
        grant_id: str | None = None,
    ) -> None:
        audit = self.audit
        if audit is None:
            return
        approval_id = handle_id(handle)
        if request is None:  # expired or already spent: the row still names its call
            stored = self.store.get(approval_id)
            request = stored.request if stored is not None else None
        row = decision_record(
            self._clock(), request, approver, surface, decision, outcome, reason, approval_id,
            approved_args_digest,
        )  # fmt: skip
        audit.record(row._replace(grant_id=grant_id))


def _digest(edited: str) -> str | None:
    return hashlib.sha256(edited.encode()).hexdigest() if edited else None


def _caller(request: ApprovalRequest | None) -> Identity:
    """The calling principal of ``request`` (anonymous when unknown)."""
    if request is None:
        return ANONYMOUS
    return request.identity or Identity(request.principal)
