"""Governance: identity, policy (ACL), rate limits, approvals, validation and audit for
every tool call, on every surface.

Names are imported on first use so ``import toolcards`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_NAMES = {
    "Identity": "toolcards.governance.identity",
    "Policy": "toolcards.governance.policy",
    "PolicyError": "toolcards.governance._policy_parse",
    "Decision": "toolcards.governance.policy",
    "AuditLog": "toolcards.governance.audit",
    "AuditEntry": "toolcards.governance.audit",
    "ApprovalBroker": "toolcards.governance.approvals",
    "ApprovalRequest": "toolcards.governance.approvals",
    "Capability": "toolcards.governance.capability",
    "CapabilityRegistry": "toolcards.governance.capability",
    "Executor": "toolcards.governance.executor",
    "ExecutionResult": "toolcards.governance.executor",
    "Outcome": "toolcards.governance.executor",
    "RateLimiter": "toolcards.governance.ratelimit",
    "GovernedToolset": "toolcards.governance.toolset",
    "provider_safe_name": "toolcards.governance.toolset",
    "PolicyTableRow": "toolcards.governance.table",
    "load_policy_table": "toolcards.governance.table",
    "run_policy_table": "toolcards.governance.table",
}

if TYPE_CHECKING:
    from toolcards.governance._policy_parse import PolicyError
    from toolcards.governance.approvals import ApprovalBroker, ApprovalRequest
    from toolcards.governance.audit import AuditEntry, AuditLog
    from toolcards.governance.capability import Capability, CapabilityRegistry
    from toolcards.governance.executor import ExecutionResult, Executor, Outcome
    from toolcards.governance.identity import Identity
    from toolcards.governance.policy import Decision, Policy
    from toolcards.governance.ratelimit import RateLimiter
    from toolcards.governance.table import PolicyTableRow, load_policy_table, run_policy_table
    from toolcards.governance.toolset import GovernedToolset, provider_safe_name

__all__ = [
    "ApprovalBroker",
    "ApprovalRequest",
    "AuditEntry",
    "AuditLog",
    "Capability",
    "CapabilityRegistry",
    "Decision",
    "ExecutionResult",
    "Executor",
    "GovernedToolset",
    "Identity",
    "Outcome",
    "Policy",
    "PolicyError",
    "PolicyTableRow",
    "RateLimiter",
    "load_policy_table",
    "provider_safe_name",
    "run_policy_table",
]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'toolcards.governance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
