"""The built-in backend of ``postgresql://`` and ``postgres://``: every store of a team in one
database, shared by every process and machine that opens it."""

from __future__ import annotations

from toolcards.stores.backend import Closer, StoreBackend
from toolcards.stores.base import ApprovalStore, BudgetStore, RateLimits
from toolcards.stores.location import StoreLocation
from toolcards.stores.postgres.call_results import PostgresCallResults
from toolcards.stores.postgres.governance import (
    PostgresApprovalStore,
    PostgresAuditTable,
    PostgresBudgets,
    PostgresRateLimiter,
)
from toolcards.stores.postgres.tasks import PostgresTasks
from toolcards.stores.postgres.team import PostgresStore


class PostgresBackend(StoreBackend):
    """A PostgreSQL database (``postgresql://user[:password]@host:port/db``)."""

    shared = True

    def team_store(
        self, where: StoreLocation, *, durable: bool, connect_timeout: float
    ) -> PostgresStore:
        return PostgresStore(where.target, connect_timeout=connect_timeout)

    def audit_table(
        self, where: StoreLocation, team_id: str | None, *, sync: bool
    ) -> PostgresAuditTable:
        return PostgresAuditTable(where.target, team_id)

    def approvals(self, where: StoreLocation, team_id: str | None) -> tuple[ApprovalStore, Closer]:
        store = PostgresApprovalStore(where.target, team_id)
        return store, store.close

    def rate_limits(self, where: StoreLocation, team_id: str | None) -> tuple[RateLimits, Closer]:
        limiter = PostgresRateLimiter(where.target, team_id)
        return limiter, limiter.close

    def budgets(self, where: StoreLocation, team_id: str | None) -> tuple[BudgetStore, Closer]:
        store = PostgresBudgets(where.target, team_id)
        return store, store.close

    def tasks(self, where: StoreLocation, team_id: str | None) -> PostgresTasks:
        return PostgresTasks(where.target, team_id)

    def call_results(self, where: StoreLocation, team_id: str | None) -> PostgresCallResults:
        return PostgresCallResults(where.target, team_id)
