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
from collections import OrderedDict
from typing import Any

import mcp.types as types

from toolcards.core.identity import Identity
from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalError,
    ApprovalRequest,
    Approver,
)
from toolcards.governance.redaction.redactor import args_digest
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

    ASKED = 4096
    """Requests whose arguments, as the client sent them, are remembered for its retry."""

    def __init__(self, broker: ApprovalBroker) -> None:
        self.broker = broker
        self._asked: OrderedDict[str, str] = OrderedDict()
        """Approval id -> the digest of the arguments the client sent with the asking call."""

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
        sent = self._asked.get(shown.approval_id, shown.args_digest)
        if args_digest(params.arguments or {}) != sent:  # another call: it is asked anew
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

    def ask(
        self, request: ApprovalRequest, arguments: dict[str, Any] | None
    ) -> types.InputRequiredResult:
        """The answer of a call that waits for its approval: the question and its request
        (the arguments as sent are remembered: only a retry sending them resumes it; one with
        other arguments took the call's id and its request, two calls under one id)."""
        self._asked[request.approval_id] = args_digest(arguments or {})
        while len(self._asked) > self.ASKED:
            self._asked.popitem(last=False)
        return types.InputRequiredResult(
            input_requests={APPROVAL_KEY: question(request)}, request_state=request.approval_id
        )
