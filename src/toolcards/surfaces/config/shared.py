"""The governance state every process of one config shares: the audit trail, the pending
approvals (and their grants), the budget counters and the rate-limit counters.

With a PostgreSQL store all three live in that database (unless ``audit:`` names another
place for the trail), so ``toolcards serve`` and any number of ``toolcards call`` processes
keep one trail, one approvals inbox, one set of budgets and one limit. With SQLite, the
approvals and the budget counters are a SQLite file beside the audit file (a ``toolcards
approvals grant`` process decides what a server waits for; ``toolcards budgets`` reads what
the team spent) and rate limits are the serving process's (the CLI forwards to it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from toolcards.governance.approvals.broker import ApprovalBroker
from toolcards.governance.audit.log import AuditLog
from toolcards.stores.open import open_approvals, open_budgets, open_rate_limits

if TYPE_CHECKING:
    from toolcards.stores.base import BudgetStore, RateLimits
    from toolcards.surfaces.config import SurfaceConfig


@dataclass
class SharedGovernance:
    """What :func:`open_shared` opened; :meth:`close` releases it (in reverse order)."""

    audit: AuditLog | None
    approvals: ApprovalBroker
    rate_limiter: RateLimits | None = None
    budgets: BudgetStore | None = None
    closers: list[Callable[[], Any]] = field(default_factory=list, repr=False)

    def close(self) -> None:
        closers, self.closers = self.closers, []
        for closer in reversed(closers):
            closer()


def open_shared(
    config: SurfaceConfig,
    *,
    durability: Literal["batched", "sync"] = "batched",
    audit: bool = True,
    rate_limits: bool = True,
) -> SharedGovernance:
    """Open the config's audit log (unless ``audit=False``), approvals broker, budget counters
    and (with a PostgreSQL store, unless ``rate_limits=False``) shared rate limiter."""
    closers: list[Callable[[], Any]] = []
    try:
        log = None
        location = config.audit_location if audit else None
        if location is not None:
            log = AuditLog(location, durability=durability, team_id=config.team_id)
            closers.append(log.close)
        store, close_store = open_approvals(config.approvals_location, config.team_id)
        if close_store is not None:
            closers.append(close_store)
        ttl = config.approval_timeout  # the card shows when the waiting call gives up
        broker = ApprovalBroker(ttl, store=store, audit=log)
        spent, close_spent = open_budgets(config.approvals_location, config.team_id)
        if close_spent is not None:
            closers.append(close_spent)
        limiter = None
        shared_limits = config.rate_limits_location
        if rate_limits and shared_limits is not None:
            limiter, close_limiter = open_rate_limits(shared_limits, config.team_id)
            if close_limiter is not None:
                closers.append(close_limiter)
    except BaseException:
        for closer in reversed(closers):
            closer()
        raise
    return SharedGovernance(log, broker, limiter, spent, closers)
