"""Governance: identity, policy (ACL), rate limits, approvals, validation and audit for
every tool call, on every surface.

Names are imported on first use so ``import toolcards`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolcards._lazy import lazy_names

_NAMES = {
    "Identity": "toolcards.core.identity",
    "Policy": "toolcards.governance.policy.policy",
    "PolicyError": "toolcards.governance.policy.parse",
    "Decision": "toolcards.governance.policy.policy",
    "AuditLog": "toolcards.governance.audit.log",
    "AuditEntry": "toolcards.governance.audit.log",
    "ApprovalBroker": "toolcards.governance.approvals.broker",
    "ApprovalError": "toolcards.governance.approvals.broker",
    "ApprovalRequest": "toolcards.governance.approvals.broker",
    "ApprovalState": "toolcards.governance.approvals.broker",
    "ApprovalStore": "toolcards.stores.base",
    "BudgetExceeded": "toolcards.governance.toolset.budget",
    "BudgetStore": "toolcards.stores.base",
    "Budgets": "toolcards.governance.executor.budget",
    "Grant": "toolcards.core.grants",
    "GrantStore": "toolcards.stores.base",
    "Remember": "toolcards.governance.approvals.grants",
    "MemoryApprovalStore": "toolcards.stores.memory",
    "SqliteApprovalStore": "toolcards.stores.sqlite.approvals",
    "AuditRecord": "toolcards.governance.audit.log",
    "Redactor": "toolcards.governance.redaction.redactor",
    "Telemetry": "toolcards.governance.telemetry",
    "ToolCapability": "toolcards.governance.capability",
    "CapabilityRegistry": "toolcards.governance.capability",
    "Executor": "toolcards.governance.executor.pipeline",
    "ExecutionResult": "toolcards.governance.executor.pipeline",
    "Outcome": "toolcards.governance.outcomes",
    "RateLimiter": "toolcards.stores.memory",
    "GovernedToolset": "toolcards.governance.toolset.governed",
    "ModelBudget": "toolcards.governance.toolset.budget",
    "HookContext": "toolcards.governance.guardrails",
    "Refuse": "toolcards.governance.guardrails",
    "SecretScanner": "toolcards.governance.redaction.scanner",
    "ToolHook": "toolcards.governance.guardrails",
    "input_guardrail": "toolcards.governance.guardrails",
    "output_guardrail": "toolcards.governance.guardrails",
    "provider_safe_name": "toolcards.core.names",
    "PolicyTableRow": "toolcards.governance.policy.table",
    "load_policy_table": "toolcards.governance.policy.table",
    "run_policy_table": "toolcards.governance.policy.table",
}

if TYPE_CHECKING:
    from toolcards.core.grants import Grant
    from toolcards.core.identity import Identity
    from toolcards.core.names import provider_safe_name
    from toolcards.governance.approvals.broker import (
        ApprovalBroker,
        ApprovalError,
        ApprovalRequest,
        ApprovalState,
    )
    from toolcards.governance.approvals.grants import Remember
    from toolcards.governance.audit.log import AuditEntry, AuditLog, AuditRecord
    from toolcards.governance.capability import CapabilityRegistry, ToolCapability
    from toolcards.governance.executor.budget import Budgets
    from toolcards.governance.executor.pipeline import ExecutionResult, Executor
    from toolcards.governance.guardrails import (
        HookContext,
        Refuse,
        ToolHook,
        input_guardrail,
        output_guardrail,
    )
    from toolcards.governance.outcomes import Outcome
    from toolcards.governance.policy.parse import PolicyError
    from toolcards.governance.policy.policy import Decision, Policy
    from toolcards.governance.policy.table import (
        PolicyTableRow,
        load_policy_table,
        run_policy_table,
    )
    from toolcards.governance.redaction.redactor import Redactor
    from toolcards.governance.redaction.scanner import SecretScanner
    from toolcards.governance.telemetry import Telemetry
    from toolcards.governance.toolset.budget import BudgetExceeded, ModelBudget
    from toolcards.governance.toolset.governed import GovernedToolset
    from toolcards.stores.base import ApprovalStore, BudgetStore, GrantStore
    from toolcards.stores.memory import MemoryApprovalStore, RateLimiter
    from toolcards.stores.sqlite.approvals import SqliteApprovalStore

__all__ = [
    "ApprovalBroker",
    "ApprovalError",
    "ApprovalRequest",
    "ApprovalState",
    "ApprovalStore",
    "AuditEntry",
    "AuditLog",
    "AuditRecord",
    "BudgetExceeded",
    "BudgetStore",
    "Budgets",
    "CapabilityRegistry",
    "Decision",
    "ExecutionResult",
    "Executor",
    "GovernedToolset",
    "Grant",
    "GrantStore",
    "HookContext",
    "Identity",
    "MemoryApprovalStore",
    "ModelBudget",
    "Outcome",
    "Policy",
    "PolicyError",
    "PolicyTableRow",
    "RateLimiter",
    "Redactor",
    "Refuse",
    "Remember",
    "SecretScanner",
    "SqliteApprovalStore",
    "Telemetry",
    "ToolCapability",
    "ToolHook",
    "input_guardrail",
    "load_policy_table",
    "output_guardrail",
    "provider_safe_name",
    "run_policy_table",
]


__getattr__, __dir__ = lazy_names(__name__, _NAMES, renamed={"Capability": "ToolCapability"})
