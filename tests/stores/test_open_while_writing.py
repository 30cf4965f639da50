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

from toolcards.stores.migrate import TeamColumn
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


def test_a_table_without_its_team_column_gains_it_once(postgres_url: str) -> None:
    """An older table gains its added columns and the team column (its rows keep the empty
    team: no team sees them) and loses the indexes made without the team; a table that has
    them all is left without a lock."""
    migration = TeamColumn("legacy", drop_indexes=("legacy_a",), added=(("note", "TEXT"),))
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE toolcards_legacy (a INTEGER)")
        conn.execute("CREATE INDEX toolcards_legacy_a ON toolcards_legacy (a)")
        conn.execute("INSERT INTO toolcards_legacy VALUES (1)")
        conn.commit()
        with conn.cursor() as cur:
            migration.postgres(cur)
        conn.commit()
        assert conn.execute("SELECT a, note, team_id FROM toolcards_legacy").fetchall() == [
            (1, None, "")
        ]
        assert conn.execute("SELECT to_regclass('toolcards_legacy_a')").fetchone() == (None,)
        conn.commit()
        with conn.cursor() as cur:
            migration.postgres(cur)
        held = conn.execute(
            "SELECT mode FROM pg_locks WHERE pid = pg_backend_pid() "
            "AND relation = 'toolcards_legacy'::regclass"
        ).fetchall()
        assert held == [], held  # the second run read the columns and changed nothing
