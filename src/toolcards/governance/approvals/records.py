"""The audit row of an approval decision: a grant, a denial, or a refused attempt to decide,
under the deciding principal's identity (an edited grant also with the digest of the edit);
and the row of what was done to a remembered grant (made, revoked)."""

from __future__ import annotations

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.grants import Grant
from toolcards.core.identity import Identity
from toolcards.governance.audit.log import AuditRecord

__all__ = ["decision_record", "grant_record"]


def decision_record(
    ts: float,
    request: ApprovalRequest | None,
    approver: Identity,
    surface: str,
    decision: str,
    outcome: str,
    reason: str,
    approval_id: str,
    approved_args_digest: str | None = None,
) -> AuditRecord:
    """The row of one decision on ``request`` (None: unknown, expired or spent; the row then
    names the ``approval_id`` that was given)."""
    return _by(approver, ts, surface, decision, outcome, reason)._replace(
        tool=request.tool_id if request else "",
        call_id=request.call_id if request else None,
        args=request.args if request else {"approval_id": approval_id},
        args_digest=request.args_digest if request else None,
        approved_args_digest=approved_args_digest,
    )


def grant_record(
    ts: float,
    grant: Grant | None,
    grant_id: str,
    approver: Identity,
    surface: str,
    decision: str,
    outcome: str,
    reason: str,
) -> AuditRecord:
    """The row of one thing done to a grant: its arguments are the grant's pattern (None: an
    unknown grant, the row names the id that was given)."""
    return _by(approver, ts, surface, decision, outcome, reason)._replace(
        tool=grant.tool_id if grant else "",
        args=dict(grant.pattern) if grant else {"grant_id": grant_id},
        grant_id=grant_id,
    )


def _by(
    approver: Identity, ts: float, surface: str, decision: str, outcome: str, reason: str
) -> AuditRecord:
    """A row by the deciding principal (anonymous when it is no identity)."""
    who = approver if isinstance(approver, Identity) else None
    return AuditRecord(
        ts=ts,
        principal=who.id if who else "anonymous",
        principal_type=who.type if who else "anonymous",
        roles=who.roles if who else (),
        surface=surface,
        tool="",
        call_id=None,
        args={},
        decision=decision,
        outcome=outcome,
        reason=reason,
    )
