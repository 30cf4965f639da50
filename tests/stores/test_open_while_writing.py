"""A process that opens a PostgreSQL store of the current layout while other processes write
to it takes no lock on its tables. ``CREATE INDEX IF NOT EXISTS`` takes its table's SHARE lock
(and ``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` an ACCESS EXCLUSIVE one) before finding the
index or column there: an opener waited for every open write, and one that locked a table a
writer needed next deadlocked with it (four processes opening one team's store at once got
``deadlock detected``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from toolcards.stores.postgres.call_results import PostgresCallResults
from toolcards.stores.postgres.governance import (
    PostgresApprovalStore,
    PostgresAuditTable,
    PostgresBudgets,
    PostgresRateLimiter,
)
from toolcards.stores.postgres.tasks import PostgresTasks
from toolcards.stores.postgres.team import PostgresStore

OPENERS: dict[str, Callable[[str], Any]] = {
    "team store": PostgresStore,
    "approvals and grants": lambda url: PostgresApprovalStore(url, "t"),
    "rate limits": lambda url: PostgresRateLimiter(url, "t"),
    "budgets": lambda url: PostgresBudgets(url, "t"),
    "audit": lambda url: PostgresAuditTable(url, "t"),
    "call results": lambda url: PostgresCallResults(url, "t"),
    "tasks": lambda url: PostgresTasks(url, "t"),
}


@pytest.mark.parametrize("name", list(OPENERS))
def test_opening_a_current_store_waits_for_no_writer(postgres_url: str, name: str) -> None:
    OPENERS[name](postgres_url).close()  # the first open creates the tables and indexes
    database = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        # a lock not granted within 3 s fails the statement (the bound of the old code's wait)
        admin.execute(f'ALTER DATABASE "{database}" SET lock_timeout = 3000')
    with psycopg.connect(postgres_url) as writer:
        tables = [
            row[0]
            for row in writer.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'toolcards%'"
            ).fetchall()
        ]
        assert tables
        # what every INSERT, UPDATE and DELETE of an open write transaction holds
        writer.execute(f"LOCK TABLE {', '.join(tables)} IN ROW EXCLUSIVE MODE")
        OPENERS[name](postgres_url).close()  # opens while the writes are open
        writer.rollback()
