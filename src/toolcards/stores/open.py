"""The openers: a :class:`StoreLocation` and a team in, stores out. Each asks the location's
backend (:class:`toolcards.stores.backend.StoreBackend`: SQLite, PostgreSQL, or an installed
scheme's), imported when first chosen, so a SQLite-only install never imports psycopg.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolcards.stores.backend import Closer, backend_of
from toolcards.stores.base import (
    ApprovalStore,
    AuditTable,
    BudgetStore,
    RateLimits,
    Store,
)
from toolcards.stores.call_results import CallResults
from toolcards.stores.location import StoreLocation
from toolcards.stores.tasks import SqlTasks

Location = str | os.PathLike[str] | StoreLocation


def open_team_store(
    location: Location,
    *,
    durable: bool = False,
    connect_timeout: float = 5.0,
    read_only: bool = False,
) -> Store:
    """The team store (state, events, actors) at ``location``; a new object each call.
    ``read_only``: a SQLite file opened without its writer's lock, to be looked at while its
    writer runs (other stores have no such lock)."""
    where = StoreLocation.parse(location)
    if read_only and where.path is not None:
        from toolcards.stores.sqlite.team import TeamStore  # lazy: as every backend is

        return TeamStore(where.path, read_only=True)
    return backend_of(where).team_store(where, durable=durable, connect_timeout=connect_timeout)


def open_audit_table(
    location: Location, team_id: str | None = None, *, sync: bool, read_only: bool = False
) -> AuditTable:
    """One team's audit rows at ``location`` (``:memory:``: this process only). Without a
    team: the team owning a SQLite file, else the default team. ``read_only``: a trail looked
    at beside its writer, which creates, claims and migrates nothing (a SQLite file needing
    that is refused) and waits for no write lock."""
    where = StoreLocation.parse(location)
    if read_only and where.path is not None:
        from toolcards.stores.audit_sql import SqliteAuditTable  # lazy: as every backend is

        return SqliteAuditTable(where.path, sync=sync, team_id=team_id, read_only=True)
    if read_only and where.kind == "postgres":
        from toolcards.stores.postgres.governance import PostgresAuditTable  # lazy: psycopg

        return PostgresAuditTable(where.target, team_id, read_only=True)
    return backend_of(where).audit_table(where, team_id, sync=sync)


def open_approvals(location: Location, team_id: str | None = None) -> tuple[ApprovalStore, Closer]:
    """One team's pending approvals at ``location`` and how to close them (``:memory:``:
    this process only, nothing to close)."""
    where = StoreLocation.parse(location)
    return backend_of(where).approvals(where, team_id)


def open_tasks(location: Location, team_id: str | None = None) -> SqlTasks:
    """One team's MCP task rows at ``location`` (``:memory:``: this process only); close
    them when done."""
    where = StoreLocation.parse(location)
    return backend_of(where).tasks(where, team_id)


def open_rate_limits(location: Location, team_id: str | None = None) -> tuple[RateLimits, Closer]:
    """One team's token buckets: in the database of a shared location (every process shares
    them), else in this process's memory."""
    where = StoreLocation.parse(location)
    return backend_of(where).rate_limits(where, team_id)


def open_call_results(location: Location, team_id: str | None = None) -> CallResults:
    """One team's recorded call results (durable runs) at ``location``: a SQLite file shared
    by the processes of one machine, a PostgreSQL database shared by every machine."""
    where = StoreLocation.parse(location)
    return backend_of(where).call_results(where, team_id)


def open_budgets(location: Location, team_id: str | None = None) -> tuple[BudgetStore, Closer]:
    """One team's budget counters at ``location`` and how to close them: a SQLite file or a
    PostgreSQL database every process of the team opens (``:memory:``: this process only)."""
    where = StoreLocation.parse(location)
    return backend_of(where).budgets(where, team_id)


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


def open_stores(location: Location, team_id: str | None = None, *, sync: bool = True) -> Stores:
    """The stores of ``team_id`` at ``location`` (a PostgreSQL store needs it; a SQLite
    one defaults to its file's team). With SQLite the team store is the file itself and the
    governance tables live in ``<file>.governance.db`` beside it (the team store's file has one
    writing process; the governance tables have many)."""
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
    return Stores(where, audit.team_id, state, audit, approvals, limits, spent, closers)
