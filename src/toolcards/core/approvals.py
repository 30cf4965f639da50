"""What an approval is: the request a human sees, its state and its decision (data only)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from toolcards.core.grants import Grant
from toolcards.core.identity import Identity

__all__ = ["ApprovalRecord", "ApprovalRequest", "ApprovalState", "new_approval_id"]


def new_approval_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a human is asked to approve. ``args_json`` is the exact arguments as canonical
    JSON (the text whose SHA-256 is ``args_digest``): what an approver must see, and what
    runs. ``args`` is the redacted copy kept for the audit trail and shown to non-approvers.
    ``approval_id`` is the handle a decision names."""

    call_id: str
    tool_id: str
    args_digest: str
    principal: str
    args: Mapping[str, Any]
    reason: str
    expires_at: float  # wall-clock (time.time()) seconds
    surface: str = ""
    identity: Identity | None = field(default=None, compare=False)
    approval_id: str = field(default_factory=new_approval_id)
    created_at: float = 0.0
    args_json: str = field(default="", repr=False)
    session: str = field(default="", compare=False)
    """The session the call came from ("" for none): a pydantic-ai conversation, an MCP
    session. A grant remembered from the request may be limited to it."""

    @property
    def exact_recorded(self) -> bool:
        """Whether ``args_json`` holds the exact arguments the digest binds (a request
        recorded without them can be denied, never granted)."""
        if not self.args_json:
            return False
        try:
            data = self.args_json.encode()
        except UnicodeEncodeError:
            return False
        return hashlib.sha256(data).hexdigest() == self.args_digest

    @property
    def exact_args(self) -> dict[str, Any] | None:
        """The exact arguments that run when the request is granted (None when they were
        not recorded)."""
        if not self.exact_recorded:
            return None
        value = json.loads(self.args_json)
        return value if isinstance(value, dict) else None

    @property
    def binding(self) -> tuple[str, str, str, str]:
        """(call id, tool, argument digest, principal): what an approval is valid for."""
        return (self.call_id, self.tool_id, self.args_digest, self.principal)

    def as_metadata(self) -> dict[str, Any]:
        """A JSON-able summary for ``DeferredToolRequests.metadata`` or a UI."""
        return {
            "approval_id": self.approval_id,
            "tool": self.tool_id,
            "principal": self.principal,
            "args_digest": self.args_digest,
            "args": dict(self.args),
            "reason": self.reason,
            "expires_at": self.expires_at,
        }


class ApprovalState(StrEnum):
    PENDING = "pending"
    GRANTED = "granted"
    DENIED = "denied"
    EXPIRED = "expired"
    """Expired, spent, withdrawn or never recorded: nothing can be decided or run any more."""


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A stored request with its decision (``approver`` is the deciding principal's id)."""

    request: ApprovalRequest
    state: ApprovalState = ApprovalState.PENDING
    approver: str | None = None
    decided_at: float | None = None
    edited_json: str = ""
    """The arguments the approver granted in place of the request's own (canonical JSON),
    empty when the grant runs the request's arguments as they are."""
    grant: Grant | None = None
    """The grant the approver remembered the decision as (None: decided once)."""

    @property
    def edited_args(self) -> dict[str, Any] | None:
        """The approver's edited arguments (None: no edit)."""
        if not self.edited_json:
            return None
        value = json.loads(self.edited_json)
        return value if isinstance(value, dict) else None

    @property
    def edited_digest(self) -> str | None:
        """The SHA-256 of :attr:`edited_json` (None: no edit)."""
        if not self.edited_json:
            return None
        return hashlib.sha256(self.edited_json.encode()).hexdigest()
