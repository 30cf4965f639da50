"""The one place that picks a backend: a :class:`StoreLocation` and a team in, stores out.

Backends are imported when chosen, so a SQLite-only install never imports psycopg.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolcards.stores.base import (
    DEFAULT_TEAM,
    ApprovalStore,
    AuditTable,
    BudgetStore,
    RateLimits,
    Store,
    StoreLocation,
)

Location = str | os.PathLike[str] | StoreLocation


def open_team_store(
    location: Location, *, durable: bool = False, connect_timeout: float = 5.0
) -> Store:
    """The team store (state, events, actors) at ``location``; a new object each call."""
    where = StoreLocation.parse(location)
    if where.is_postgres:
        from toolcards.stores.postgres.team import PostgresStore

        return PostgresStore(where.target, connect_timeout=connect_timeout)
    from toolcards.stores.sqlite.team import TeamStore

    return TeamStore(where.target, durable=durable)


def open_audit_table(location: Location, team_id: str | None = None, *, sync: bool) -> AuditTable:
    """One team's audit rows at ``location`` (``:memory:``: this process only). Without a
    team: the team owning a SQLite file, else the default team."""
    where = StoreLocation.parse(location)
    if where.is_postgres:
        from toolcards.stores.postgres.governance import PostgresAuditTable

        return PostgresAuditTable(where.target, team_id)
    from toolcards.stores.sqlite.audit import SqliteAuditTable

    return SqliteAuditTable(where.target, sync=sync, team_id=team_id)


def open_approvals(
    location: Location, team_id: str | None = None
) -> tuple[ApprovalStore, Callable[[], Any] | None]:
    """One team's pending approvals at ``location`` and how to close them (``:memory:``:
    this process only, nothing to close)."""
    where = StoreLocation.parse(location)
    if where.is_memory:
        from toolcards.stores.memory import MemoryApprovalStore

        return MemoryApprovalStore(team_id or DEFAULT_TEAM), None
    if where.is_postgres:
        from toolcards.stores.postgres.governance import PostgresApprovalStore

        pg = PostgresApprovalStore(where.target, team_id)
        return pg, pg.close
    from toolcards.stores.sqlite.approvals import SqliteApprovalStore

    sqlite = SqliteApprovalStore(where.target, team_id)
    return sqlite, sqlite.close


def open_rate_limits(
    location: Location, team_id: str | None = None
) -> tuple[RateLimits, Callable[[], Any] | None]:
    """One team's token buckets: in the database for PostgreSQL (every process shares them),
    else in this process's memory."""
    where = StoreLocation.parse(location)
    if where.is_postgres:
        from toolcards.stores.postgres.governance import PostgresRateLimiter

        pg = PostgresRateLimiter(where.target, team_id)
        return pg, pg.close
    from toolcards.stores.memory import RateLimiter

    return RateLimiter(), None


def open_budgets(
    location: Location, team_id: str | None = None
) -> tuple[BudgetStore, Callable[[], Any] | None]:
    """One team's budget counters at ``location`` and how to close them: a SQLite file or a
    PostgreSQL database every process of the team opens (``:memory:``: this process only)."""
    where = StoreLocation.parse(location)
    if where.is_memory:
        from toolcards.stores.memory import MemoryBudgets

        return MemoryBudgets(team_id or DEFAULT_TEAM), None
    if where.is_postgres:
        from toolcards.stores.postgres.governance import PostgresBudgets

        pg = PostgresBudgets(where.target, team_id)
        return pg, pg.close
    from toolcards.stores.sqlite.budgets import SqliteBudgets

    sqlite = SqliteBudgets(where.target, team_id)
    return sqlite, sqlite.close


@dataclass
class Stores:
    """Every store of one team at one location; :meth:`close` releases them."""

    location: StoreLocation
    team_id: str
    state: Store
    audit: AuditTable
    approvals: ApprovalStore
    rate_limits: RateLimits
    budgets: BudgetStore
    _closers: list[Callable[[], Any]] = field(default_factory=list, repr=False)

    def close(self) -> None:
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            with contextlib.suppress(Exception):
                closer()

    def __enter__(self) -> Stores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_stores(location: Location, team_id: str = DEFAULT_TEAM, *, sync: bool = True) -> Stores:
    """The stores of ``team_id`` at ``location``. With SQLite the team store is the
    file itself and the governance tables live in ``<file>.governance.db`` beside it (the team
    store's file has one writing process; the governance tables have many)."""
    where = StoreLocation.parse(location)
    closers: list[Callable[[], Any]] = []
    try:
        state = open_team_store(where)
        closers.append(state.close)
        beside = where
        if where.path is not None:
            beside = StoreLocation("sqlite", f"{where.target}.governance.db")
        audit = open_audit_table(beside, team_id, sync=sync)
        closers.append(audit.close)
        approvals, close_approvals = open_approvals(beside, team_id)
        if close_approvals is not None:
            closers.append(close_approvals)
        limits, close_limits = open_rate_limits(where, team_id)
        if close_limits is not None:
            closers.append(close_limits)
        spent, close_budgets = open_budgets(beside, team_id)
        if close_budgets is not None:
            closers.append(close_budgets)
    except BaseException:
        for closer in reversed(closers):
            with contextlib.suppress(Exception):
                closer()
        raise
    return Stores(where, team_id, state, audit, approvals, limits, spent, closers)
