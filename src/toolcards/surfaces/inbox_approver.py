"""The dashboard's approver channel: approval-required calls wait in the page's inbox.

:class:`InboxApprover` is an executor approver (``await approver(request) -> bool``). The
request is put in the dashboard's :class:`~toolcards.governance.approvals.broker.ApprovalBroker`
(it is already there when the executor shares that broker) and the call waits, at most
``timeout`` seconds, for a principal with the approver role to grant or deny it on the page.
No decision in time is :class:`~toolcards.governance.approvals.broker.ApprovalTimedOut` (the call's
outcome is ``approval_timeout``, not a refusal). The broker binds the decision to the call id,
tool, argument digest and principal, refuses self-approval and audits it with the approver's
identity; the executor then runs the call once, or refuses it.

Hooks::

    Team(..., approver=InboxApprover(broker))                 # members of a team
    GovernedToolset(..., approver=InboxApprover(broker))      # one agent's toolset
    GovernedMCPServer(runtime, approver=InboxApprover(runtime.executor.approvals))
    GovernedMCPServer(runtime, approvals=InboxApprover(...))  # servers asking per call
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalRequest,
    ApprovalState,
    ApprovalTimedOut,
)

DEFAULT_TIMEOUT = 300.0
"""How long a call waits for a human by default (seconds)."""


class InboxApprover:
    """Waits for a decision made in the dashboard (or anywhere sharing ``broker``'s store)."""

    def __init__(self, broker: ApprovalBroker, timeout: float = DEFAULT_TIMEOUT) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.broker = broker
        self.timeout = timeout

    async def __call__(self, request: ApprovalRequest) -> bool:
        broker = self.broker
        now = time.time()
        limit = min(self.timeout, request.expires_at - now)
        if limit <= 0:
            raise ApprovalTimedOut(self.timeout)
        mirrored = broker.get(request) is None  # recorded by another executor's broker
        shown = broker.store.add(request, now).request if mirrored else request
        try:
            state = await broker.wait(shown, limit)
        except BaseException:  # cancelled: the call is gone, so is its place in the inbox
            broker.withdraw(shown)
            raise
        if mirrored or state is ApprovalState.PENDING:
            broker.withdraw(shown)
        if state in (ApprovalState.PENDING, ApprovalState.EXPIRED):  # nobody decided in time
            raise ApprovalTimedOut(self.timeout)
        return state is ApprovalState.GRANTED

    def for_call(self, ctx: Any) -> AskedInbox:
        """The per-call view a server that picks an approver per request asks for."""
        return AskedInbox(self)


@dataclass
class AskedInbox:
    """One call's approver (the inbox) and whether a human was asked."""

    inbox: InboxApprover
    asked: list[bool] = field(default_factory=list)

    async def approver(self, request: ApprovalRequest) -> bool:
        self.asked.append(True)
        return await self.inbox(request)

    @property
    def human_asked(self) -> bool:
        return bool(self.asked)
