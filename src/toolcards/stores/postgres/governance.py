"""Governance state in PostgreSQL, for a team held by many processes: pending approvals,
rate-limit counters and the audit trail (:class:`~toolcards.governance.audit.log.AuditLog` with a
``postgresql://`` location uses :class:`PostgresAuditTable`).

One module owns this SQL; the approval logic is the SQLite store's (the same statements, with
PostgreSQL's placeholders), so both pass one contract suite.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

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

_T = TypeVar("_T")
_SCHEMA_LOCK = 7_264_331_943
_TABLE_NAME = re.compile(r"\b(audit|approvals)(?=[ (_])")


class _Cursorish:
    """A psycopg cursor speaking the ``?`` placeholders of the shared SQL (``tables``: the
    shared SQL's table names are SQLite's, made PostgreSQL's)."""

    def __init__(self, cursor: Any, *, tables: bool = False) -> None:
        self._cursor = cursor
        self._tables = tables

    def _sql(self, sql: str) -> str:
        return (_TABLE_NAME.sub(r"toolcards_\1", sql) if self._tables else sql).replace("?", "%s")

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._cursor.execute(self._sql(sql), params)
        return self._cursor


def postgres_ddl(sqlite_ddl: str) -> str:
    """The SQLite schema of an audit or approval table, for PostgreSQL: the same columns
    (64-bit ids, double precision reals), with ``toolcards_`` table and index names."""
    ddl = sqlite_ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
    ddl = re.sub(r"\bREAL\b", "DOUBLE PRECISION", ddl)
    return _TABLE_NAME.sub(r"toolcards_\1", ddl)


def create_table(
    db: Connections, table: str, migration: TeamColumn | None = None, indexes: str = ""
) -> None:
    """Create a table (SQLite DDL, translated), add its team column when it predates it,
    then its indexes: under one advisory lock, so concurrent processes migrate once."""
    with db.transaction(), db.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in postgres_ddl(table).split(";"):
            cur.execute(statement)
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
        create_table(self._db, approvals.TABLE, approvals.MIGRATION, approvals.INDEXES)

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
        create_table(self._db, _BUCKETS)

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


class PostgresAuditTable(_TeamTable):
    """The audit trail in PostgreSQL: every process of a team appends to one table, and to
    one chain (each write locks the team's chain head until it commits)."""

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        create_table(self._db, audit_sql.TABLE, audit_sql.MIGRATION, audit_sql.INDEXES)

    def insert(
        self,
        rows: list[tuple[Any, ...]],
        *,
        replay: bool = False,
        texts: list[bytes] | None = None,
    ) -> int:
        with self._db.transaction(), self._db.cursor() as cur:
            table = _Cursorish(cur, tables=True)
            lock = " FOR UPDATE"  # writers of the team, in any process, chain one by one
            return audit_sql.write(table, self.team_id, rows, replay=replay, lock=lock, texts=texts)

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        sql, args = audit_sql.select(where), [self.team_id, *params, limit]
        return self._read(lambda cur: list(cur.execute(sql, args).fetchall()))

    def chain_page(self, after: int, limit: int) -> list[Any]:
        return self._read(lambda cur: audit_sql.chain_page(cur, self.team_id, after, limit))

    def chain_row(self, seq: int) -> int | None:
        return self._read(lambda cur: audit_sql.chain_row(cur, self.team_id, seq))

    def chain_head(self) -> tuple[int, str] | None:
        return self._read(lambda cur: audit_sql.chain_head(cur, self.team_id))

    def unchained(self) -> tuple[int, int | None, int | None]:
        return self._read(lambda cur: audit_sql.unchained(cur, self.team_id))

    def other_teams(self) -> list[str]:
        return self._read(lambda cur: audit_sql.other_teams(cur, self.team_id))

    def _read(self, query: Callable[[_Cursorish], _T]) -> _T:
        # a connection lost since the last read is reopened once
        return self._db.read(lambda cur: query(_Cursorish(cur, tables=True)))
