"""The built-in backend of a file path and of ``":memory:"``: the team store is the SQLite
file (one writing process), the other stores are SQLite files the processes of one machine
share (approvals and budgets in memory for ``":memory:"``), and rate limits are this process's."""

from __future__ import annotations

from toolcards.stores.audit_sql import SqliteAuditTable
from toolcards.stores.backend import Closer, StoreBackend
from toolcards.stores.base import DEFAULT_TEAM, ApprovalStore, BudgetStore, RateLimits
from toolcards.stores.call_results import SqliteCallResults
from toolcards.stores.location import StoreLocation
from toolcards.stores.memory import MemoryApprovalStore, MemoryBudgets, RateLimiter
from toolcards.stores.sqlite.approvals import SqliteApprovalStore
from toolcards.stores.sqlite.budgets import SqliteBudgets
from toolcards.stores.sqlite.team import TeamStore
from toolcards.stores.tasks import SqliteTasks


class SqliteBackend(StoreBackend):
    """SQLite files, or this process's memory."""

    def team_store(
        self, where: StoreLocation, *, durable: bool, connect_timeout: float
    ) -> TeamStore:
        return TeamStore(where.target, durable=durable)

    def audit_table(
        self, where: StoreLocation, team_id: str | None, *, sync: bool
    ) -> SqliteAuditTable:
        return SqliteAuditTable(where.target, sync=sync, team_id=team_id)

    def approvals(self, where: StoreLocation, team_id: str | None) -> tuple[ApprovalStore, Closer]:
        if where.is_memory:
            return MemoryApprovalStore(team_id or DEFAULT_TEAM), None
        store = SqliteApprovalStore(where.target, team_id)
        return store, store.close

    def rate_limits(self, where: StoreLocation, team_id: str | None) -> tuple[RateLimits, Closer]:
        return RateLimiter(), None

    def budgets(self, where: StoreLocation, team_id: str | None) -> tuple[BudgetStore, Closer]:
        if where.is_memory:
            return MemoryBudgets(team_id or DEFAULT_TEAM), None
        store = SqliteBudgets(where.target, team_id)
        return store, store.close

    def tasks(self, where: StoreLocation, team_id: str | None) -> SqliteTasks:
        return SqliteTasks(where.target, team_id)

    def call_results(self, where: StoreLocation, team_id: str | None) -> SqliteCallResults:
        return SqliteCallResults(where.target, team_id)
