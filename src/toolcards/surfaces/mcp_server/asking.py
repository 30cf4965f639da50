"""``approval: client`` for MCP 2026-07-28 clients, which the server cannot send a request
of its own: a call that needs a human's approval answers ``InputRequiredResult``, asking the
client (an elicitation form with the exact arguments, as the inbox shows them; the
``requestState`` names the pending request), and the client's retry with the answer releases
or refuses the call. The request also waits in the out-of-band inbox: whichever answer comes
first decides, and is audited once (a yes from the client as the caller's own grant, as with
``approval: client`` everywhere). A retry decides only the request it was shown: same caller,
same tool, same arguments; anything else is asked again.
"""

from __future__ import annotations

import contextlib
from typing import Any

import mcp.types as types

from toolcards.core.identity import Identity
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalError,
    ApprovalRequest,
    Approver,
)
from toolcards.surfaces.approval import APPROVAL_SCHEMA, approval_prompt

APPROVAL_KEY = "approval"
"""The key of the approval question among a result's ``inputRequests``."""


def approves(answer: Any) -> bool:
    """Whether an elicitation answer (a model or its JSON) accepts with ``approve: true``."""
    if isinstance(answer, types.ElicitResult):
        answer = answer.model_dump(mode="json")
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return False
    content = answer.get("content")
    return isinstance(content, dict) and content.get("approve") is True


def question(request: ApprovalRequest) -> types.ElicitRequest:
    """The elicitation a client answers to approve ``request``."""
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=approval_prompt(request), requested_schema=APPROVAL_SCHEMA
        )
    )


class AskingClient:
    """Asks the calling 2026-07-28 client through ``InputRequiredResult`` (see the module)."""

    def __init__(self, broker: ApprovalBroker) -> None:
        self.broker = broker

    def resume(
        self, who: Identity, name: str, params: types.CallToolRequestParams
    ) -> tuple[ApprovalRequest | None, Approver | None]:
        """The request to resume (its call id, and its session: the retry comes in a session
        of its own) and the approver that carries the client's answer, for a retry naming a
        pending request of ``who`` for ``name``; (None, None) for a fresh call."""
        state = params.request_state
        shown = self.broker.get(state) if state else None
        if shown is None or shown.principal != who.id or shown.tool_id != name:
            return None, None
        answers = params.input_responses or {}
        if APPROVAL_KEY not in answers:
            return shown, None
        yes = approves(answers[APPROVAL_KEY])
        broker = self.broker

        async def approver(pending: ApprovalRequest) -> bool:
            if not yes or pending.approval_id != shown.approval_id:  # not what it was shown
                return False
            with contextlib.suppress(ApprovalError):  # decided meanwhile: the gate settles it
                broker.grant_by_caller(pending, surface="mcp")
                return True
            return False

        return shown, approver

    @staticmethod
    def ask(request: ApprovalRequest) -> types.InputRequiredResult:
        """The answer of a call that waits for its approval: the question and its request."""
        return types.InputRequiredResult(
            input_requests={APPROVAL_KEY: question(request)}, request_state=request.approval_id
        )
