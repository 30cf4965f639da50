"""The governed call a tool runs in: what a tool needs to govern work done on that call's
behalf (an MCP server's requests to the client while its tool runs).

The executor sets :data:`governing_call` around the tool's run; the value is the executor
itself (its policy, audit log and approvals), the caller, the surface and the call id.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from toolcards.core.identity import Identity

__all__ = ["GoverningCall", "governing_call"]


@dataclass(frozen=True, slots=True)
class GoverningCall:
    """One governed call while its tool runs."""

    executor: Any
    """The :class:`~toolcards.governance.executor.pipeline.Executor` running the call (not imported
    here: the executor imports this module)."""
    identity: Identity
    surface: str
    call_id: str | None
    tool_id: str


governing_call: ContextVar[GoverningCall | None] = ContextVar(
    "toolcards_governing_call", default=None
)
"""The governed call whose tool runs in this context (None outside one)."""
