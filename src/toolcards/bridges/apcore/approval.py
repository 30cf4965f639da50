"""One decision per call: pydantic-ai's approval, handed to apcore's approval gate.

apcore resumes an approved call when its inputs carry ``_approval_token``: the gate strips the
token and asks the executor's approval handler ``check_approval(token)``. The bridge installs
:class:`BridgeApprovalHandler` on the executor, wrapping whatever handler was there. When
pydantic-ai has approved a tool call, the toolset mints a single-use token for exactly that call,
sends it with the arguments, and the handler accepts it only while that same call is executing
(the token is held in a context variable of the calling task and is consumed on first use). A
human is therefore asked once, by pydantic-ai, and never a second time by apcore.

Calls that need approval without a pydantic-ai approval fail closed: from the toolset they turn
into a pydantic-ai approval request, and from anywhere else they go to the wrapped handler, or are
rejected when there is none (apcore itself would skip the gate when no handler is configured).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from apcore import ApprovalRequest, ApprovalResult, Executor
from apcore.builtin_steps import BuiltinApprovalGate

APPROVER = "pydantic-ai"
TOKEN_FIELD = "_approval_token"


@dataclass
class _ActiveCall:
    module_id: str
    token: str | None
    consumed: bool = False


_ACTIVE: ContextVar[_ActiveCall | None] = ContextVar("toolcards_apcore_call", default=None)


class BridgeApprovalHandler:
    """apcore approval handler that honours pydantic-ai approvals and fails closed otherwise."""

    def __init__(self, inner: Any | None = None) -> None:
        self.inner = inner

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResult:
        active = _ACTIVE.get()
        if active is not None and request.module_id == active.module_id and not active.consumed:
            # The toolset's own call reached the gate without a pydantic-ai approval.
            return ApprovalResult(
                status="pending",
                reason="awaiting the agent's approval decision",
                metadata={"source": APPROVER},
            )
        if self.inner is not None:
            result: ApprovalResult = await self.inner.request_approval(request)
            return result
        return ApprovalResult(
            status="rejected",
            reason="approval required but no approver is configured",
        )

    async def check_approval(self, approval_id: str) -> ApprovalResult:
        active = _ACTIVE.get()
        if active is not None and active.token is not None:
            if not active.consumed and secrets.compare_digest(approval_id, active.token):
                active.consumed = True
                return ApprovalResult(status="approved", approved_by=APPROVER)
            return ApprovalResult(status="rejected", reason="approval token not valid here")
        if self.inner is not None:
            result: ApprovalResult = await self.inner.check_approval(approval_id)
            return result
        return ApprovalResult(status="rejected", reason="unknown approval token")


def current_handler(executor: Executor) -> Any | None:
    """The approval handler the executor's approval gate consults, if any."""
    for step in executor.current_strategy.steps:
        if isinstance(step, BuiltinApprovalGate):
            return step.handler
    return None


def install(executor: Executor) -> BridgeApprovalHandler:
    """Install (once) a :class:`BridgeApprovalHandler` wrapping the executor's handler."""
    existing = current_handler(executor)
    if isinstance(existing, BridgeApprovalHandler):
        return existing
    handler = BridgeApprovalHandler(existing)
    executor.set_approval_handler(handler)
    return handler


@contextmanager
def bound_call(module_id: str, *, approved: bool) -> Iterator[str | None]:
    """Mark one executor call as in flight; yield its approval token when approved.

    The token is valid only inside this block, only for this task, and only once.
    """
    token = secrets.token_urlsafe(24) if approved else None
    reset = _ACTIVE.set(_ActiveCall(module_id=module_id, token=token))
    try:
        yield token
    finally:
        _ACTIVE.reset(reset)
