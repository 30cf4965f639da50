"""Deciding a pending call from the dashboard: the decision names exactly what the page
showed (the binding in the form), and goes through the broker, which checks the role,
refuses self-approval and audits it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolcards.core.identity import Identity
    from toolcards.governance.approvals import ApprovalBroker

__all__ = ["decide_shown"]


def decide_shown(
    broker: ApprovalBroker,
    identity: Identity,
    approval_id: str,
    shown: tuple[str, ...],
    grant: bool,
) -> tuple[int, str]:
    """Grant or deny what the human saw (the binding in the form), through the broker."""
    from toolcards.governance.approvals import ApprovalError

    request = broker.get(approval_id)
    handle: Any = approval_id
    if request is not None:
        call_id, tool_id, digest, principal = shown
        handle = dataclasses.replace(
            request, call_id=call_id, tool_id=tool_id, args_digest=digest, principal=principal
        )
    decide: Callable[..., Any] = broker.grant if grant else broker.deny
    try:
        decided = decide(handle, approver=identity, surface="dashboard")
    except ApprovalError as exc:
        own = request is not None and request.principal == identity.id
        forbidden = broker.approver_role not in identity.roles or own
        return (403 if forbidden else 409), str(exc)
    verb = "granted" if grant else "denied"
    return 200, f"{verb}: {decided.tool_id} for {decided.principal}"
