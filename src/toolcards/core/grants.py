"""What a remembered approval is: a grant (data only; the matching is governance's).

An approver who decides a pending call may also remember the decision: this principal may call
this tool with arguments matching this pattern, until this time (and, optionally, only within
the session the call came from). Calls the grant covers then run without asking anyone, each
audited with the grant's id, until the grant expires or is revoked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Grant", "new_grant_id"]


def new_grant_id() -> str:
    return "g-" + uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Grant:
    """One remembered approval. ``pattern`` maps every argument name a covered call may pass
    to what its value must be: ``{"eq": value}`` (exactly that JSON value), ``{"glob":
    "notes/*"}`` (a string matching the shell-style pattern) or ``"any"`` (any value, or
    none). A call passing an argument the pattern does not name is not covered. ``session``
    ("" for any) limits it to calls of one session (a pydantic-ai conversation, an MCP
    session)."""

    principal: str
    tool_id: str
    pattern: Mapping[str, Any]
    expires_at: float
    created_by: str
    created_at: float
    session: str = ""
    approval_id: str = ""
    """The pending request the approver decided when making it (what the approver saw)."""
    grant_id: str = field(default_factory=new_grant_id)
    revoked_at: float | None = None
    revoked_by: str | None = None

    @property
    def pattern_json(self) -> str:
        """The pattern as canonical JSON (what is stored and shown)."""
        return json.dumps(
            dict(self.pattern), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )

    def live(self, now: float) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked_at is None and self.expires_at > now
