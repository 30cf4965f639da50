"""The audit row of an approval decision: a grant, a denial, or a refused attempt to decide,
under the deciding principal's identity (an edited grant also with the digest of the edit);
and the row of what was done to a remembered grant (made, revoked).

A grant's row shows its pattern redacted as the call's own rows are: the values it names are
the request's redacted copy (the tool's ``sensitive`` names and the policy's redactor applied
when the call asked), or withheld when that request is not at hand (a revoke, perhaps in
another process after a restart)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.grants import Grant
from toolcards.core.identity import Identity
from toolcards.governance.audit.log import AuditRecord, made_by
from toolcards.governance.redaction.patterns import REDACTED

__all__ = ["decision_record", "grant_record", "redacted_grant"]


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
    request: ApprovalRequest | None = None,
) -> AuditRecord:
    """The row of one thing done to a grant: its arguments are the grant's pattern, redacted
    by ``request``, the one it was made from (see :func:`redacted_grant`; None: an unknown
    grant, the row names the id that was given)."""
    return _by(approver, ts, surface, decision, outcome, reason)._replace(
        tool=grant.tool_id if grant else "",
        args=dict(redacted_grant(grant, request).pattern) if grant else {"grant_id": grant_id},
        grant_id=grant_id,
    )


def redacted_grant(grant: Grant, request: ApprovalRequest | None = None) -> Grant:
    """``grant`` as an audit row may show it: each value its pattern names as ``request``'s
    redacted copy shows that argument (a glob kept only where the copy shows the argument
    whole), and every value withheld without ``request`` (an ``any`` stays)."""
    exact = (request.exact_args if request is not None else None) or {}
    shown = request.args if request is not None and exact else {}
    pattern: dict[str, Any] = {}
    for name, spec in grant.pattern.items():
        if spec == "any":  # names no value
            pattern[name] = spec
        elif name not in shown or name not in exact:
            pattern[name] = {kind: REDACTED for kind in spec}
        elif "eq" in spec:  # a grant's exact value is the request's own (it covers it)
            pattern[name] = {"eq": shown[name]}
        else:  # a glob the approver typed may spell the value: kept if the value is shown
            whole = shown[name] == exact[name]
            pattern[name] = {kind: value if whole else REDACTED for kind, value in spec.items()}
    return replace(grant, pattern=pattern)


def _by(
    approver: Identity, ts: float, surface: str, decision: str, outcome: str, reason: str
) -> AuditRecord:
    """A row by the deciding principal (anonymous when it is no identity)."""
    who = approver if isinstance(approver, Identity) else None
    return AuditRecord(
        ts,
        *made_by(who),
        surface=surface,
        tool="",
        call_id=None,
        args={},
        decision=decision,
        outcome=outcome,
        reason=reason,
    )
