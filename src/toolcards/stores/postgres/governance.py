"""Governance state in PostgreSQL, for a team held by many processes: pending approvals,
rate-limit counters and the audit trail (:class:`~toolcards.governance.audit.log.AuditLog` with a
``postgresql://`` location uses :class:`PostgresAuditTable`).

One module owns this SQL; the approval logic is the SQLite store's (the same statements, with
PostgreSQL's placeholders), so both pass one contract suite.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from toolcards.stores import approvals, audit_sql
from toolcards.stores.approvals import SqlApprovalStore
from toolcards.stores.base import Limit
from toolcards.stores.migrate import TeamColumn
from toolcards.stores.postgres.connections import Connections

_BUCKETS = """
CREATE TABLE IF NOT EXISTS toolcards_rate_buckets (
    key TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL
)
"""

_SCHEMA_LOCK = 7_264_331_943


class _Cursorish:
    """A psycopg cursor speaking the ``?`` placeholders of the shared SQL."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._cursor.execute(sql.replace("?", "%s"), params)
        return self._cursor


def postgres_ddl(sqlite_ddl: str) -> str:
    """The SQLite schema of an audit or approval table, for PostgreSQL: the same columns
    (64-bit ids, double precision reals), with ``toolcards_`` table and index names."""
    ddl = sqlite_ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
    ddl = re.sub(r"\bREAL\b", "DOUBLE PRECISION", ddl)
    ddl = re.sub(r"\b(audit|approvals)(?=[ (_])", r"toolcards_\1", ddl)
    return ddl


def _create(
    db: Connections, table: str, migration: TeamColumn | None = None, indexes: str = ""
) -> None:
    """Create a table (SQLite DDL, translated), add its team column when it predates it,
    then its indexes: under one advisory lock, so concurrent processes migrate once."""
    with db.transaction(), db.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        cur.execute(postgres_ddl(table))
        if migration is not None:
            migration.postgres(cur)
        for statement in postgres_ddl(indexes).split(";"):
            if statement.strip():
                cur.execute(statement)


def named_team(team_id: str | None) -> str:
    """``team_id``, which a shared database needs: without it two processes that each left
    it out would silently be one team (ValueError naming the key)."""
    if not team_id:
        raise ValueError(
            "team_id: a PostgreSQL store holds many teams; name the team its rows belong to"
        )
    return team_id


class _TeamTable:
    """One team's view of a governance table in PostgreSQL: the connections, the printable
    location, the team, and the table made (and migrated) on first open."""

    def __init__(self, url: str, team_id: str | None, connect_timeout: float) -> None:
        self.team_id = named_team(team_id)
        self._db = Connections(url, connect_timeout=connect_timeout)
        self.location = self._db.location

    def close(self) -> None:
        self._db.close()


class PostgresApprovalStore(_TeamTable, SqlApprovalStore):
    """Pending approvals in a PostgreSQL database: every process of a team sees one set, and
    a grant made in one process releases the call waiting in another."""

    table = "toolcards_approvals"

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        _create(self._db, approvals.TABLE, approvals.MIGRATION, approvals.INDEXES)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("LOCK TABLE toolcards_approvals IN SHARE ROW EXCLUSIVE MODE")
            yield _Cursorish(cur)

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._db.cursor() as cur:
            yield _Cursorish(cur)


class PostgresRateLimiter(_TeamTable):
    """Token buckets in PostgreSQL: a limit of 5/min holds across every process and machine
    (the database's clock refills them, so machines need not agree on the time)."""

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        _create(self._db, _BUCKETS)

    def acquire(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """Take one token from every applicable bucket: 0.0 when allowed, else the seconds
        until the call would be (no token is taken then)."""
        if not limits:
            return 0.0
        keys = [(_bucket_key(self.team_id, lim, principal, tool_id), lim) for lim in limits]
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT extract(epoch from clock_timestamp())::float8")
            now = float(cur.fetchone()[0])
            states: list[tuple[str, float]] = []
            wait = 0.0
            for key, lim in sorted(keys, key=lambda item: item[0]):  # one lock order
                cur.execute(
                    "INSERT INTO toolcards_rate_buckets VALUES (%s, %s, %s) "
                    "ON CONFLICT (key) DO NOTHING",
                    (key, float(lim.count), now),
                )
                cur.execute(
                    "SELECT tokens, updated FROM toolcards_rate_buckets WHERE key=%s FOR UPDATE",
                    (key,),
                )
                tokens, updated = cur.fetchone()
                rate = lim.count / lim.period
                tokens = min(float(lim.count), float(tokens) + (now - float(updated)) * rate)
                if tokens < 1.0:
                    wait = max(wait, (1.0 - tokens) / rate)
                states.append((key, tokens))
            taken = 0.0 if wait > 0.0 else 1.0
            for key, tokens in states:
                cur.execute(
                    "UPDATE toolcards_rate_buckets SET tokens=%s, updated=%s WHERE key=%s",
                    (tokens - taken, now, key),
                )
        return wait

    def reset(self) -> None:
        """Forget this team's buckets (other teams' stay)."""
        prefix = json.dumps([self.team_id])[:-1] + ","
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("DELETE FROM toolcards_rate_buckets WHERE starts_with(key, %s)", (prefix,))


def _bucket_key(team_id: str, lim: Limit, principal: str, tool_id: str) -> str:
    """One bucket per team, limit, principal and tool; JSON, so no two tuples share a key."""
    return json.dumps([team_id, lim.index, lim.count, lim.period, principal, tool_id])


def _audit_sql(sql: str) -> str:
    """The audit log's statements for this table and PostgreSQL's placeholders."""
    return sql.replace(" audit ", " toolcards_audit ").replace("?", "%s")


class PostgresAuditTable(_TeamTable):
    """The audit trail in PostgreSQL: every process of a team appends to one table."""

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        _create(self._db, audit_sql.TABLE, audit_sql.MIGRATION, audit_sql.INDEXES)

    def insert(self, rows: list[tuple[Any, ...]]) -> None:
        with self._db.transaction(), self._db.cursor() as cur:
            cur.executemany(_audit_sql(audit_sql.INSERT), [(*r, self.team_id) for r in rows])

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        sql, args = _audit_sql(audit_sql.select(where)), [self.team_id, *params, limit]

        def query(cur: Any) -> list[tuple[Any, ...]]:
            cur.execute(sql, args)
            return list(cur.fetchall())

        return self._db.read(query)  # a connection lost since the last read is reopened once

    def close(self) -> None:
        self._db.close()
